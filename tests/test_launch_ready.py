"""When the launcher starts `gym eval run --no-serve`: not at "all N servers ready" alone, but once
the run is ready to collect (Gym 0.5+ then waits for the model endpoints, silently when they answer)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gymwatch.core.layout import ENV
from gymwatch.core.model import RunState
from gymwatch.core.reducer import Reducer
from gymwatch.launch.plan import Plan, pass_startup_timeout
from gymwatch.launch.startup import CAN_COLLECT, NEVER, NOT_YET, collect_stage, progress_line, timeout_summary

ALL_READY = "All 3 / 3 servers ready! Polling every 60s"


def state_of(*lines: str, version: str = "") -> RunState:
    state = RunState(root="/r")
    state.info.gym_version = version
    r = Reducer(state)
    for name in ("mcqa", "mcqa_simple_agent", "policy_model"):
        r.server(name)
    for i, text in enumerate(lines, 1):
        r.stream_line(ENV, "gym_env_start.stdout.log", i, text)
    return state


class Head:
    """A head server whose /readyz answers `status` (None: no head at all)."""

    def __init__(self, status: int):
        code = status

        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(code if self.path == "/readyz" else 200)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.addr = f"127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def head():
    made = []

    def make(status):
        made.append(Head(status))
        return made[-1].addr
    yield make
    for h in made:
        h.close()


NOBODY = "127.0.0.1:9"     # discard: nothing answers


def test_not_before_every_server_is_ready(head):
    assert collect_stage(state_of("Waiting for servers to spin up"), head(200), 99)[0] == NOT_YET


def test_gym_07_head_server_says_when(head):
    st = state_of(ALL_READY, version="0.7.0")
    assert collect_stage(st, head(503), 99) == (NOT_YET, "the head server is not ready yet (/readyz)")
    assert collect_stage(st, head(200), 0)[0] == CAN_COLLECT


def test_gym_04_has_no_endpoint_wait(head):
    assert collect_stage(state_of(ALL_READY, version="0.4.0"), head(404), 0)[0] == CAN_COLLECT


def test_gym_05_06_without_readyz_waits_a_grace_for_gym_to_say_it_waits():
    st = state_of(ALL_READY, version="0.6.0")
    assert collect_stage(st, NOBODY, 1)[0] == NOT_YET
    assert collect_stage(st, NOBODY, 60)[0] == CAN_COLLECT
    st.info.endpoint_limit = 0                         # the check is off: nothing to wait for
    assert collect_stage(st, NOBODY, 1)[0] == CAN_COLLECT


def test_the_endpoint_wait_is_followed_to_its_end():
    wait = ["Waiting for 1 model endpoint(s) to answer: http://127.0.0.1:18996/v1 (openai_base_url)",
            "If an inference server is still loading weights this is expected. Waiting up to 600s...",
            "  still waiting, 30s elapsed"]
    st = state_of(ALL_READY, *wait, version="0.7.0")
    stage, why = collect_stage(st, NOBODY, 999)
    assert stage == NOT_YET and "http://127.0.0.1:18996/v1" in why
    assert "waiting for model endpoint(s) http://127.0.0.1:18996/v1 (openai_base_url): 30s of 600s" in progress_line(st)
    assert "all servers ready, but not ready to collect" in timeout_summary(st, 700, why)
    ok = state_of(ALL_READY, *wait, "All model endpoints are answering after 51s.", version="0.7.0")
    assert collect_stage(ok, NOBODY, 0)[0] == CAN_COLLECT
    gave_up = state_of(ALL_READY, *wait, "Error: 1 model endpoint(s) never answered within 600s:",
                       version="0.7.0")
    stage, why = collect_stage(gave_up, NOBODY, 0)
    assert stage == NEVER and "never answered within 600s" in why


def _plan(version: str, *env: str) -> Plan:
    from pathlib import Path

    return Plan(gym=["gym"], env_args=["env", "start", *env], eval_args=None, run_dir=Path("/r"),
                cwd=Path("/r"), gym_version=version)


def test_startup_timeout_becomes_gyms_spinup_limit_from_07():
    p = _plan("0.7.0")
    pass_startup_timeout(p, 1200)
    assert p.env_args[-1] == "++server_spinup_timeout_seconds=1200" and p.notes
    own = _plan("0.7.0", "++server_spinup_timeout_seconds=90")
    pass_startup_timeout(own, 1200)
    assert own.env_args[-1] == "++server_spinup_timeout_seconds=90"
    for version in ("0.4.0", "unknown"):
        old = _plan(version)
        pass_startup_timeout(old, 1200)
        assert old.env_args == ["env", "start"] and not old.notes
    none = _plan("0.7.0")
    pass_startup_timeout(none, None)
    assert none.env_args == ["env", "start"]

"""Startup truth while Gym runs, on recorded real Gym runs: a head server that could not bind its
port is the run's problem at once (Gym itself waits for it forever); servers that died silently
after their venv install are all named; a collection seen only through its files is live."""

from __future__ import annotations

from conftest import FIXTURES
from gymwatch.core.layout import ENV
from gymwatch.core.model import RunState
from gymwatch.core.reducer import Reducer
from gymwatch.core.session import RunSession
from gymwatch.core.verdict import verdict
from gymwatch.replay import Replayer

RECORDED = FIXTURES / "gym-0.4.0-recorded"


def test_head_port_hang_is_startup_failed_while_gym_still_waits(tmp_path):
    rp = Replayer(RECORDED / "head_port_hang", tmp_path / "run")
    rp.step_to(20.0)                    # the bind error and the first `Head server is not up yet`
    s = RunSession.open(str(tmp_path / "run"), check_processes=False)
    s.poll()
    v = verdict(s.state)
    assert v.name == "startup_failed" and v.exit_code == 2
    assert "could not bind port 53653" in v.reason and "waits for it forever" in v.reason
    assert v.evidence.where() == "gym_env_start.stderr.log:6"
    assert [e.where() for e in v.related] == ["gym_env_start.stdout.log:4"]


def feed(*lines: str) -> RunState:
    st = RunState(root="/r")
    r = Reducer(st)
    for i, text in enumerate(lines, 1):
        r.stream_line(ENV, "gym_env_start.stdout.log", i, text)
    return st


def test_a_head_server_gym_cannot_reach_is_named_while_starting():
    st = feed("Head server is not up yet (status `timeout`). Sleeping...")
    assert "head server" not in verdict(st).reason            # one check: 3 s in, it may just be slow
    st = feed(*["Head server is not up yet (status `connection_error`). Sleeping..."] * 2)
    v = verdict(st)
    assert v.name == "starting" and "cannot reach its own head server (status connection_error, 2 checks)" in v.reason


def test_a_servers_bind_error_is_not_the_head_servers():
    st = feed("(policy_model) ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 9): x")
    assert st.parent.head_failed is None


def test_an_unprefixed_bind_error_is_the_head_servers_whatever_was_read_before_it():
    """Recorded (head_port_in_use): the port's holder answered Gym's head check, so Gym went on to
    wait for its servers on stdout while its head server's bind error went to stderr. The two
    files are read in either order."""
    st = feed("Waiting for servers to spin up",
              "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 9): x")
    assert st.parent.head_failed is not None and st.parent.head_failed.line == 2


def test_cold_build_silent_deaths_are_all_named_in_plain_words():
    """Recorded: a cold build with +nemo_gym_log_dir; policy_model and mcqa_simple_agent die
    right after uv's package list without a word, Gym names only policy_model; mcqa survives."""
    s = RunSession.open(str(RECORDED / "cold_build_silent_deaths"), check_processes=False)
    s.poll(final=True)
    st = s.state
    dead = {n for n, srv in st.servers.items() if srv.state == "failed"}
    assert dead == {"policy_model", "mcqa_simple_agent"}
    for name in dead:
        srv = st.servers[name]
        assert srv.silent_death and "died without an error message right after its venv install" in srv.failure_reason
        assert ".md" not in srv.failure_reason and "§" not in srv.failure_reason   # no document users lack
        assert srv.failure.file == f"logs/{name}.log" and "Installed 159 packages" in srv.failure.text
    assert st.servers["mcqa"].state != "failed"
    v = verdict(st)
    assert v.name == "startup_failed" and v.evidence.file == "logs/policy_model.log"


def test_a_200_trial_07_collection_seen_from_another_machine_is_collecting(tmp_path):
    """Recorded 0.7.0, replayed to 76 of 200 trials, no Gym process visible: still collecting,
    nothing missing (the judgement comes from the files growing)."""
    rp = Replayer(FIXTURES / "gym-0.7.0-cases-extra" / "g07_200_trials", tmp_path / "run")
    rp.step_to(70.5)
    s = RunSession.open(str(tmp_path / "run"))
    s.refresh_processes()
    s.poll()
    v = verdict(s.state)
    assert v.name == "collecting" and "live by its files" in v.reason
    c = s.state.trials
    assert 0 < sum(1 for t in c.values() if t.status == "completed") < 200
    assert not any(t.status == "missing" for t in c.values())

"""core/fast/fork.py (a report's big files of rows read in part by forked children: the
materialized inputs whole, the rollouts' back part) gives the model its reference twin gives, the
same read in one process: on every recorded run and on rows files with odd rows (not ASCII, an
attempt index, no key, not JSON, blank, a 5000-digit integer, a failure row, a never-ran row),
two rows on a line, a row over two lines, CR line ends, a cut last line, wherever the rollouts are
cut between the two; and a child that fails in any way is made up for."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gymwatch.core import fast, session
from gymwatch.core.cluster.ray import RayState
from gymwatch.core.fast import fork
from gymwatch.core.session import read_run
from runbuilder import Run, rollout

FIXTURES = Path(__file__).parent / "fixtures"
RUNS = sorted({p.parent for p in FIXTURES.rglob("rollouts.jsonl")})
ODD = ['{"_ng_task_index": 7, "_ng_rollout_index": 0, "q": "ünïcødé", "reward": 1.0}',
       '{"_ng_task_index": 8, "_ng_rollout_index": 0, "_ng_attempt_index": 1}', '{"_ng_task_index": 9}',
       "not json", "", "  ", '{"_ng_task_index": 10, "_ng_rollout_index": 0, "n": ' + "9" * 5000 + "}",
       json.dumps(rollout(3, 1, _ng_failure_class="agent_run_error", _ng_failure_message="500")),
       json.dumps(rollout(2, 0, _ng_attempt_index=1, reward=0.5)), json.dumps(rollout(1, 0, ran=False)),
       json.dumps(rollout(5, 0)) + " " + json.dumps(rollout(6, 0)), '{"_ng_task_index": 4,\n"_ng_rollout_index": 1}']


def make(root: Path, odd: list[int], tail: str, cr: bool) -> Path:
    run = Run(root)
    rows = [json.dumps(rollout(t, r, reward=(t * 7 + r) % 3 / 2)) for t in range(12) for r in range(2)]
    inputs = [json.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "agent_ref": {"name": "env_agent"},
                          "responses_create_params": {"input": [{"role": "user", "content": "q" * 50}]}})
              for t in range(12) for r in range(2)]
    for k in odd:
        rows.insert(k % (len(rows) + 1), ODD[k % len(ODD)])
        inputs.insert(k * 3 % (len(inputs) + 1), ODD[k * 5 % len(ODD)])
    run.rows("", *rows)
    run.lines("rollouts_materialized_inputs.jsonl", *inputs)
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        if tail:
            run.write(name, tail)
        if cr:
            p = root / name
            data = p.read_bytes()
            p.write_bytes(data[:len(data) // 2] + data[len(data) // 2:].replace(b"\n", b"\r\n"))
    run.rows("_failures", json.dumps({"_ng_task_index": 4, "_ng_rollout_index": 1, "_ng_failure_class": "timeout"}))
    run.finish()
    return root


def model(root: Path, monkeypatch, helpers: bool, share: float = 0.5) -> dict:
    monkeypatch.setattr(session, "ROWS_CHILD_MIN", 0)
    monkeypatch.setattr(session, "KEYS_CHILD_MIN", 0)
    monkeypatch.setattr(session, "ROWS_CHILD_SHARE", share)
    monkeypatch.setattr(fork, "usable_cpus", lambda: 2)
    monkeypatch.setattr(fast, "OFF", set() if helpers else {"fork"})
    s = read_run(str(root), check_processes=False, helpers=True)
    state = asdict(s.state)
    del state["activity"]                                             # when it was read
    state["malformed"].sort(key=lambda m: (m["file"], m["line"]))    # read in another order
    state["tailers"] = sorted((str(p), t.offset, t.lineno) for p, t in s.tailers.items())
    return state


@pytest.fixture
def children(monkeypatch):
    used = []
    real = fork.rows_child
    monkeypatch.setattr(fork, "rows_child", lambda *a: used.append(a) or real(*a))
    return used


def test_every_recorded_run_reads_the_same_with_helpers(monkeypatch, children):
    for run in RUNS:
        for share in (0.5, 0.9):
            assert model(run, monkeypatch, True, share) == model(run, monkeypatch, False), (run, share)
    assert len(children) >= len(RUNS)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(odd=st.lists(st.integers(0, 60), max_size=8), share=st.floats(0.02, 0.98),
       tail=st.sampled_from(["", '{"_ng_task_index": 11, "_ng_rollout_index": 5, "reward": 1']), cr=st.booleans())
def test_odd_rows_anywhere_read_the_same(tmp_path_factory, monkeypatch, children, odd, share, tail, cr):
    root = make(tmp_path_factory.mktemp("run"), odd, tail, cr)
    assert model(root, monkeypatch, True, share) == model(root, monkeypatch, False)
    assert children


@pytest.mark.parametrize("how", ["raises", "garbage", "killed"])
def test_a_helper_that_fails_is_made_up_for(tmp_path, monkeypatch, how):
    root = make(tmp_path / "run", [3, 9], "", False)
    real = fork.Child

    def broken_work(out):
        if how == "raises":
            raise RuntimeError("boom")
        if how == "garbage":
            out.write(b"\xc1 not msgpack")
            return
        os.kill(os.getpid(), 9)

    monkeypatch.setattr(fork, "Child", lambda work, nice=False: real(broken_work, nice))
    assert model(root, monkeypatch, True) == model(root, monkeypatch, False)


def test_no_helper_without_leave(tmp_path, monkeypatch):
    root = make(tmp_path / "run", [], "", False)
    monkeypatch.setattr(fork, "rows_child", lambda *a: pytest.fail("forked"))
    monkeypatch.setattr(session, "ROWS_CHILD_MIN", 0)
    monkeypatch.setattr(session, "KEYS_CHILD_MIN", 0)
    read_run(str(root), check_processes=False, helpers=False)


def _written(state, tmp_path: Path) -> str:
    from gymwatch import report
    from gymwatch.core.verdict import verdict

    out = tmp_path / "report.json"
    with open(out, "w", encoding="utf-8") as fh:
        report.write_json(state, verdict(state), fh)
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("child", ["writes", "fails"])
def test_the_json_reports_forked_part_is_the_text_written_here(tmp_path, monkeypatch, child):
    from gymwatch import report
    from gymwatch.core.verdict import verdict

    monkeypatch.setattr(report, "SPLIT_MIN", 1)
    monkeypatch.setattr(fork, "usable_cpus", lambda: 2)
    forks = []
    real = fork.Child

    def spy(work, nice=False):
        forks.append(1)
        return real(work if child == "writes" else (lambda out: os.kill(os.getpid(), 9)), nice)
    monkeypatch.setattr(fork, "Child", spy)
    for run in RUNS:
        state = read_run(str(run), check_processes=False).state
        state.ray = RayState(url="http://head:8265")      # (a key after the trials)
        want = "".join(report.iter_json(state, verdict(state)))
        assert want.endswith('"error": "",\n    "notes": []\n  }\n}\n')
        assert _written(state, tmp_path) == want, run
    assert len(forks) == len(RUNS)

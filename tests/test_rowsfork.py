"""A report reads the back part of a big rollouts file in a forked child (core/rowsfork.py): the
model is the one the report makes reading the whole file itself, wherever the file is cut, odd
rows, retries, failures and line ends included, and any failure of the child is made up for."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from gymwatch.core import rowsfork, session
from gymwatch.core.session import read_run
from runbuilder import Run, rollout

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
FIXTURES = Path(__file__).parent / "fixtures"
RUNS = sorted({p.parent for p in FIXTURES.rglob("rollouts.jsonl")})
ODD = ['{"_ng_task_index": 7, "_ng_rollout_index": 0, "q": "ünïcødé", "reward": 1.0}', "not json", "", "  ",
       json.dumps(rollout(3, 1, _ng_failure_class="agent_run_error", _ng_failure_message="500")),
       json.dumps(rollout(2, 0, _ng_attempt_index=1, reward=0.5)), json.dumps(rollout(1, 0, ran=False)),
       '{"_ng_task_index": 10, "_ng_rollout_index": 0, "n": ' + "9" * 5000 + "}"]


def make(root: Path, tail: str = "", crlf: bool = False) -> Path:
    run = Run(root)
    rows = [json.dumps(rollout(t, r, reward=(t * 7 + r) % 3 / 2)) for t in range(12) for r in range(2)]
    rows[5:5] = ODD
    rows[15:15] = ODD
    run.rows("", *rows)
    if tail:
        run.write("rollouts.jsonl", tail)
    if crlf:
        p = root / "rollouts.jsonl"
        data = p.read_bytes()
        p.write_bytes(data[:len(data) // 2] + data[len(data) // 2:].replace(b"\n", b"\r\n"))
    run.rows("_failures", json.dumps({"_ng_task_index": 4, "_ng_rollout_index": 1, "_ng_failure_class": "timeout"}))
    run.expect(12, 2)
    run.finish()
    return root


def model(root: Path, monkeypatch, helpers: bool, share: float = 0.5) -> dict:
    monkeypatch.setattr(session, "ROWS_CHILD_MIN", 0)
    monkeypatch.setattr(session, "ROWS_CHILD_SHARE", share)
    monkeypatch.setattr(session.procs, "usable_cpus", lambda: 2)
    s = read_run(str(root), check_processes=False, helpers=helpers)
    state = asdict(s.state)
    del state["activity"]                                             # when it was read
    t = s.tailers.get(s.layout.rollouts) if s.layout.rollouts else None
    state["tailer"] = (t.offset, t.lineno) if t else None
    return state


def test_every_recorded_run_reads_the_same_with_a_helper(monkeypatch):
    used = []
    real = rowsfork.RowsChild
    monkeypatch.setattr(rowsfork, "RowsChild", lambda *a: used.append(a) or real(*a))
    for run in RUNS:
        for share in (0.5, 0.9):
            assert model(run, monkeypatch, True, share) == model(run, monkeypatch, False), (run, share)
    assert len(used) >= len(RUNS)


@pytest.mark.parametrize("share", [0.05, 0.3, 0.6, 0.95])
@pytest.mark.parametrize("tail, crlf", [("", False), ('{"_ng_task_index": 11, "_ng_rollout_index": 5, "reward": 1', False),
                                        ("", True)], ids=["whole", "cut_last_line", "crlf_back_half"])
def test_odd_rows_anywhere_read_the_same(tmp_path, monkeypatch, share, tail, crlf):
    root = make(tmp_path / "run", tail, crlf)
    assert model(root, monkeypatch, True, share) == model(root, monkeypatch, False)


@pytest.mark.parametrize("how", ["raises", "garbage", "killed"])
def test_a_helper_that_fails_is_made_up_for(tmp_path, monkeypatch, how):
    root = make(tmp_path / "run")
    if how == "raises":
        def broken(*a):
            raise RuntimeError("boom")
    elif how == "garbage":
        def broken(*a):
            return b"\xc1 not msgpack"
    else:
        def broken(*a):
            os.kill(os.getpid(), 9)
    monkeypatch.setattr(rowsfork, "_decode", broken)
    assert model(root, monkeypatch, True) == model(root, monkeypatch, False)


def test_no_helper_without_leave(tmp_path, monkeypatch):
    root = make(tmp_path / "run")
    monkeypatch.setattr(rowsfork, "RowsChild", lambda *a: pytest.fail("forked"))
    model(root, monkeypatch, False)

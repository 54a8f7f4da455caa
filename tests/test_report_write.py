"""`gymwatch report --format json` writes the back half of a big run's trials in a forked child
(report.write_json): the same text as report.iter_json, whatever the child does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gymwatch import report
from gymwatch.core.session import read_run
from gymwatch.core.verdict import verdict

FIXTURES = Path(__file__).parent / "fixtures"
RUNS = sorted({p.parent for p in FIXTURES.rglob("rollouts.jsonl")})


def _written(state, tmp_path: Path, encoding: str = "utf-8") -> str:
    out = tmp_path / "report.json"
    with open(out, "w", encoding=encoding) as fh:
        report.write_json(state, verdict(state), fh)
    return out.read_text(encoding=encoding)


@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "memfd_create"), reason="no fork/memfd")
def test_the_forked_half_gives_the_same_text(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "SPLIT_MIN", 1)
    monkeypatch.setattr(report, "usable_cpus", lambda: 2)
    forks = []
    real = report._fork_writer
    monkeypatch.setattr(report, "_fork_writer", lambda *a: forks.append(1) or real(*a))
    for run in RUNS:
        state = read_run(str(run), check_processes=False).state
        assert _written(state, tmp_path) == "".join(report.iter_json(state, verdict(state))), run
    assert len(forks) == len(RUNS)


@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "memfd_create"), reason="no fork/memfd")
def test_a_child_that_fails_has_its_half_written_here(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "SPLIT_MIN", 1)

    def failing(state, trials, lo, hi, out):
        fd = os.memfd_create("t")
        os.write(fd, b"garbage")
        pid = os.fork()
        if pid == 0:
            os._exit(3)
        return pid, fd

    monkeypatch.setattr(report, "_fork_writer", failing)
    state = read_run(str(RUNS[0]), check_processes=False).state
    assert _written(state, tmp_path) == "".join(report.iter_json(state, verdict(state)))


def test_without_a_real_file_it_writes_alone(monkeypatch):
    import io

    monkeypatch.setattr(report, "SPLIT_MIN", 1)
    state = read_run(str(RUNS[0]), check_processes=False).state
    out = io.StringIO()
    report.write_json(state, verdict(state), out)
    assert out.getvalue() == "".join(report.iter_json(state, verdict(state)))

"""The merged view's order (core/logset.py): the servers' lines as Gym's captured stdout received
them, else by their timestamps, else file by file; lines appended later in arrival order."""

from pathlib import Path

from conftest import CASES07
from gymwatch.core.logset import BY_GYM, BY_STAMPS, LogSet, arrival_order


def _rows(ls: LogSet) -> list[tuple[str, str]]:
    return [(ls.labels[src], text) for src, _, text in (ls.text(r) for r in range(ls.rows))]


def test_a_07_run_reads_in_the_order_gym_received_the_lines():
    run = CASES07 / "g07_run_failures_sidecar"
    names = ["mcqa", "mcqa_environment_server", "mcqa_simple_agent", "policy_model"]
    sources = [(n, str(run / "logs" / f"{n}.log")) for n in names]
    ls = LogSet(sources, background=False, hints=(str(run / "gym_env_start.stdout.log"),))
    assert ls.order_basis == BY_GYM
    rows = _rows(ls)
    assert len(rows) == sum(1 for _ in (run / "logs").glob("*.log") for _ in open(_))
    # every server's startup comes before any server's first failure, and mcqa's end-of-run
    # lines come last (file by file, mcqa's 17 lines came first)
    first_error = next(i for i, (_, t) in enumerate(rows) if "upstream_request_failed" in t or "Traceback" in t)
    ready = [i for i, (_, t) in enumerate(rows) if "Uvicorn running on" in t]
    assert len(ready) == 4 and max(ready) < first_error
    assert rows[-1][0] == "mcqa"
    # each log's own lines keep their order
    for src, name in enumerate(names):
        mine = [t for label, t in rows if label == name]
        assert mine == [ls.indexes[src].line(i) for i in range(ls.indexes[src].line_count)]


def test_timestamps_order_logs_that_gym_did_not_capture(tmp_path: Path):
    a = tmp_path / "a.log"
    b = tmp_path / "b.log"
    a.write_text("2026-12-01 06:00:01,000\tINFO a one\n  a continues\n2026-12-01 06:00:04,000\tINFO a two\n")
    b.write_text("[2026-12-01 06:00:02,000 I 1 2] b one\n[2026-12-01 06:00:03,000 I 1 2] b two\n")
    ls = LogSet([("a", str(a)), ("b", str(b))], background=False)
    assert ls.order_basis == BY_STAMPS
    assert [t.split("]")[-1].strip() if "]" in t else t.split("INFO")[-1].strip() for _, t in _rows(ls)] == [
        "a one", "a continues", "b one", "b two", "a two"]


def test_nothing_to_order_by_reads_file_by_file_then_in_arrival_order(tmp_path: Path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("a1\na2\n")
    b.write_text("b1\n")
    assert arrival_order([("a", str(a)), ("b", str(b))]) is None
    ls = LogSet([("a", str(a)), ("b", str(b))], background=False)
    assert ls.order_basis == "" and [t for _, t in _rows(ls)] == ["a1", "a2", "b1"]
    with open(a, "a") as fh:
        fh.write("a3\n")
    with open(b, "a") as fh:
        fh.write("b2\n")
    ls.refresh()
    assert [t for _, t in _rows(ls)] == ["a1", "a2", "b1", "a3", "b2"]


def test_lines_appended_after_an_interleaved_open_follow_in_arrival_order():
    run = CASES07 / "g07_run_failures_sidecar"
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / "run"
        shutil.copytree(run, dst)
        sources = [(n, str(dst / "logs" / f"{n}.log")) for n in ("mcqa", "policy_model")]
        ls = LogSet(sources, background=False, hints=(str(dst / "gym_env_start.stdout.log"),))
        before = ls.rows
        with open(dst / "logs" / "policy_model.log", "a") as fh:
            fh.write("(policy_model) a new line\n")
        ls.refresh()
        assert ls.rows == before + 1 and _rows(ls)[-1] == ("policy_model", "(policy_model) a new line")

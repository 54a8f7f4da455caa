"""A rollouts file whose last row is cut mid-line: the collector died writing it. That line is the
evidence of the trials it never wrote, not whatever the collector printed last."""

import json

from gymwatch.core.session import RunSession, read_run
from gymwatch.core.verdict import verdict
from gymwatch.report import render, to_json
from runbuilder import Run, rollout

INFO = ("[2026-12-01 06:31:30,423][nemo_gym.telemetry.connection_pool][INFO] - aiohttp connection pool capacity "
        "for this server/CLI process group: workers=1")


def killed_mid_row(tmp_path, cut=True):
    """Five trials expected, two written whole, the third cut short (or whole, `cut=False`); the
    collector's captured stderr ends with an INFO line; its process is gone."""
    run = Run(tmp_path)
    run.expect(5)
    run.rows("", rollout(0), rollout(1))
    third = json.dumps(rollout(2))
    run.write("rollouts.jsonl", third[: len(third) // 2] if cut else third + "\n")
    run.lines("gym_eval_run.stdout.log", "Querying with 2 concurrent requests", "Examples left:", "1. env_agent: 3")
    run.lines("gym_eval_run.stderr.log", INFO)
    s = RunSession.open(str(tmp_path), check_processes=False)
    s.state.collector.alive = False
    return s


def test_the_cut_row_is_the_evidence_of_the_missing_trials(tmp_path):
    s = killed_mid_row(tmp_path)
    s.poll(final=True)
    data = to_json(s.state)
    cut = {"file": "rollouts.jsonl", "line": 3, "text": "", "note": "the last row, cut mid-line (no line end after it)"}
    assert data["collector"]["cut_row"] == cut
    missing = [t for t in data["trials"] if t["status"] == "missing"]
    assert len(missing) == 3
    for t in missing:
        assert t["cause"] == cut and t["evidence"] == cut
        assert cut in t["cause_chain"]
        assert not any("[INFO]" in e["text"] for e in t["cause_chain"])
    assert data["verdict"] == "incomplete" and data["evidence"] == cut
    assert "its last row (rollouts.jsonl:3) is cut mid-line: the collector died while writing it" in data["reason"]
    assert all("[INFO]" not in e["text"] for e in data["related"])
    text = render(s.state, "text")[0]
    assert "  see rollouts.jsonl:3  the last row, cut mid-line (no line end after it)" in text
    assert "  task 2 rollout 0: missing  at rollouts.jsonl:3" in text


def test_a_live_screen_holding_the_partial_line_sees_it_too(tmp_path):
    s = killed_mid_row(tmp_path)
    s.poll()                      # not final: the partial line is held back, never read as a row
    v = verdict(s.state)
    assert v.evidence is not None and (v.evidence.file, v.evidence.line) == ("rollouts.jsonl", 3)
    assert s.state.malformed_count == 0


def test_a_last_row_with_its_line_end_is_no_cut(tmp_path):
    s = killed_mid_row(tmp_path, cut=False)
    s.poll(final=True)
    assert s.state.collector.cut_row is None
    assert "cut mid-line" not in verdict(s.state).reason


def test_a_bad_row_in_the_middle_is_no_cut(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", "{not json", rollout(0))
    state = read_run(str(tmp_path), check_processes=False).state
    assert state.collector.cut_row is None and state.malformed_count == 1


def test_a_finished_collection_is_not_explained_by_a_cut_row(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0), rollout(1))
    run.write("rollouts.jsonl", '{"response": {"out')
    run.finish()
    state = read_run(str(tmp_path), check_processes=False).state
    assert state.collector.cut_row is not None          # the fact is kept ...
    v = verdict(state)
    assert v.name == "ok" and "cut" not in v.reason      # ... but a finished collection lost nothing

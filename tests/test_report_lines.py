"""The text and Markdown reports say something on every line they print: a failed trial's status
as the JSON has it, each related line once and never the evidence again, no item left empty."""

import json
import os
import re
import time

import pytest

from conftest import FIXTURES
from gymwatch.core.session import read_run
from gymwatch.report import render, to_json
from runbuilder import Run, rollout

RUNS = sorted(p.parent for p in FIXTURES.glob("*/*/rollouts.jsonl"))


def reports(path):
    state = read_run(str(path), check_processes=False).state
    return state, render(state, "text")[0], render(state, "md")[0]


@pytest.mark.parametrize("path", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_line_of_the_text_and_markdown_reports_says_something(path):
    state, text, md = reports(path)
    assert "()" not in text
    see = [line.split()[1] for line in text.splitlines() if line.startswith("  see ")][:1]
    also = [line.split()[1] for line in text.splitlines() if line.startswith("  also ")]
    assert len(also) == len(set(also)) and not set(see) & set(also)
    for line in md.splitlines():
        if line.startswith(("- related:", "- evidence:")):
            assert re.fullmatch(r"- \w+: `[^`]+:\d+` \S.*", line), line
    data = to_json(state)
    related = [(e["file"], e["line"]) for e in data["related"]]
    assert len(related) == len(set(related))
    if data["evidence"]:
        assert (data["evidence"]["file"], data["evidence"]["line"]) not in related


def test_a_trial_failed_by_a_collector_line_shows_its_http_status():
    path = FIXTURES / "gym-0.7.0-recorded" / "g070_agent_killed"
    state, text, _ = reports(path)
    assert "  task 2 rollout 0: failed (HTTP 500)  at gym_eval_run.stdout.log:37" in text
    trial = next(t for t in to_json(state)["trials"] if (t["task_index"], t["rollout_index"]) == (2, 0))
    assert trial["http_status"] == 500 and trial["failure_class"] is None


def test_a_failure_row_beside_the_verdict_says_what_it_is():
    path = FIXTURES / "gym-0.7.0-cases" / "g07_run_failures_sidecar"
    state, text, md = reports(path)
    assert "  also rollouts_failures.jsonl:1  the row of task 1 rollout 0 (agent_run_error, HTTP 500)" in text
    assert "- related: `rollouts_failures.jsonl:1` the row of task 1 rollout 0 (agent_run_error, HTTP 500)" in md
    row = next(e for e in to_json(state)["related"] if e["file"] == "rollouts_failures.jsonl")
    assert row["text"] == "" and row["note"].startswith("the row of task 1 rollout 0")


def test_the_collectors_last_line_is_not_repeated_when_it_is_the_evidence(tmp_path):
    run = Run(tmp_path)
    run.expect(2)
    run.rows("", rollout(0))
    retry = ("[request_retry url=http://127.0.0.1:9999/run error=ClientOSError retry=101 elapsed_s=50.7] "
             "Hit 200 global `ClientOSError` while querying http://127.0.0.1:9999/run.")
    run.lines("gym_eval_run.stdout.log", "Querying with 2 concurrent requests", retry)
    old = time.time() - 7200
    for p in tmp_path.iterdir():
        os.utime(p, (old, old))
    state, text, _ = reports(tmp_path)
    assert json.dumps(to_json(state)["evidence"]["text"]) == json.dumps(retry)
    head = text[: text.index("\n\n")]
    assert head.count("gym_eval_run.stdout.log:2") == 1


def test_a_failed_trials_message_is_listed_whole(tmp_path):
    """A failure row's message names what went wrong at its end (`...: ServerDisconnectedError: Server
    disconnected`): the text report's list of trials quotes it whole, not its first 80 characters."""
    run = Run(tmp_path)
    message = ("POST http://127.0.0.1:51191/run returned 500: ServerDisconnectedError: Server disconnected "
               "while reading the agent's answer")
    run.rows("", rollout(0))
    run.rows("_failures", {"_ng_task_index": 1, "_ng_rollout_index": 0, "agent_ref": {"name": "env_agent"},
                           "_ng_failure_class": "agent_run_error", "_ng_failure_message": message})
    run.finish()
    _, text, _ = reports(tmp_path)
    line = next(ln for ln in text.splitlines() if ln.startswith("  task 1 rollout 0: failed"))
    assert f"(agent_run_error: {message})" in line

"""The trial card (core): the rule that decided a trial's status from its own row, the facts, the
conversation, Gym's findings, and the lines that explain it, in reading order."""

from __future__ import annotations

import json

from conftest import CASES, CASES07, RECORDED070
from gymwatch.core import card
from gymwatch.core.model import Evidence
from gymwatch.core.session import read_run
from gymwatch.report import to_json


def card_of(case, key):
    st = read_run(str(case)).state
    t = st.trials[key]
    return card.build(st, t, card.read_row(st.root, t.evidence)), st


def test_never_ran_card_says_which_fields_decided_it():
    c, _ = card_of(CASES / "some_never_ran", (1, 0))
    assert c.status == "never_ran" and c.row.where() == "rollouts.jsonl:7"
    assert c.rule[0] == "never ran: the model was never called"
    assert "response.output is empty ([])" in c.rule
    assert "input_tokens" in c.rule[2] and "output_tokens" in c.rule[2]
    facts = dict(c.facts)
    assert facts["reward"].startswith("0 recorded by Gym, not counted")
    assert facts["response.incomplete_details"] == '{"reason": "max_output_tokens"}'
    assert c.conversation[0][0] == "user" and "\\boxed{}" in c.conversation[0][1]
    assert c.lines[0].where() == "rollouts.jsonl:7" and "every token count is 0" in c.lines[0].note


def test_failed_07_card_walks_from_the_collector_to_the_model_server():
    c, _ = card_of(CASES07 / "g07_run_failures_sidecar", (1, 0))
    assert c.rule[0] == "failed: agent_run_error, HTTP 500"
    assert any(r.startswith("server: mcqa_environment_server") for r in c.rule)
    files = [e.file for e in c.lines]
    assert files[:2] == ["gym_eval_run.stdout.log", "rollouts_failures.jsonl"]
    assert "logs/mcqa_simple_agent.log" in files and files[-1] == "logs/policy_model.log"


def test_missing_card_says_what_ended_the_collector():
    c, st = card_of(CASES / "aborted_500", (1, 0))
    assert c.status == "missing" and c.row is None
    assert any("the collector stopped: aiohttp.client_exceptions.ClientResponseError: 500" in r for r in c.rule)
    assert c.lines[0].file == "gym_eval_run.stderr.log"
    row = next(t for t in to_json(st)["trials"] if (t["task_index"], t["rollout_index"]) == (1, 0))
    assert [e["file"] for e in row["cause_chain"]] == [e.file for e in c.lines]


def test_completed_with_zero_reward_is_a_wrong_answer_not_a_failure():
    st = read_run(str(CASES / "mixed_ok")).state
    t = next(t for t in st.trials.values() if t.status == "completed" and t.reward == 0)
    c = card.build(st, t, card.read_row(st.root, t.evidence))
    assert "judged wrong" in c.rule[1]
    facts = dict(c.facts)
    assert facts["expected"] != facts["extracted"]
    assert to_json(st)["trials"][0]["cause_chain"] == []


def test_health_findings_and_disagreement():
    c, _ = card_of(CASES07 / "g07_health_summary", (1, 0))
    assert c.health[0].startswith("Gym's health check: unhealthy (agent_turn_hollow")
    assert c.lines[-1].file == "rollout_verdicts.jsonl"


def test_conversation_renders_tool_calls_and_reasoning():
    row = {"responses_create_params": {"instructions": "be brief", "input": [
               {"role": "user", "content": [{"type": "input_text", "text": "add 2 and 3"}]}]},
           "response": {"output": [
               {"type": "reasoning", "summary": [{"type": "summary_text", "text": "use the tool"}]},
               {"type": "function_call", "name": "add", "arguments": '{"a": 2, "b": 3}'},
               {"type": "function_call_output", "output": "5"},
               {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "5"}]}]}}
    assert card.conversation(row) == [("instructions", "be brief"), ("user", "add 2 and 3"),
                                      ("reasoning", "use the tool"), ("tool call add", '{"a": 2, "b": 3}'),
                                      ("tool output", "5"), ("assistant", "5")]


def test_read_row_finds_any_line_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(card, "CHUNK", 7)
    p = tmp_path / "r.jsonl"
    rows = [{"i": i, "pad": "x" * (i % 5)} for i in range(50)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows[:-1]) + json.dumps(rows[-1]))   # no last EOL
    for i in (0, 1, 17, 48, 49):
        assert card.read_row(str(tmp_path), Evidence("r.jsonl", i + 1)) == rows[i]
    assert card.read_row(str(tmp_path), Evidence("r.jsonl", 51)) is None
    assert card.read_row(str(tmp_path), Evidence("gone.jsonl", 1)) is None


def test_a_failure_row_card_takes_the_prompt_and_expected_answer_from_the_inputs():
    """A failure-sidecar row has no request: the trial's line in the materialized inputs has it."""
    c, st = card_of(CASES07 / "g07_run_failures_sidecar", (1, 0))
    facts = dict(c.facts)
    assert facts["expected"].endswith("(from the inputs)")
    assert "response body" in facts and "failure type" in facts
    # Gym's servers nest each other's error bodies, escaping them again each time: read as a chain
    assert facts["response body"] == "mcqa_simple_agent → policy_model → upstream: stub forced failure (server_error)"
    assert c.conversation and c.conversation[0][0] == "user"
    assert st.inputs_file == "rollouts_materialized_inputs.jsonl" and st.trials[(1, 0)].input_line


def test_an_error_body_that_is_not_a_chain_is_left_as_it_is():
    assert card.error_chain("upstream timed out") is None
    hops, said = card.error_chain("Hit an exception in SimpleAgent___a calling an inner server: b'not json")
    assert hops == ["a"] and said == "not json"


def test_a_missing_trial_card_shows_what_it_was_asked():
    c, _ = card_of(CASES / "aborted_500", (1, 0))
    assert c.status == "missing" and c.conversation and "expected" in dict(c.facts)


def test_a_failure_gym_gave_no_class_is_said_as_its_failing_call():
    """Gym 0.7's `[rollout_collection] /run failed status=500 row={...}` names the trial, not a class:
    the card says which call failed and where (0.7's collector POSTs /run to the environment server)."""
    c, _ = card_of(RECORDED070 / "g070_env_interrupted_mid_collection", (2, 0))
    assert c.status == "failed"
    assert c.rule[0] == "failed: /run at mcqa_environment_server answered HTTP 500"


def test_a_failed_run_without_environment_servers_went_to_the_agent(tmp_path):
    from runbuilder import Run, rollout

    run = Run(tmp_path)
    run.ready_server("env_agent", 16000)
    run.expect(2)
    run.rows("", rollout(0))
    run.lines("gym_eval_run.stdout.log",
              '[rollout_collection] /run failed status=502 row={"_ng_rollout_index": 0, "_ng_task_index": 1, '
              '"agent_name": "env_agent"}')
    run.finish()
    c, _ = card_of(tmp_path, (1, 0))
    assert c.rule[0] == "failed: /run at env_agent answered HTTP 502"

"""The never-ran truth table (docs/gym-formats.md §9), and the whole-run `no_agent_ran` verdict."""

import json

import pytest

from gymwatch.core.model import RunState
from gymwatch.core.neverran import never_ran
from gymwatch.core.reducer import Reducer
from gymwatch.core.verdict import verdict

ZERO = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}


@pytest.mark.parametrize("response, expected", [
    ({"output": [], "usage": ZERO}, True),
    ({"output": "", "usage": ZERO}, True),
    ({"output": {}, "usage": ZERO}, True),
    ({"output": None, "usage": ZERO}, True),
    # chat-style usage keys
    ({"output": [], "usage": {"prompt_tokens": 0, "completion_tokens": 0}}, True),
    ({"output": [], "usage": {"prompt_tokens": 0}}, True),
    ({"output": [], "usage": {"total_tokens": 0}}, True),
    # output-side-only zeros: a legitimate empty answer, the model WAS called
    ({"output": [], "usage": {"input_tokens": 139, "output_tokens": 0, "total_tokens": 139}}, False),
    ({"output": [], "usage": {"output_tokens": 0}}, False),
    ({"output": [], "usage": {"completion_tokens": 0}}, False),
    ({"output": [], "usage": {"prompt_tokens": 12, "completion_tokens": 0}}, False),
    # any positive count anywhere
    ({"output": [], "usage": {"input_tokens": 0, "output_tokens": 3}}, False),
    ({"output": [], "usage": {"input_tokens": 0, "completion_tokens": 1}}, False),
    # missing or malformed usage
    ({"output": []}, False),
    ({"output": [], "usage": None}, False),
    ({"output": [], "usage": []}, False),
    ({"output": [], "usage": {}}, False),
    ({"output": [], "usage": {"input_tokens": "0"}}, False),
    ({"output": [], "usage": {"input_tokens": None, "total_tokens": 0}}, False),
    ({"output": [], "usage": {"input_tokens": True}}, False),
    ({"output": [], "usage": {"input_tokens": 0.0, "total_tokens": 0}}, True),
    # non-empty outputs of each shape
    ({"output": [{"type": "message"}], "usage": ZERO}, False),
    ({"output": "text", "usage": ZERO}, False),
    ({"output": {"a": 1}, "usage": ZERO}, False),
    ({"output": [None], "usage": ZERO}, False),
    # no output key / not an object
    ({"usage": ZERO}, False),
    (None, False),
    ([], False),
    ("", False),
])
def test_truth_table(response, expected):
    assert never_ran(response) is expected


def _row(task, rollout, response, **extra):
    return json.dumps({"response": response, "reward": 0.0, "_ng_task_index": task,
                       "_ng_rollout_index": rollout, "agent_ref": {"name": "a_agent"}, **extra}).encode()


def _state(rows, failures=(), collector_finished=True):
    state = RunState(root="/r")
    r = Reducer(state)
    for i, raw in enumerate(rows, 1):
        r.rollout_row("rollouts.jsonl", i, raw)
    for i, raw in enumerate(failures, 1):
        r.failure_row("rollouts_failures.jsonl", i, raw)
    state.collector.finished = collector_finished
    return state


NR = {"output": [], "usage": ZERO}
RAN = {"output": [{"type": "message"}], "usage": {"input_tokens": 5, "output_tokens": 2}}


def test_all_never_ran_is_no_agent_ran():
    v = verdict(_state([_row(0, 0, NR), _row(0, 1, NR), _row(1, 0, NR)]))
    assert v.name == "no_agent_ran" and v.exit_code == 2


def test_one_real_answer_makes_it_some_never_ran():
    v = verdict(_state([_row(0, 0, NR), _row(0, 1, RAN)]))
    assert v.name == "some_never_ran" and v.exit_code == 1


def test_unattributed_record_blocks_no_agent_ran():
    bad = json.dumps({"response": NR, "reward": 0.0, "_ng_task_index": "0"}).encode()
    state = _state([_row(0, 0, NR), bad])
    assert state.unattributed_records == 1
    assert verdict(state).name == "some_never_ran"


def test_failure_rows_are_included():
    fail_nr = json.dumps({"_ng_task_index": 1, "_ng_rollout_index": 0, "_ng_failure_class": "agent_run_error",
                          "response": NR}).encode()
    assert verdict(_state([_row(0, 0, NR)], [fail_nr])).name == "no_agent_ran"
    fail_plain = json.dumps({"_ng_task_index": 1, "_ng_rollout_index": 0,
                             "_ng_failure_class": "agent_run_error"}).encode()
    assert verdict(_state([_row(0, 0, NR)], [fail_plain])).name != "no_agent_ran"


def test_never_ran_reward_is_withheld_from_the_mean():
    from gymwatch.core.verdict import mean_reward

    rows = [_row(0, 0, NR), json.dumps({"response": RAN, "reward": 1.0, "_ng_task_index": 1,
                                        "_ng_rollout_index": 0}).encode()]
    state = _state(rows)
    assert mean_reward(state) == 1.0
    t = state.trials[(0, 0)]
    assert t.reward is None and t.withheld_reward == 0.0


def _agent_state(agent_lines):
    state = _state([_row(0, 0, NR), _row(1, 0, NR)])
    r = Reducer(state)
    for i, text in enumerate(agent_lines, 1):
        r.server_log_line("a_agent", "logs/a_agent.log", i, text)
    return state


BANNER = ["INFO:     Started server process [4242]", "INFO:     Application startup complete.",
          "INFO:     Uvicorn running on http://127.0.0.1:8001 (Press CTRL+C to quit)"]


def test_no_agent_ran_points_at_the_rows_and_the_agents_run_lines_not_its_banner():
    state = _agent_state(BANNER + ['INFO:     127.0.0.1:5000 - "POST /run HTTP/1.1" 200 OK',
                                   'INFO:     127.0.0.1:5000 - "POST /run HTTP/1.1" 200 OK'])
    v = verdict(state)
    assert v.name == "no_agent_ran"
    assert (v.evidence.file, v.evidence.line) == ("rollouts.jsonl", 1)
    assert "never called" in v.reason and "every token count is 0" in v.evidence.note
    assert [(e.file, e.line) for e in v.related] == [("logs/a_agent.log", 4)]    # its first /run


def test_no_agent_ran_points_at_an_error_the_agent_printed_while_serving():
    state = _agent_state(BANNER + ['INFO:     127.0.0.1:5000 - "POST /run HTTP/1.1" 200 OK',
                                   "ERROR:    Exception in ASGI application"])
    v = verdict(state)
    assert (v.evidence.file, v.evidence.line) == ("logs/a_agent.log", 5)
    assert [(e.file, e.line) for e in v.related] == [("rollouts.jsonl", 1)]


def test_no_agent_ran_without_agent_logs_points_at_the_rows():
    v = verdict(_state([_row(0, 0, NR)]))
    assert (v.evidence.file, v.evidence.line) == ("rollouts.jsonl", 1) and v.related == []

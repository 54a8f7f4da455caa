"""Fuzzing: random bytes and random Gym-ish lines through every parser, the reducer and the report.
Invariants: nothing but BadLine escapes a row parser, the reducer never raises, the model stays consistent."""

import json

from hypothesis import given, settings, strategies as st

from gymwatch.core import gymlines as gl
from gymwatch.core.layout import BOTH, ENV, EVAL
from gymwatch.core.markers import find_marker
from gymwatch.core.model import SERVER_STATES, TRIAL_STATUSES, VERDICTS, RunState
from gymwatch.core.records import BadLine, failure_facts, materialized_facts, rollout_facts
from gymwatch.core.reducer import Reducer
from gymwatch.core.sanitize import clean
from gymwatch.core.verdict import counts, verdict
from gymwatch.report import render

GYM_LINES = [
    "0 / 3 servers ready. Waiting for servers to spin up: ['a', 'b_agent', 'policy_model']",
    "2 / 3 servers ready. Waiting for servers to spin up: ['policy_model']",
    "All 3 / 3 servers ready! Polling every 60s", "NeMo Gym finished!",
    "RuntimeError: Process `policy_model` finished unexpectedly!", "Traceback (most recent call last):",
    "Timed out after 600s waiting for Gym servers to become ready: a", "[1] a (resources_servers/a)",
    "    'port': 1234,", "    'pid': 99,", "{", "}", "Finished rollout collection! View results at:",
    "aiohttp.client_exceptions.ClientResponseError: 500, message='x', url='http://127.0.0.1:1234/run'",
    "(a) INFO:     Uvicorn running on http://127.0.0.1:1234 (Press CTRL+C to quit)",
    "(b_agent) INFO:     127.0.0.1:1 - \"POST /run HTTP/1.1\" 500 Internal Server Error",
    "(policy_model) [model_retry url=http://x status=500 kind=server_error try=1 max_tries=3]",
    "(a) Resolved 3 packages in 1s", "(a) Installed 3 packages in 1s", "(a) INFO:     Application shutdown complete.",
    "(policy_model) error: Request failed", "(b_agent) Creating virtual environment at: /x/responses_api_agents/s/.venv",
    "Examples left:", "1. b_agent: 3", "Collecting rollouts:  50%|#   | 5/10 [00:01<00:01]",
    "Waiting for head server to spin upINFO:     Waiting", "(a) Traceback (most recent call last):", "(a)   File x",
    "(a) ValueError: y",
]

line_text = st.one_of(st.sampled_from(GYM_LINES), st.text(max_size=120),
                      st.sampled_from(GYM_LINES).flatmap(lambda s: st.integers(0, len(s)).map(lambda i: s[:i])))

json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)
row_dict = st.fixed_dictionaries({}, optional={
    "_ng_task_index": st.one_of(st.integers(-2, 5), json_value), "_ng_rollout_index": st.one_of(st.integers(0, 3), json_value),
    "_ng_attempt_index": st.one_of(st.integers(0, 2), json_value), "reward": json_value,
    "response": st.one_of(json_value, st.fixed_dictionaries({}, optional={"output": json_value, "usage": json_value})),
    "agent_ref": json_value, "_ng_failure_class": json_value})
row_bytes = st.one_of(st.binary(max_size=200), row_dict.map(lambda d: json.dumps(d).encode()))


@settings(max_examples=300, deadline=None)
@given(raw=row_bytes)
def test_row_parsers_raise_only_badline(raw):
    for parse in (rollout_facts, failure_facts, materialized_facts):
        try:
            facts = parse(raw)
        except BadLine:
            continue
        assert facts.task is None or (isinstance(facts.task, int) and facts.task >= 0)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_line_functions_never_raise(text):
    gl.split_prefix(text)
    gl.unglue(text, ["a", "b_agent"])
    gl.parse_pending(text)
    find_marker(text)
    assert "\x1b" not in clean(text)


events = st.lists(st.tuples(st.sampled_from(["env", "eval", "both", "log", "roll", "fail", "mat"]),
                            line_text, row_bytes), max_size=60)


@settings(max_examples=150, deadline=None)
@given(evs=events, ended=st.booleans())
def test_reducer_stays_consistent(evs, ended):
    state = RunState(root="/r")
    r = Reducer(state, clock=lambda: 1.0)
    for n, (kind, text, raw) in enumerate(evs, 1):
        if kind in ("env", "eval", "both"):
            r.stream_line({"env": ENV, "eval": EVAL, "both": BOTH}[kind], f"{kind}.log", n, text)
        elif kind == "log":
            r.server_log_line("a", "logs/a.log", n, text)
        elif kind == "roll":
            r.rollout_row("rollouts.jsonl", n, raw)
        elif kind == "fail":
            r.failure_row("rollouts_failures.jsonl", n, raw)
        else:
            r.materialized_row("rollouts_materialized_inputs.jsonl", n, raw)
    state.collector.alive = not ended
    r.settle(2.0)
    r.settle(2.0)   # idempotent
    assert all(s.state in SERVER_STATES for s in state.servers.values())
    assert all(t.status in TRIAL_STATUSES for t in state.trials.values())
    assert all(key == t.key for key, t in state.trials.items())
    assert sum(counts(state).values()) == len(state.trials)
    v = verdict(state)
    assert v.name in VERDICTS and v.exit_code in (0, 1, 2)
    for fmt in ("json", "text", "md"):
        render(state, fmt)

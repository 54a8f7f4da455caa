"""The report's hot paths give exactly what the general code gives.

- Reducer.rollout_rows / materialized_rows (a run of rows, usual rows applied directly) and
  Reducer.rollout_block (a block of lines decoded at once) against feeding every row to
  rollout_row / materialized_row, on every recorded run and on random mixes of usual, odd and
  broken rows with failure rows and collector lines in any order;
- the report's template for plain completed trials against the encoder's text of trial_json.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic_core import to_json

from gymwatch import report
from gymwatch.core.model import RunState
from gymwatch.core.reducer import Reducer
from gymwatch.core.session import read_run
from gymwatch.core.tail import Tailer

FIXTURES = Path(__file__).parent / "fixtures"
RUNS = sorted({p.parent for p in FIXTURES.rglob("rollouts.jsonl")} | {p.parent.parent for p in FIXTURES.rglob("gym_run/rollouts.jsonl")})


def _row(task, rollout, **kw):
    base = {"responses_create_params": {"input": [{"role": "user", "content": "q"}]},
            "response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": "A"}]}],
                         "usage": {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}},
            "reward": 1.0, "_ng_task_index": task, "_ng_rollout_index": rollout, "agent_ref": {"name": "ag"}}
    base.update(kw)
    return json.dumps(base, ensure_ascii=kw.pop("_ascii", True)).encode()


ROWS = [
    lambda t, r: _row(t, r),
    lambda t, r: _row(t, r, reward=0),
    lambda t, r: _row(t, r, reward=0.25, _ng_attempt_index=1),
    lambda t, r: _row(t, r, response={"output": [], "usage": {"input_tokens": 0, "output_tokens": 0}}),
    lambda t, r: _row(t, r, response={"output": None, "usage": {"prompt_tokens": 0, "completion_tokens": 0}}),
    lambda t, r: _row(t, r, _ng_failure_class="agent_run_error", _ng_failure_message="500"),
    lambda t, r: _row(t, r, reward=None),
    lambda t, r: _row(t, r, reward=True),
    lambda t, r: _row(t, r, _ng_task_index=float(t)),
    lambda t, r: _row(t, r, extra="é ünïcode"),
    lambda t, r: b'{"_ng_task_index": %d, "_ng_rollout_index": %d, "reward": 1' % (t, r),
    lambda t, r: b"",
    lambda t, r: b"   ",
    lambda t, r: b"[1, 2]",
    lambda t, r: _row(t, r)[:-1] + b', "n": ' + b"9" * 5000 + b"}",
    lambda t, r: _row(t, r).replace(b'"A"', b'"\xff"'),
]
MATERIALIZED = [
    lambda t, r: json.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "agent_ref": {"name": "ag"},
                             "responses_create_params": {"input": []}}).encode(),
    lambda t, r: json.dumps({"_ng_task_index": t, "_ng_rollout_index": r, "_ng_attempt_index": 0}).encode(),
    lambda t, r: json.dumps({"_ng_task_index": t}).encode(),
    lambda t, r: b"not json",
]
FAILURE = b'{"_ng_task_index": %d, "_ng_rollout_index": %d, "_ng_failure_class": "agent_run_error"}'
LINE = "[rollout_collection] /run failed status=500 row={\"_ng_rollout_index\": %d, \"_ng_task_index\": %d}"


def _state(feed) -> dict:
    r = Reducer(RunState(root="/run"))
    feed(r)
    return asdict(r.state)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.integers(0, len(ROWS) - 1)), max_size=40),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.integers(0, len(MATERIALIZED) - 1)), max_size=20),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), max_size=4),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), max_size=4),
       st.integers(1, 8), st.booleans())
def test_runs_of_rows_give_the_model_of_rows_one_by_one(rows, mats, fails, lines, cut, failures_first):
    rollouts = [ROWS[k](t, r) for t, r, k in rows]
    materialized = [MATERIALIZED[k](t, r) for t, r, k in mats]

    def before(red: Reducer) -> None:
        if failures_first:
            for i, (t, r) in enumerate(fails, 1):
                red.failure_row("rollouts_failures.jsonl", i, FAILURE % (t, r))
            for i, (t, r) in enumerate(lines, 1):
                red.stream_line("eval", "gym_eval_run.stdout.log", i, LINE % (r, t))

    def one_by_one(red: Reducer) -> None:
        before(red)
        for i, raw in enumerate(materialized, 1):
            red.materialized_row("m.jsonl", i, raw)
        for i, raw in enumerate(rollouts, 1):
            red.rollout_row("rollouts.jsonl", i, raw)

    def in_runs(red: Reducer) -> None:
        before(red)
        for file, rows_, feed in (("m.jsonl", materialized, red.materialized_rows),
                                  ("rollouts.jsonl", rollouts, red.rollout_rows)):
            for start in range(0, len(rows_), cut):
                feed(file, start + 1, rows_[start:start + cut])

    def in_blocks(red: Reducer) -> None:
        before(red)
        for start in range(0, len(materialized), cut):
            red.materialized_rows("m.jsonl", start + 1, materialized[start:start + cut])
        for start in range(0, len(rollouts), cut):
            red.rollout_block("rollouts.jsonl", start + 1, b"".join(r + b"\n" for r in rollouts[start:start + cut]))

    assert _state(in_runs) == _state(one_by_one)
    assert _state(in_blocks) == _state(one_by_one)


def test_every_recorded_run_reads_the_same_by_runs_and_by_rows():
    for run in RUNS:
        for path in sorted(run.rglob("*.jsonl")):
            if "rollouts" not in path.name or "verdict" in path.name:
                continue
            lines = [raw for _, raw in Tailer(str(path)).read(final=True).lines]
            runs = Tailer(str(path)).read(final=True, rows=True).runs
            assert [raw for _, rs in runs for raw in rs] == lines, path
            kind = "materialized" if "materialized" in path.name else "rollout"
            if "failures" in path.name:
                continue

            def by_rows(red, kind=kind, lines=lines):
                for i, raw in enumerate(lines, 1):
                    getattr(red, f"{kind}_row")("f.jsonl", i, raw)

            def by_runs(red, kind=kind, runs=runs):
                for first, rs in runs:
                    getattr(red, f"{kind}_rows")("f.jsonl", first, rs)

            assert _state(by_runs) == _state(by_rows), path
            if kind == "rollout":
                blocks = Tailer(str(path)).read(final=True, blocks=True).blocks

                def by_blocks(red, blocks=blocks):
                    for first, block in blocks:
                        red.rollout_block("f.jsonl", first, block)

                assert _state(by_blocks) == _state(by_rows), path


def test_the_template_for_plain_trials_is_the_encoders_text():
    seen = 0
    for run in RUNS:
        state = read_run(str(run), check_processes=False).state
        plain = report._PlainTrials(state)
        for t in report.sorted_trials(state):
            text = plain.json(t)
            if text is not None:
                seen += 1
                assert text == to_json(report.trial_json(state, t)).decode(), (run, t.key)
    assert seen > 50


def test_the_template_encodes_odd_values_as_the_encoder_does():
    red = Reducer(RunState(root="/run"))
    odd = [(1e-05, "ag"), (0.1 + 0.2, 'a"g\\n'), (-0.0, "é\u2028"), (123456789.125, "x" * 300), (1.0, "")]
    rows = [_row(i, 0, reward=rw, agent_ref={"name": ag}) for i, (rw, ag) in enumerate(odd)]
    rows.append(_row(9, 0, response={"output": [{"type": "message"}]}))      # no usage at all
    red.rollout_rows("out dir/rollouts \"x\".jsonl", 1, rows)
    state = red.state
    plain = report._PlainTrials(state)
    for t in report.sorted_trials(state):
        assert plain.json(t) == to_json(report.trial_json(state, t)).decode()


def test_a_block_is_decoded_at_once_only_when_each_line_is_one_row():
    """msgspec's decode_lines reads a stream of values: a line holding two rows beside a row
    spread over two lines gives as many rows as lines, in the wrong lines."""
    from gymwatch.core import records

    a, b, c = (_row(i, 0).decode() for i in range(3))
    plain = f"{a}\n{b}\n{c}\n".encode()
    assert [r.task for r in records.rollout_block(plain)] == [0, 1, 2]
    two_on_one = f"{a} {b}\n{c[:-1]}\n}}\n".encode()     # 3 lines, 3 values
    assert len(records._TYPED_ROLLOUT_LINES(two_on_one)) == 3
    assert records.rollout_block(two_on_one) is None
    spread = f"{a}\n{c[:-1]}\n,\"x\":{{}}}}\n".encode()
    assert records.rollout_block(spread) is None
    for odd in (f"{a}\n\n{b}\n", f" {a}\n", f"{a} \n", f"{a}\n{b}", f"{a}\n[1]\n"):
        assert records.rollout_block(odd.encode()) is None, odd
    # the reducer reads such a block line by line: the same model as rows one by one
    for block in (two_on_one, spread):
        lines = block.split(b"\n")[:-1]

        def one_by_one(red, lines=lines):
            for i, raw in enumerate(lines, 1):
                red.rollout_row("r.jsonl", i, raw)

        assert _state(lambda red, block=block: red.rollout_block("r.jsonl", 1, block)) == _state(one_by_one)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**70), st.integers(0, 2**40)), max_size=30),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=30))
def test_trials_are_listed_in_key_order(big, small):
    from gymwatch.core.model import Trial

    for keys in (big, small, big + small):
        state = RunState(root="/run")
        for k in keys:
            state.trials[k] = Trial(*k)
        assert [t.key for t in report.sorted_trials(state)] == sorted(state.trials)

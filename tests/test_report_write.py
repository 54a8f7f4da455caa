"""`gymwatch report --format json`: what report.write_json writes is report.iter_json's text; plain
completed trials written from a template give the encoder's text; trials listed in key order."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings, strategies as st
from pydantic_core import to_json

from gymwatch import report
from gymwatch.core.model import RunState
from gymwatch.core.reducer import Reducer
from gymwatch.core.session import read_run
from gymwatch.core.verdict import verdict

FIXTURES = Path(__file__).parent / "fixtures"
RUNS = sorted({p.parent for p in FIXTURES.rglob("rollouts.jsonl")})
ALL_RUNS = sorted(set(RUNS) | {p.parent.parent for p in FIXTURES.rglob("gym_run/rollouts.jsonl")})


def _written(state, tmp_path: Path, encoding: str = "utf-8") -> str:
    out = tmp_path / "report.json"
    with open(out, "w", encoding=encoding) as fh:
        report.write_json(state, verdict(state), fh)
    return out.read_text(encoding=encoding)


def test_the_written_report_is_iter_jsons_text(tmp_path):
    for run in RUNS:
        state = read_run(str(run), check_processes=False).state
        assert _written(state, tmp_path) == "".join(report.iter_json(state, verdict(state))), run


def test_without_a_real_file_it_writes_alone():
    import io

    state = read_run(str(RUNS[0]), check_processes=False).state
    out = io.StringIO()
    report.write_json(state, verdict(state), out)
    assert out.getvalue() == "".join(report.iter_json(state, verdict(state)))


def _row(task, rollout, **kw):
    base = {"responses_create_params": {"input": [{"role": "user", "content": "q"}]},
            "response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": "A"}]}],
                         "usage": {"input_tokens": 10, "output_tokens": 3, "total_tokens": 13}},
            "reward": 1.0, "_ng_task_index": task, "_ng_rollout_index": rollout, "agent_ref": {"name": "ag"}}
    base.update(kw)
    return json.dumps(base, ensure_ascii=kw.pop("_ascii", True)).encode()


def test_the_template_for_plain_trials_is_the_encoders_text():
    seen = 0
    for run in ALL_RUNS:
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
    red.rollout_block("out dir/rollouts \"x\".jsonl", 1, b"".join(r + b"\n" for r in rows))
    state = red.state
    plain = report._PlainTrials(state)
    for t in report.sorted_trials(state):
        assert plain.json(t) == to_json(report.trial_json(state, t)).decode()


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

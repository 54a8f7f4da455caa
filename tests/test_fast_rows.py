"""core/fast/rows.py (a block of rows decoded at once) gives the facts its reference twin,
core/records.py, gives: random rows (any keys, key orders, duplicate keys, odd types, escapes),
corrupted ones, Gym-shaped ones, odd ones beside usual ones, and every row of the recorded runs,
cut into blocks anywhere."""

from __future__ import annotations

import json
import random
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gymwatch.core import fast, records

FIXTURES = Path(__file__).parent / "fixtures"


def _read(kind, block: bytes, quick: bool, monkeypatch) -> list:
    monkeypatch.setattr(fast, "OFF", set() if quick else {"rows"})
    rows = getattr(records, kind)(block)
    return [("bad", str(r)) if isinstance(r, records.BadLine) else r for r in rows]


def assert_same(lines: list[bytes], cuts: list[int], monkeypatch) -> None:
    """Each kind's rows of `lines`, cut into blocks at `cuts`: the same with the fast path as without."""
    lines = [raw for raw in lines if b"\n" not in raw and b"\r" not in raw]    # (a block holds no \r)
    bounds = sorted({0, len(lines), *(c % (len(lines) + 1) for c in cuts)})
    for kind in ("rollout_rows", "input_rows"):
        for a, b in pairwise(bounds):
            block = b"".join(raw + b"\n" for raw in lines[a:b])
            assert _read(kind, block, True, monkeypatch) == _read(kind, block, False, monkeypatch), (kind, block[:300])


# --- rows -----------------------------------------------------------------------------------
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-3, max_value=5),
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70), st.sampled_from([0.0, -0.0, 1.0, 0.5, 1e300, 7.0]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(["", "0", "a\"b", "\\", "\u00e9", "\U0001f600", "}", "{\"response\":1}", "\ud800", "\udc00x"]))
json_values = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=3),
                                                         st.dictionaries(st.text(max_size=6), c, max_size=3)),
                           max_leaves=8)
empties = st.sampled_from([[], "", {}, None])
token = st.one_of(st.sampled_from([0, 0, 0.0, 1, 297, -1, True, False, None, "0", 1.5, -0.0]), scalars)
token_keys = ("total_tokens", "input_tokens", "output_tokens", "prompt_tokens", "completion_tokens",
              "input_tokens_details")
usages = st.one_of(st.dictionaries(st.sampled_from(token_keys), token, max_size=5), json_values)
# times and durations (response.created_at, ng_perf.total_latency_ms): Gym's numbers, and odd ones
seconds = st.one_of(st.sampled_from([1796107104.478194, 1796107104, 124.07326698303223, 0, -0.0, -1, 2 ** 53,
                                     2 ** 53 + 1, 1e300, None, True]), scalars)
perfs = st.one_of(st.fixed_dictionaries({}, optional={"total_latency_ms": seconds, "num_turns": scalars,
                                                      "prompt_tokens": token}), json_values)
responses = st.one_of(
    st.fixed_dictionaries({}, optional={"output": st.one_of(empties, json_values), "usage": usages,
                                        "id": st.text(max_size=5), "status": st.just("completed"),
                                        "response": json_values, "created_at": seconds}),
    json_values)
index = st.one_of(st.integers(min_value=0, max_value=10 ** 6), st.integers(min_value=0, max_value=3), scalars)
row_fields = {
    "responses_create_params": json_values, "response": responses,
    "reward": st.one_of(st.sampled_from([0.0, 1.0, 1, 0]), scalars),
    "_ng_task_index": index, "_ng_rollout_index": index, "_ng_attempt_index": index,
    "agent_ref": st.one_of(st.fixed_dictionaries({"name": st.one_of(st.text(max_size=6), scalars)}), scalars),
    "_ng_failure_class": st.one_of(st.sampled_from(["judge_failed", "", None]), scalars),
    "_ng_failure_message": scalars, "_ng_failure_detail": scalars, "error": scalars,
    "ng_perf": perfs,
    "expected_answer": st.text(max_size=3),
    "mask_sample": st.one_of(st.sampled_from([True, False, 0.0, 1.0, 0, 1, None]), scalars),
}


@st.composite
def row_lines(draw) -> bytes:
    keys = draw(st.lists(st.sampled_from(sorted(row_fields)), unique=True, max_size=len(row_fields)))
    items = [(k, draw(row_fields[k])) for k in keys]
    for _ in range(draw(st.integers(min_value=0, max_value=2))):   # duplicate keys: last one wins
        k = draw(st.sampled_from(sorted(row_fields)))
        items.insert(draw(st.integers(min_value=0, max_value=len(items))), (k, draw(row_fields[k])))
    draw(st.randoms(use_true_random=False)).shuffle(items)
    compact = draw(st.booleans())
    ascii_ = draw(st.booleans())
    sep = ("," if compact else ", "), (":" if compact else ": ")
    body = sep[0].join(json.dumps(k, ensure_ascii=ascii_) + sep[1] +
                       json.dumps(v, ensure_ascii=ascii_, separators=sep) for k, v in items)
    text = "{" + body + "}"
    if draw(st.booleans()):
        text = draw(st.sampled_from(["", " ", "\t"])) + text + draw(st.sampled_from(["", " ", "\r"]))
    return text.encode("utf-8", "surrogatepass")


@st.composite
def corrupted(draw) -> bytes:
    raw = draw(row_lines())
    how = draw(st.sampled_from(["cut", "insert", "flip", "glue", "top"]))
    i = draw(st.integers(min_value=0, max_value=max(0, len(raw))))
    if how == "cut":
        return raw[:i]
    if how == "insert":
        return raw[:i] + draw(st.sampled_from([b"\"", b"\\", b"{", b"}", b",", b"\xff", b"\x01", b" x"])) + raw[i:]
    if how == "flip" and raw:
        j = min(i, len(raw) - 1)
        return raw[:j] + bytes([raw[j] ^ draw(st.integers(min_value=1, max_value=255))]) + raw[j + 1:]
    if how == "glue":
        return raw[:i] + draw(row_lines())      # a torn write: a partial row, then a whole one
    return draw(st.sampled_from([b"[]", b"1", b"null", b"\"x\"", b"[{\"response\":{}}]"]))




def _gym_row(rng: random.Random, never: bool) -> dict:
    usage = ({"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0,
              "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0} if never else
             {"input_tokens": rng.randint(1, 900), "output_tokens": rng.randint(0, 40), "total_tokens": 999})
    return {"responses_create_params": {"input": [{"content": "Q: \"quoted\" \\boxed{} \u2014 ok", "role": "user"}],
                                        "metadata": {"response": {"output": [], "usage": {"input_tokens": 0}}}},
            "response": {"id": "r", "output": [] if never else [{"type": "message", "content": [{"text": "A"}]}],
                         "usage": usage, "user": None},
            "reward": rng.choice([0.0, 1.0]), "mask_sample": rng.choice([False, False, 0.0, True]),
            "_ng_task_index": rng.randint(0, 99),
            "_ng_rollout_index": rng.randint(0, 3), "agent_ref": {"name": "mcqa_simple_agent"}}




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

blocks = st.lists(st.integers(min_value=0, max_value=40), max_size=4)


@pytest.fixture
def same(monkeypatch):
    return lambda lines, cuts: assert_same(lines, cuts, monkeypatch)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(lines=st.lists(st.one_of(row_lines(), corrupted()), max_size=12), cuts=blocks)
def test_random_and_corrupted_rows(same, lines, cuts):
    same(lines, cuts)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(seeds=st.lists(st.tuples(st.integers(0, 10 ** 6), st.booleans(), st.booleans()), max_size=20),
       odd=st.lists(st.tuples(st.integers(0, 40), st.integers(0, len(ROWS) + len(MATERIALIZED) - 1)), max_size=4),
       cuts=blocks)
def test_gym_shaped_rows_with_odd_ones_among_them(same, seeds, odd, cuts):
    lines = []
    for seed, never, dup in seeds:
        rng = random.Random(seed)
        obj = _gym_row(rng, never)
        items = list(obj.items())
        rng.shuffle(items)
        text = json.dumps(dict(items), separators=(",", ":"))
        if dup:   # a second top-level `response` (or task index) later in the row wins
            k = rng.choice(["response", "_ng_task_index", "reward"])
            text = text[:-1] + "," + json.dumps(k) + ":" + json.dumps(_gym_row(rng, not never)[k]) + "}"
        lines.append(text.encode())
    for at, k in odd:
        make = (ROWS + MATERIALIZED)[k]
        lines.insert(at % (len(lines) + 1), make(at, k % 3))
    same(lines, cuts)


def test_every_row_of_the_recorded_runs(same):
    n = 0
    for p in sorted(FIXTURES.rglob("*.jsonl")):
        lines = p.read_bytes().splitlines()
        n += len(lines)
        same(lines, [1, 7, 50])
    assert n > 50


def test_a_block_is_decoded_at_once_only_when_each_line_is_one_row():
    """msgspec's decode_lines reads a stream of values: a line holding two rows beside a row
    spread over two lines gives as many rows as lines, in the wrong lines."""
    from gymwatch.core.fast import rows

    a, b, c = (_row(i, 0).decode() for i in range(3))
    assert [r.task for r in rows.rollouts(f"{a}\n{b}\n{c}\n".encode())] == [0, 1, 2]
    two_on_one = f"{a} {b}\n{c[:-1]}\n}}\n".encode()     # 3 lines, 3 values
    spread = f"{a}\n{c[:-1]}\n,\"x\":{{}}}}\n".encode()
    for odd in (two_on_one, spread, *(s.encode() for s in (f"{a}\n\n{b}\n", f" {a}\n", f"{a} \n", f"{a}\n[1]\n"))):
        assert rows.rollouts(odd) is None, odd

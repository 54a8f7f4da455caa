"""The fast paths of the hot loop give exactly what the plain code gave.

- records: the projected parse (only the needed keys become Python objects) against the
  original full parse, kept here verbatim as the oracle: random rows, random key orders,
  duplicate keys, odd types, escapes, corrupted bytes.
- tail: the split fast path and `max_bytes` reads against a plain universal-newline split.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any, Optional

from hypothesis import HealthCheck, given, settings, strategies as st
from pydantic_core import from_json

from gymwatch.core import records, tail
from gymwatch.core.records import BadLine, RowFacts
from gymwatch.core.tail import Tailer

FIXTURES = Path(__file__).parent / "fixtures"


# --- the oracle: records.py and neverran.py as they were before the fast path ---------------
def _o_is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _o_is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, str, dict)) and len(value) == 0)


def _o_never_ran(response: Any) -> bool:
    if not isinstance(response, dict) or "output" not in response:
        return False
    if not _o_is_empty(response["output"]):
        return False
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return False
    if any(_o_is_number(usage.get(k)) and usage[k] > 0 for k in
           ("total_tokens", "input_tokens", "output_tokens", "prompt_tokens", "completion_tokens")):
        return False
    present = [usage[k] for k in ("total_tokens", "input_tokens", "prompt_tokens") if k in usage]
    numeric = [v for v in present if _o_is_number(v)]
    if not numeric:
        return False
    return all(_o_is_number(v) and v == 0 for v in present)


def _o_load(raw: bytes) -> dict:
    try:
        obj = from_json(raw, cache_strings="keys")
    except ValueError as exc:
        raise BadLine(f"invalid JSON ({records._short(str(exc))})") from None
    if not isinstance(obj, dict):
        raise BadLine(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _o_index(obj: dict, key: str) -> tuple[Optional[int], str]:
    if key not in obj:
        return None, f"no {key}"
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None, f"{key} is {type(value).__name__} {records._short(repr(value))}, not a whole number"
    return value, ""


def _o_keys(obj: dict, facts: RowFacts) -> None:
    facts.task, problem = _o_index(obj, "_ng_task_index")
    facts.rollout, p2 = _o_index(obj, "_ng_rollout_index")
    if facts.rollout is None and facts.task is not None and "_ng_rollout_index" not in obj:
        facts.rollout, p2 = 0, ""
    if "_ng_attempt_index" in obj:
        facts.attempt, p3 = _o_index(obj, "_ng_attempt_index")
        problem = problem or p3
    facts.problem = problem or p2
    ref = obj.get("agent_ref")
    facts.agent = ref["name"] if isinstance(ref, dict) and isinstance(ref.get("name"), str) else ""


def _o_usage(response: Any, facts: RowFacts) -> None:
    if not isinstance(response, dict):
        return
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return
    for attr, keys in (("input_tokens", ("input_tokens", "prompt_tokens")),
                       ("output_tokens", ("output_tokens", "completion_tokens"))):
        for k in keys:
            v = usage.get(k)
            if _o_is_number(v) and math.isfinite(v):   # 1e400 / NaN are not counts
                setattr(facts, attr, int(v))
                break


def oracle_rollout(raw: bytes) -> RowFacts:
    obj = _o_load(raw)
    facts = RowFacts()
    _o_keys(obj, facts)
    response = obj.get("response")
    facts.never_ran = _o_never_ran(response)
    _o_usage(response, facts)
    reward = obj.get("reward")
    if _o_is_number(reward) and math.isfinite(reward):
        facts.reward = float(reward)
    elif "reward" in obj and not facts.problem:
        facts.problem = f"reward is {type(reward).__name__} {records._short(repr(reward))}, not a number"
    if "_ng_failure_class" in obj and obj["_ng_failure_class"]:
        facts.failure_class = str(obj["_ng_failure_class"])
        facts.message = records._message(obj)
        facts.http_status = _o_http_status(obj)
    return facts


def _o_http_status(obj: dict) -> Optional[int]:
    status = obj.get("_ng_failure_http_status")
    return status if type(status) is int and 100 <= status <= 599 else None


def oracle_failure(raw: bytes) -> RowFacts:
    obj = _o_load(raw)
    facts = RowFacts()
    _o_keys(obj, facts)
    response = obj.get("response")
    facts.never_ran = _o_never_ran(response)
    _o_usage(response, facts)
    facts.failure_class = str(obj.get("_ng_failure_class") or "unknown")
    facts.message = records._message(obj)
    facts.http_status = _o_http_status(obj)
    return facts


def oracle_materialized(raw: bytes) -> RowFacts:
    obj = _o_load(raw)
    facts = RowFacts()
    _o_keys(obj, facts)
    return facts


def outcome(fn, raw: bytes):
    try:
        return ("ok", fn(raw))
    except BadLine as exc:
        return ("bad", str(exc))
    except (OverflowError, ValueError) as exc:   # int(inf) / int(nan): the same in both
        return (type(exc).__name__, str(exc))


PAIRS = ((records.rollout_facts, oracle_rollout), (records.failure_facts, oracle_failure),
         (records.materialized_facts, oracle_materialized))


def assert_same(raw: bytes) -> None:
    for fast, slow in PAIRS:
        assert outcome(fast, raw) == outcome(slow, raw), (fast.__name__, raw[:300])


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
responses = st.one_of(
    st.fixed_dictionaries({}, optional={"output": st.one_of(empties, json_values), "usage": usages,
                                        "id": st.text(max_size=5), "status": st.just("completed"),
                                        "response": json_values}),
    json_values)
index = st.one_of(st.integers(min_value=0, max_value=10 ** 6), st.integers(min_value=0, max_value=3), scalars)
row_fields = {
    "responses_create_params": json_values, "response": responses,
    "reward": st.one_of(st.sampled_from([0.0, 1.0, 1, 0]), scalars),
    "_ng_task_index": index, "_ng_rollout_index": index, "_ng_attempt_index": index,
    "agent_ref": st.one_of(st.fixed_dictionaries({"name": st.one_of(st.text(max_size=6), scalars)}), scalars),
    "_ng_failure_class": st.one_of(st.sampled_from(["judge_failed", "", None]), scalars),
    "_ng_failure_message": scalars, "_ng_failure_detail": scalars, "error": scalars,
    "expected_answer": st.text(max_size=3),
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


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=row_lines())
def test_random_rows_same_facts(raw):
    assert_same(raw)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=corrupted())
def test_corrupted_rows_same_outcome(raw):
    assert_same(raw)


def _gym_row(rng: random.Random, never: bool) -> dict:
    usage = ({"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0,
              "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0} if never else
             {"input_tokens": rng.randint(1, 900), "output_tokens": rng.randint(0, 40), "total_tokens": 999})
    return {"responses_create_params": {"input": [{"content": "Q: \"quoted\" \\boxed{} \u2014 ok", "role": "user"}],
                                        "metadata": {"response": {"output": [], "usage": {"input_tokens": 0}}}},
            "response": {"id": "r", "output": [] if never else [{"type": "message", "content": [{"text": "A"}]}],
                         "usage": usage, "user": None},
            "reward": rng.choice([0.0, 1.0]), "_ng_task_index": rng.randint(0, 99),
            "_ng_rollout_index": rng.randint(0, 3), "agent_ref": {"name": "mcqa_simple_agent"}}


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10 ** 6), never=st.booleans(), dup=st.booleans())
def test_gym_shaped_rows_in_any_key_order(seed, never, dup):
    rng = random.Random(seed)
    obj = _gym_row(rng, never)
    items = list(obj.items())
    rng.shuffle(items)
    text = json.dumps(dict(items), separators=(",", ":"))
    if dup:   # a second top-level `response` (or task index) later in the row wins
        k = rng.choice(["response", "_ng_task_index", "reward"])
        text = text[:-1] + "," + json.dumps(k) + ":" + json.dumps(_gym_row(rng, not never)[k]) + "}"
    raw = text.encode()
    assert_same(raw)
    fast = records.rollout_facts(raw)
    assert fast.never_ran == oracle_rollout(raw).never_ran


def test_fixture_rows_same_facts():
    n = 0
    for p in sorted(FIXTURES.rglob("*.jsonl")):
        for raw in p.read_bytes().splitlines():
            if raw.strip():
                assert_same(raw)
                n += 1
    assert n > 50


def test_never_ran_row_through_the_projection():
    row = _gym_row(random.Random(1), True)
    raw = json.dumps(row).encode()
    assert records.rollout_facts(raw).never_ran is True
    row["response"]["usage"]["input_tokens"] = 5
    assert records.rollout_facts(json.dumps(row).encode()).never_ran is False


# --- tail ---------------------------------------------------------------------------------------
def _reference_lines(data: bytes) -> list[bytes]:
    out = re.split(rb"\r\n|\r|\n", data)
    if out and out[-1] == b"":
        out.pop()
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\n", b"\r", b"\r\n", b"{\"x\":1}"]), max_size=80)
       .map(b"".join),
       chunk=st.integers(min_value=1, max_value=16),
       max_bytes=st.one_of(st.none(), st.integers(min_value=1, max_value=40)),
       cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_tail_fast_path_and_bounded_reads(tmp_path_factory, monkeypatch, data, chunk, max_bytes, cuts):
    monkeypatch.setattr(tail, "CHUNK", chunk)
    p = tmp_path_factory.mktemp("tail") / "f.jsonl"
    p.write_bytes(b"")
    t = Tailer(str(p))
    got = []
    prev = 0
    for cut in sorted(set(c for c in cuts if c <= len(data))) + [len(data)]:
        with open(p, "ab") as fh:
            fh.write(data[prev:cut])
        prev = cut
        while True:
            b = t.read(max_bytes=max_bytes)
            got += b.lines
            if not b.more:
                break
    while True:
        b = t.read(final=True, max_bytes=max_bytes)
        got += b.lines
        if not b.more:
            break
    assert [n for n, _ in got] == list(range(1, len(got) + 1))
    assert [raw for _, raw in got] == _reference_lines(data)


def test_bounded_read_holds_a_bounded_batch(tmp_path):
    p = tmp_path / "big.jsonl"
    line = b"{\"k\":\"" + b"x" * 1000 + b"\"}\n"
    p.write_bytes(line * 5000)
    t = Tailer(str(p))
    sizes = []
    total = 0
    while True:
        b = t.read(max_bytes=1 << 20)
        sizes.append(sum(len(r) for _, r in b.lines))
        total += len(b.lines)
        if not b.more:
            break
    assert total == 5000 and len(sizes) > 3 and max(sizes) <= (1 << 20) + len(line)

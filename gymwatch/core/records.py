"""Rollout, failure and materialized-input rows: one JSONL line decoded into the few facts the model
needs (`RowFacts`). This is the reference: a row is parsed whole (`load_object`) and its facts
read from the object. core/fast/rows.py decodes a block of rows of the usual shape faster, to the
same facts; `rollout_rows()` / `input_rows()` below choose, for a block of lines, which reads it.

Nothing here keeps a full record: a row is reduced to a `RowFacts` and dropped.
The key names that join Gym (the writer) and gymwatch (the reader) live in core/rowfacts.py.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Optional

from pydantic_core import from_json

from . import fast
from .fast import rows as fast_rows
from .neverran import is_number, never_ran
from .rowfacts import (  # noqa: F401 - the names of a row, read here and by records' users
    AGENT_REF_KEY,
    ATTEMPT_KEY,
    CREATED_KEY,
    FAILURE_CLASS_KEY,
    FAILURE_PREFIX,
    FAILURE_STATUS_KEY,
    FAILURE_TERMINAL_KEY,
    LATENCY_KEY,
    MASK_KEY,
    MESSAGE_KEYS,
    PERF_KEY,
    ROLLOUT_KEY,
    TASK_KEY,
    BadLine,
    Row,
    RowFacts,
    seconds,
)


def load_object(raw: bytes) -> dict:
    try:
        obj = from_json(raw, cache_strings="keys")
    except ValueError as exc:
        if "recursion limit" not in str(exc):
            raise BadLine(f"invalid JSON ({_short(str(exc))})") from None
        obj = _load_deep(raw)     # valid JSON nested deeper than jiter goes (~200 levels)
    if not isinstance(obj, dict):
        raise BadLine(f"expected a JSON object, got {type(obj).__name__}")
    return obj


# A Gym row, at the least: a JSON object with a key Gym writes into every row of its rollouts and
# sidecar files (docs/gym-formats.md §5): the trial's index keys and Gym's other `_ng_` keys, the
# request, the agent's answer, the reward, the agent. A JSONL file none of whose rows has one is
# not Gym's (a wrong file given to `gymwatch report`).
GYM_ROW_KEYS = frozenset({TASK_KEY, ROLLOUT_KEY, "responses_create_params", "response", "reward", AGENT_REF_KEY})


def not_a_gym_row(raw: bytes) -> str:
    """'' for a Gym row (GYM_ROW_KEYS); else what the line is instead, in a few words."""
    try:
        obj = load_object(raw)
    except BadLine as exc:
        return str(exc)
    if any(k in GYM_ROW_KEYS or k.startswith("_ng_") for k in obj):
        return ""
    keys = list(obj)
    shown = ", ".join(_short(k, 40) for k in keys[:4]) + (", ..." if len(keys) > 4 else "")
    return f"a JSON object with no Gym key ({shown})" if keys else "an empty JSON object"


def _load_deep(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except RecursionError:
        raise BadLine("invalid JSON (nested too deeply)") from None
    except ValueError as exc:
        raise BadLine(f"invalid JSON ({_short(str(exc))})") from None


# --- one row -------------------------------------------------------------------------------------
def rollout_facts(raw: bytes) -> RowFacts:
    """A row of the rollouts file. Raises BadLine for a line that is not a JSON object."""
    obj = load_object(raw)
    facts = _result_facts(obj)
    reward = obj.get("reward")
    if is_number(reward) and math.isfinite(reward):
        facts.reward = float(reward)
    elif "reward" in obj and not facts.problem:
        facts.problem = f"reward is {type(reward).__name__} {_short(repr(reward))}, not a number"
    if FAILURE_CLASS_KEY in obj and obj[FAILURE_CLASS_KEY]:
        _failure(obj, facts)
    facts.masked = bool(obj.get(MASK_KEY))      # as Gym's aggregation tests it: for truth
    return facts


def failure_facts(raw: bytes) -> RowFacts:
    """A row of the failures sidecar (its message may be in any key)."""
    obj = load_object(raw)
    facts = _result_facts(obj)
    _failure(obj, facts)
    return facts


def _result_facts(obj: dict) -> RowFacts:
    """What a result row (a rollout or a failure row) says alike: its keys, whether its agent ran,
    its tokens and times."""
    facts = _keys(obj)
    response = obj.get("response")
    facts.never_ran = never_ran(response)
    _usage(response, facts)
    _timing(obj, response, facts)
    return facts


def materialized_facts(raw: bytes) -> RowFacts:
    """A row of the materialized inputs: the trial it expects."""
    return _keys(load_object(raw))


def _keys(obj: dict) -> RowFacts:
    facts = RowFacts()
    facts.task, problem = _index(obj, TASK_KEY)
    facts.rollout, p2 = _index(obj, ROLLOUT_KEY)
    if facts.rollout is None and facts.task is not None and ROLLOUT_KEY not in obj:
        facts.rollout, p2 = 0, ""   # a single-rollout run may omit the rollout index
    if ATTEMPT_KEY in obj:
        facts.attempt, p3 = _index(obj, ATTEMPT_KEY)
        problem = problem or p3
    facts.problem = problem or p2
    ref = obj.get(AGENT_REF_KEY)
    if isinstance(ref, dict) and isinstance(ref.get("name"), str):
        facts.agent = ref["name"]
    return facts


def _index(obj: dict, key: str) -> tuple[Optional[int], str]:
    if key not in obj:
        return None, f"no {key}"
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None, f"{key} is {type(value).__name__} {_short(repr(value))}, not a whole number"
    return value, ""


def _count(v: Any) -> Optional[int]:
    """A token count: an int, or a finite float (1e400 and NaN are not counts)."""
    if type(v) is int or (type(v) is float and math.isfinite(v)):
        return int(v)
    return None


def _first_number(usage: dict, a: str, b: str) -> Optional[int]:
    c = _count(usage.get(a))
    return c if c is not None else _count(usage.get(b))


def _usage(response: Any, facts: RowFacts) -> None:
    if not isinstance(response, dict):
        return
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return
    facts.input_tokens = _first_number(usage, "input_tokens", "prompt_tokens")
    facts.output_tokens = _first_number(usage, "output_tokens", "completion_tokens")


def _timing(obj: dict, response: Any, facts: RowFacts) -> None:
    """When the model answered, and how long Gym says the trial's /run took."""
    if isinstance(response, dict):
        facts.answered_at = seconds(response.get(CREATED_KEY))
    perf = obj.get(PERF_KEY)
    if isinstance(perf, dict):
        ms = seconds(perf.get(LATENCY_KEY))
        facts.latency = ms / 1000 if ms is not None else None


def _failure(obj: dict, facts: RowFacts) -> None:
    facts.failure_class = str(obj.get(FAILURE_CLASS_KEY) or "unknown")
    facts.message = _message(obj)
    status = obj.get(FAILURE_STATUS_KEY)
    if type(status) is int and 100 <= status <= 599:
        facts.http_status = status


def failure_terminal(obj: dict) -> bool:
    """Gym marked this failure row terminal (its resume tests the key for truth, as here)."""
    return bool(obj.get(FAILURE_TERMINAL_KEY))


def _message(obj: dict) -> str:
    """The row's own words about its failure (Gym 0.7: `_ng_failure_message`, e.g. `500,
    message='Internal Server Error', url='http://127.0.0.1:19251/run'`)."""
    for k in MESSAGE_KEYS:
        v = obj.get(k)
        if v:
            return _short(v if isinstance(v, str) else repr(v), 300)
    extras = [f"{k[len(FAILURE_PREFIX):]}={_short(str(v), 80)}" for k, v in obj.items()
              if k.startswith(FAILURE_PREFIX) and k != FAILURE_CLASS_KEY and v not in (None, "")]
    return "; ".join(extras)


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- a block of lines: the one place a fast decode is chosen ------------------------------------
def rollout_rows(block: bytes) -> list[Row]:
    """Each line of a block of whole lines (each ending with a newline) of a rollouts file."""
    return _rows(block, rollout_facts, _quick("rollouts"))


def input_rows(block: bytes) -> list[Row]:
    """Each line of a block of whole lines of the materialized inputs."""
    return _rows(block, materialized_facts, _quick("inputs"))


def failure_rows(block: bytes) -> list[Row]:
    """Each line of a block of whole lines of the failures sidecar (few rows: the reference)."""
    return _rows(block, failure_facts, None)


def _quick(kind: str) -> Optional[Callable[[bytes], Optional[list[Optional[RowFacts]]]]]:
    """core/fast/rows.py's decode of a block of `kind`, unless that fast path is off."""
    return getattr(fast_rows, kind) if fast.enabled("rows") else None


def one_row(parse: Callable[[bytes], RowFacts], raw: bytes) -> Row:
    """A line's facts, why it is not a row, or None for a blank line."""
    try:
        return parse(raw)
    except BadLine as exc:
        return exc if raw.strip() else None


def _rows(block: bytes, parse: Callable[[bytes], RowFacts],
          quick: Optional[Callable[[bytes], Optional[list[Optional[RowFacts]]]]]) -> list[Row]:
    """The lines of `block` as rows: by `quick` (a fast decode: None for a block it cannot read,
    None for each row it cannot answer exactly) where it answers, else by `parse`."""
    got = quick(block) if quick is not None else None
    if got is None:
        return [one_row(parse, raw) for raw in block.split(b"\n")[:-1]]
    if None not in got:
        return got     # type: ignore[return-value]
    lines = block.split(b"\n")
    return [f if f is not None else one_row(parse, lines[i]) for i, f in enumerate(got)]

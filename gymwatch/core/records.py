"""Rollout, failure and materialized-input rows: parse one JSONL line into the few facts the model needs.

Nothing here keeps a full record: a row is reduced to a `RowFacts` and dropped.
The key names that join Gym (the writer) and gymwatch (the reader) live here only.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any, Callable, Optional

from pydantic_core import SchemaValidator, ValidationError, core_schema, from_json

from .neverran import is_number, never_ran

TASK_KEY = "_ng_task_index"
ROLLOUT_KEY = "_ng_rollout_index"
ATTEMPT_KEY = "_ng_attempt_index"
FAILURE_CLASS_KEY = "_ng_failure_class"
FAILURE_PREFIX = "_ng_failure_"
AGENT_REF_KEY = "agent_ref"
# Failure-row keys that may carry a human message, most specific first.
MESSAGE_KEYS = ("_ng_failure_message", "_ng_failure_reason", "_ng_failure_error", "error",
                "infrastructure_error", "failure_reason", "message")


@dataclass(slots=True)
class RowFacts:
    task: Optional[int] = None
    rollout: Optional[int] = None
    attempt: Optional[int] = None
    reward: Optional[float] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    never_ran: bool = False
    agent: str = ""
    failure_class: str = ""
    message: str = ""
    problem: str = ""     # why this row is unusable or partly wrong (shown in the report)


class BadLine(ValueError):
    """A line that is not a JSON object."""


def load_object(raw: bytes) -> dict:
    try:
        obj = from_json(raw, cache_strings="keys")
    except ValueError as exc:
        raise BadLine(f"invalid JSON ({_short(str(exc))})") from None
    if not isinstance(obj, dict):
        raise BadLine(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def _index(obj: dict, key: str) -> tuple[Optional[int], str]:
    if key not in obj:
        return None, f"no {key}"
    value = obj[key]
    if type(value) is int and value >= 0:
        return value, ""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None, f"{key} is {type(value).__name__} {_short(repr(value))}, not a whole number"
    return value, ""


def _agent(obj: dict) -> str:
    ref = obj.get(AGENT_REF_KEY)
    if isinstance(ref, dict) and isinstance(ref.get("name"), str):
        return ref["name"]
    return ""


def _keys(obj: dict, facts: RowFacts) -> None:
    facts.task, problem = _index(obj, TASK_KEY)
    facts.rollout, p2 = _index(obj, ROLLOUT_KEY)
    if facts.rollout is None and facts.task is not None and ROLLOUT_KEY not in obj:
        facts.rollout, p2 = 0, ""   # a single-rollout run may omit the rollout index
    if ATTEMPT_KEY in obj:
        facts.attempt, p3 = _index(obj, ATTEMPT_KEY)
        problem = problem or p3
    facts.problem = problem or p2
    facts.agent = _agent(obj)


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


# --- the rows from a parsed object (the same code for the projected and the full parse) ---------
def _rollout_from(obj: dict) -> RowFacts:
    facts = RowFacts()
    _keys(obj, facts)
    response = obj.get("response")
    facts.never_ran = never_ran(response)
    _usage(response, facts)
    reward = obj.get("reward")
    if is_number(reward) and math.isfinite(reward):
        facts.reward = float(reward)
    elif "reward" in obj and not facts.problem:
        facts.problem = f"reward is {type(reward).__name__} {_short(repr(reward))}, not a number"
    if FAILURE_CLASS_KEY in obj and obj[FAILURE_CLASS_KEY]:
        facts.failure_class = str(obj[FAILURE_CLASS_KEY])
        facts.message = _message(obj)
    return facts


def _failure_from(obj: dict) -> RowFacts:
    facts = RowFacts()
    _keys(obj, facts)
    response = obj.get("response")
    facts.never_ran = never_ran(response)
    _usage(response, facts)
    facts.failure_class = str(obj.get(FAILURE_CLASS_KEY) or "unknown")
    facts.message = _message(obj)
    return facts


def _materialized_from(obj: dict) -> RowFacts:
    facts = RowFacts()
    _keys(obj, facts)
    return facts


# --- the full parse: every key of the row, as a Python object (the reference) -------------------
def rollout_facts_full(raw: bytes) -> RowFacts:
    return _rollout_from(load_object(raw))


def failure_facts_full(raw: bytes) -> RowFacts:
    return _failure_from(load_object(raw))


def materialized_facts_full(raw: bytes) -> RowFacts:
    return _materialized_from(load_object(raw))


# --- the projected parse: the same parser (jiter, inside pydantic-core) reads and checks the
# whole line, but only the keys below become Python objects; the request
# (`responses_create_params`, most of the bytes) and the rest of `response` are skipped.
# Duplicate keys resolve as in the full parse (the last one wins). Anything the projection
# cannot answer exactly - invalid JSON, a top level that is not an object, a `response` that is
# not an object, a row whose message needs every key - goes to the full parse, so the facts
# (and the BadLine text) are always the full parse's.
def _field() -> Any:
    return core_schema.typed_dict_field(core_schema.any_schema(), required=False)


def _projection(keys: tuple[str, ...], response: bool = False) -> Callable[[bytes], dict]:
    fields = {k: _field() for k in keys}
    if response:
        inner = core_schema.typed_dict_schema({"output": _field(), "usage": _field()}, extra_behavior="ignore")
        fields["response"] = core_schema.typed_dict_field(inner, required=False)
    return SchemaValidator(core_schema.typed_dict_schema(fields, extra_behavior="ignore")).validate_json


_KEY_FIELDS = (TASK_KEY, ROLLOUT_KEY, ATTEMPT_KEY, AGENT_REF_KEY)
_ROLLOUT = _projection(_KEY_FIELDS + ("reward", FAILURE_CLASS_KEY), response=True)
_MATERIALIZED = _projection(_KEY_FIELDS)


_MISSING = object()


def _agent_fast(obj: dict) -> str:
    ref = obj.get(AGENT_REF_KEY)
    if type(ref) is dict:
        name = ref.get("name")
        if type(name) is str:
            return name
    return ""


def _rollout_fast(obj: dict) -> Optional[RowFacts]:
    """`_rollout_from` for the usual shape of a projected row (plain JSON types only); None for
    anything else, which then takes the general code. Same facts by construction."""
    task = obj.get(TASK_KEY)
    rollout = obj.get(ROLLOUT_KEY)
    if type(task) is not int or task < 0 or type(rollout) is not int or rollout < 0:
        return None
    attempt = obj.get(ATTEMPT_KEY, _MISSING)
    if attempt is _MISSING:
        attempt = None
    elif type(attempt) is not int or attempt < 0:
        return None
    reward = obj.get("reward", _MISSING)
    if type(reward) is int or (type(reward) is float and math.isfinite(reward)):
        reward = float(reward)
    elif reward is _MISSING:
        reward = None
    else:
        return None
    response = obj.get("response")
    inp = out = None
    nr = False
    if type(response) is dict:
        usage = response.get("usage")
        if type(usage) is dict:
            inp = usage.get("input_tokens")   # the usual case inline: a plain int
            if type(inp) is not int:
                inp = _first_number(usage, "input_tokens", "prompt_tokens")
            out = usage.get("output_tokens")
            if type(out) is not int:
                out = _first_number(usage, "output_tokens", "completion_tokens")
        output = response.get("output", _MISSING)
        if output is not _MISSING and (output is None or (type(output) in _CONTAINERS and not output)):
            nr = never_ran(response)     # rule 1 holds: the rest of the rule decides
    ref = obj.get(AGENT_REF_KEY)
    agent = ""
    if type(ref) is dict:
        name = ref.get("name")
        if type(name) is str:
            agent = name
    return RowFacts(task, rollout, attempt, reward, inp, out, nr, agent)


_CONTAINERS = (list, str, dict)


def rollout_facts(raw: bytes) -> RowFacts:
    """A successful-rollout row. Raises BadLine for lines that are not JSON objects."""
    try:
        obj = _ROLLOUT(raw)
    except ValidationError:
        return rollout_facts_full(raw)
    if obj.get(FAILURE_CLASS_KEY):
        return rollout_facts_full(raw)     # its message may be in any `_ng_failure_*` key
    return _rollout_fast(obj) or _rollout_from(obj)


def failure_facts(raw: bytes) -> RowFacts:
    """A row of the failures sidecar (few rows; the message may be in any key: full parse)."""
    return failure_facts_full(raw)


def materialized_facts(raw: bytes) -> RowFacts:
    try:
        obj = _MATERIALIZED(raw)
    except ValidationError:
        return materialized_facts_full(raw)
    task = obj.get(TASK_KEY)
    rollout = obj.get(ROLLOUT_KEY)
    if type(task) is int and task >= 0 and type(rollout) is int and rollout >= 0 and ATTEMPT_KEY not in obj:
        return RowFacts(task, rollout, agent=_agent_fast(obj))
    return _materialized_from(obj)


def _message(obj: dict) -> str:
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

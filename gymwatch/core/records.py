"""Rollout, failure and materialized-input rows: parse one JSONL line into the few facts the model needs.

Nothing here keeps a full record: a row is reduced to a `RowFacts` and dropped.
The key names that join Gym (the writer) and gymwatch (the reader) live here only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from pydantic_core import from_json

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


def _usage(response: Any, facts: RowFacts) -> None:
    if not isinstance(response, dict):
        return
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return
    for attr, keys in (("input_tokens", ("input_tokens", "prompt_tokens")),
                       ("output_tokens", ("output_tokens", "completion_tokens"))):
        for k in keys:
            v = usage.get(k)
            if is_number(v):
                setattr(facts, attr, int(v))
                break


def rollout_facts(raw: bytes) -> RowFacts:
    """A successful-rollout row. Raises BadLine for lines that are not JSON objects."""
    obj = load_object(raw)
    facts = RowFacts()
    _keys(obj, facts)
    response = obj.get("response")
    facts.never_ran = never_ran(response)
    _usage(response, facts)
    reward = obj.get("reward")
    if is_number(reward):
        facts.reward = float(reward)
    elif "reward" in obj and not facts.problem:
        facts.problem = f"reward is {type(reward).__name__} {_short(repr(reward))}, not a number"
    if FAILURE_CLASS_KEY in obj and obj[FAILURE_CLASS_KEY]:
        facts.failure_class = str(obj[FAILURE_CLASS_KEY])
        facts.message = _message(obj)
    return facts


def failure_facts(raw: bytes) -> RowFacts:
    """A row of the failures sidecar."""
    obj = load_object(raw)
    facts = RowFacts()
    _keys(obj, facts)
    response = obj.get("response")
    facts.never_ran = never_ran(response)
    _usage(response, facts)
    facts.failure_class = str(obj.get(FAILURE_CLASS_KEY) or "unknown")
    facts.message = _message(obj)
    return facts


def materialized_facts(raw: bytes) -> RowFacts:
    obj = load_object(raw)
    facts = RowFacts()
    _keys(obj, facts)
    return facts


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

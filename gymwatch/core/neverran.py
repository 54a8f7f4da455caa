"""The "agent never ran" rule, exactly as docs/gym-formats.md §9 states it (NVIDIA's evaluator SDK rule).

A trial never ran when ALL hold:
1. `response` is an object with an `output` key whose value is empty ([], "", {}, null);
2. `response.usage` is an object and no numeric value among the five token keys is > 0;
3. at least one input-side key is present with a numeric value, and each present one is 0.
Zero output tokens alone is a legitimate empty answer, not a never-ran.
"""

from __future__ import annotations

from typing import Any, TypeGuard

TOKEN_KEYS = ("total_tokens", "input_tokens", "output_tokens", "prompt_tokens", "completion_tokens")
INPUT_KEYS = ("total_tokens", "input_tokens", "prompt_tokens")
_EMPTY: tuple = ([], "", {}, None)


def is_number(value: Any) -> TypeGuard[int | float]:
    """A JSON number: int or float, never a bool (bool is an int subclass in Python)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, str, dict)) and len(value) == 0)


_MISSING = object()


def never_ran(response: Any) -> bool:
    if not isinstance(response, dict):
        return False
    output = response.get("output", _MISSING)
    # Rule 1 first: almost every real response has a non-empty output and stops here.
    if output is _MISSING or not _is_empty(output):
        return False
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return False
    if any(is_number(usage.get(k)) and usage[k] > 0 for k in TOKEN_KEYS):
        return False
    present = [usage[k] for k in INPUT_KEYS if k in usage]
    numeric = [v for v in present if is_number(v)]
    if not numeric:
        return False
    return all(is_number(v) and v == 0 for v in present)

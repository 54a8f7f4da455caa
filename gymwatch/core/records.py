"""Rollout, failure and materialized-input rows: parse one JSONL line into the few facts the model needs.

Nothing here keeps a full record: a row is reduced to a `RowFacts` and dropped.
The key names that join Gym (the writer) and gymwatch (the reader) live here only (the trial's
index keys in inputkeys.py, which runs alone as a child process, and are imported from there).
"""

from __future__ import annotations

import json
import math

from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType, field
from pydantic_core import SchemaValidator, ValidationError, core_schema, from_json

from .inputkeys import ATTEMPT_KEY, ROLLOUT_KEY, TASK_KEY, guarded, long_integer, one_row_a_line, plain_key
from .neverran import TOKEN_KEYS, is_number, never_ran

FAILURE_CLASS_KEY = "_ng_failure_class"
FAILURE_STATUS_KEY = "_ng_failure_http_status"
FAILURE_PREFIX = "_ng_failure_"
FAILURE_TERMINAL_KEY = "_ng_failure_terminal"     # Gym's resume never retries such a failure
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
    http_status: Optional[int] = None
    problem: str = ""     # why this row is unusable or partly wrong (shown in the report)


class BadLine(ValueError):
    """A line that is not a JSON object."""


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
        _failure(obj, facts)
    return facts


def _failure(obj: dict, facts: RowFacts) -> None:
    facts.failure_class = str(obj.get(FAILURE_CLASS_KEY) or "unknown")
    facts.message = _message(obj)
    status = obj.get(FAILURE_STATUS_KEY)
    if type(status) is int and 100 <= status <= 599:
        facts.http_status = status


def failure_terminal(obj: dict) -> bool:
    """Gym marked this failure row terminal (its resume tests the key for truth, as here)."""
    return bool(obj.get(FAILURE_TERMINAL_KEY))


def _failure_from(obj: dict) -> RowFacts:
    facts = RowFacts()
    _keys(obj, facts)
    response = obj.get("response")
    facts.never_ran = never_ran(response)
    _usage(response, facts)
    _failure(obj, facts)
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


# --- the typed parse (msgspec): the first try for every rollout and materialized row ----------
# msgspec decodes a row straight into the small structs below: only these keys become Python
# objects, the rest of the row (the request, most of `response`, trajectories) is checked and
# skipped without being built, and `response.output` is kept as its raw bytes (only its
# emptiness matters). Strict types: a key of any other type than the usual one (a float index, a
# null usage, a bool reward, ...) fails the decode, and the row takes the projected parse above,
# then the full parse, exactly as before. Duplicate keys: the last one wins, as in the full parse.
# Where msgspec accepts what the reference parser (jiter) rejects, a guard sends the row the old
# way first: invalid UTF-8 in skipped strings (msgspec does not check it) and integers longer than
# Python's 4300-digit limit. A whole run of rows is checked at once (`rows_plain`: ASCII, as
# Gym's json.dumps writes, and no such integer), so its rows need no guard of their own. Nesting
# needs none: the full parse reads rows nested deeper than jiter's limit with the stdlib (below),
# and one deeper than msgspec can (RecursionError) takes the full parse.
class _Usage(Struct, gc=False):
    total_tokens: Union[int, UnsetType] = UNSET
    input_tokens: Union[int, UnsetType] = UNSET
    output_tokens: Union[int, UnsetType] = UNSET
    prompt_tokens: Union[int, UnsetType] = UNSET
    completion_tokens: Union[int, UnsetType] = UNSET


class _Response(Struct, gc=False):
    output: Union[Raw, UnsetType] = UNSET
    usage: Union[_Usage, UnsetType] = UNSET


class _Ref(Struct, gc=False):
    name: Union[str, UnsetType] = UNSET


class _RolloutRow(Struct, gc=False):
    task: int = field(name=TASK_KEY)
    rollout: int = field(name=ROLLOUT_KEY)
    attempt: Union[int, UnsetType] = field(name=ATTEMPT_KEY, default=UNSET)
    reward: Union[int, float, UnsetType] = UNSET
    response: Union[_Response, UnsetType] = UNSET
    agent_ref: Union[_Ref, UnsetType] = field(name=AGENT_REF_KEY, default=UNSET)
    failure_class: Union[str, None, UnsetType] = field(name=FAILURE_CLASS_KEY, default=UNSET)


class _KeysRow(Struct, gc=False):
    task: int = field(name=TASK_KEY)
    rollout: int = field(name=ROLLOUT_KEY)
    attempt: Union[int, UnsetType] = field(name=ATTEMPT_KEY, default=UNSET)
    agent_ref: Union[_Ref, UnsetType] = field(name=AGENT_REF_KEY, default=UNSET)


_TYPED_ROLLOUT = msgspec.json.Decoder(_RolloutRow).decode
_TYPED_KEYS = msgspec.json.Decoder(_KeysRow).decode
_DecodeError = msgspec.DecodeError
_EXACT_FLOAT = 1 << 53


def _reference_rejects(raw: bytes) -> bool:
    """True when the row might be one the reference parser rejects and msgspec accepts."""
    return not guarded(raw)


def rows_plain(rows: list[bytes]) -> bool:
    """No row of these needs the per-row guard (all ASCII, no over-long integer): one check of
    them joined, in C, instead of one a row."""
    block = b"\n".join(rows)
    return block.isascii() and not long_integer(block)


_EMPTY_RAW = (b"[]", b"{}", b'""', b"null")


def _raw_empty(out: Raw) -> bool:
    """Is this JSON value (valid: msgspec checked it) one of [], "", {}, null?"""
    n = len(out)
    if n > 64:   # only an empty container padded with whitespace is empty and this long
        mv = memoryview(out)
        if mv[0] not in (0x5B, 0x7B) or mv[1] not in (0x20, 0x09, 0x0A, 0x0D):
            return False
        return not bytes(mv[1:n - 1]).strip()
    b = bytes(out)
    return b in _EMPTY_RAW or (b[0] in (0x5B, 0x7B) and not b[1:-1].strip())


def _usage_dict(usage: _Usage) -> dict:
    return {k: v for k in TOKEN_KEYS if (v := getattr(usage, k)) is not UNSET}


def _rollout_typed(raw: bytes, plain: bool = False) -> Optional[RowFacts]:
    """`_rollout_from` for a row of the usual shape; None for any other row (it then takes the
    projected parse and the general code, so the facts are always the full parse's). `plain`:
    its run of rows passed `rows_plain`."""
    f = rollout_tuple(raw, plain)
    return None if f is None else RowFacts(*f)


def rollout_tuple(raw: bytes, plain: bool = False) -> Optional[tuple]:
    """`_rollout_typed`'s facts as a plain tuple (task, rollout, attempt, reward, input tokens,
    output tokens, never ran, agent): the reducer's path for the rows of a big file."""
    try:
        row = _TYPED_ROLLOUT(raw)
    except (_DecodeError, RecursionError):
        return None
    if not plain and _reference_rejects(raw):
        return None
    return typed_tuple(row)


def typed_tuple(row: _RolloutRow) -> Optional[tuple]:
    """The facts of a row msgspec decoded (`rollout_tuple`, `rollout_block`), or None when the row
    needs the general code."""
    task, rollout, row_attempt, row_reward = row.task, row.rollout, row.attempt, row.reward
    if task < 0 or rollout < 0 or row.failure_class:
        return None   # a failure class: its message may be in any `_ng_failure_*` key
    attempt: Optional[int] = None
    if row_attempt is not UNSET:
        if row_attempt < 0:
            return None
        attempt = row_attempt
    reward: Optional[float] = None
    if type(row_reward) is int:
        if not -_EXACT_FLOAT <= row_reward <= _EXACT_FLOAT:
            return None
        reward = float(row_reward)
    elif type(row_reward) is float:
        if not math.isfinite(row_reward):
            return None
        reward = row_reward
    inp = out = None
    nr = False
    response = row.response
    if response is not UNSET:
        usage = response.usage
        if usage is not UNSET:
            inp = usage.input_tokens
            if inp is UNSET:
                inp = None if usage.prompt_tokens is UNSET else usage.prompt_tokens
            out = usage.output_tokens
            if out is UNSET:
                out = None if usage.completion_tokens is UNSET else usage.completion_tokens
        output = response.output
        if output is not UNSET and _raw_empty(output):
            # rule 1 holds: the rule itself decides, on the keys it reads (the output's value is
            # empty, which one does not matter)
            nr = never_ran({"output": None} if usage is UNSET else {"output": None, "usage": _usage_dict(usage)})
    ref = row.agent_ref
    agent = "" if ref is UNSET or ref.name is UNSET else ref.name
    return task, rollout, attempt, reward, inp, out, nr, agent


_TYPED_ROLLOUT_LINES = msgspec.json.Decoder(_RolloutRow).decode_lines


def rollout_block(block: bytes) -> Optional[list[_RolloutRow]]:
    """The lines of a block (each ending with \n, none holding a \r) decoded at once, one row a
    line, for `typed_tuple`; None when the block must be read line by line (some line is not a
    row of the usual shape, or the block is not plain: `rows_plain`).

    One row a line: inputkeys.one_row_a_line."""
    if not block.isascii() or long_integer(block):
        return None
    lines = one_row_a_line(block)
    if lines < 0:
        return None
    try:
        rows = _TYPED_ROLLOUT_LINES(block)
    except (_DecodeError, RecursionError):
        return None
    return rows if len(rows) == lines else None


def row_items(rows: list[bytes]) -> list:
    """Each row's facts (`rollout_tuple`) or, when only the general code can read it, the row."""
    if not rows_plain(rows):
        return list(rows)
    return [rollout_tuple(raw, True) or raw for raw in rows]


def block_items(block: bytes) -> list:
    """`row_items` of the lines of a block of whole lines, decoded at once when it can be
    (`rollout_block`: no bytes object a line)."""
    rows = rollout_block(block)
    if rows is None:
        return row_items(block.split(b"\n")[:-1])
    items: list = [typed_tuple(row) for row in rows]
    if None in items:
        lines = block.split(b"\n")
        items = [f if f is not None else lines[i] for i, f in enumerate(items)]
    return items


def materialized_key(raw: bytes, plain: bool = False) -> Optional[tuple[int, int]]:
    """The (task, rollout) of a materialized row of the usual shape (all the reducer needs of
    it), else None: the row then takes `materialized_facts`."""
    return plain_key(raw) if plain or guarded(raw) else None


def _materialized_typed(raw: bytes, plain: bool = False) -> Optional[RowFacts]:
    try:
        row = _TYPED_KEYS(raw)
    except (_DecodeError, RecursionError):
        return None
    if row.task < 0 or row.rollout < 0 or row.attempt is not UNSET or not plain and _reference_rejects(raw):
        return None
    ref = row.agent_ref
    return RowFacts(row.task, row.rollout, agent="" if ref is UNSET or ref.name is UNSET else ref.name)


def rollout_facts(raw: bytes, plain: bool = False) -> RowFacts:
    """A successful-rollout row. Raises BadLine for lines that are not JSON objects. `plain`:
    its run of rows passed `rows_plain`."""
    return _rollout_typed(raw, plain) or rollout_facts_projected(raw)


def rollout_facts_projected(raw: bytes) -> RowFacts:
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


def materialized_facts(raw: bytes, plain: bool = False) -> RowFacts:
    return _materialized_typed(raw, plain) or materialized_facts_projected(raw)


def materialized_facts_projected(raw: bytes) -> RowFacts:
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

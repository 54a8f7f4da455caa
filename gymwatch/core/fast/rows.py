"""A block of rows decoded at once, to the facts core/records.py would give (its reference twin).

msgspec decodes each line of a block straight into the small structs below: only these keys
become Python objects, the rest of the row (the request, most of `response`, trajectories) is
checked and skipped, and `response.output` is kept as its raw bytes (only its emptiness
matters). Strict types: a key of any other type than the usual one (a float index, a null usage,
a bool reward, ...) fails the decode, and the block is read by the reference. A row this cannot
answer exactly (a failure class: its message may be in any key; a negative index; a reward not
exactly a float) is None: the reference reads it. `mask_sample` is read when it is a bool, a number
or null (its truth, as there); of any other type the block goes to the reference. Duplicate keys: the last one wins, as there.

Where msgspec accepts what the reference parser (jiter) rejects, the block goes to the reference:
invalid UTF-8 in skipped strings (msgspec does not check it) and integers longer than Python's
4300-digit limit. A block is
decoded at once only when each line is one row (`one_row_a_line`: msgspec reads a stream of
values, not lines).
"""

from __future__ import annotations

import math
from typing import Optional, Union

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType, field

from ..neverran import TOKEN_KEYS, never_ran
from ..rowfacts import (
    AGENT_REF_KEY,
    ATTEMPT_KEY,
    FAILURE_CLASS_KEY,
    MASK_KEY,
    PERF_KEY,
    ROLLOUT_KEY,
    TASK_KEY,
    RowFacts,
    seconds,
)

_MAX_DIGITS = 4300        # jiter (the reference parser, like int()) refuses an integer of more digits
_DIGIT_STRIDE = 2048      # a run of > 4300 digits covers two neighbouring multiples of this
_EXACT_FLOAT = 1 << 53


class _Usage(Struct, gc=False):
    total_tokens: Union[int, UnsetType] = UNSET
    input_tokens: Union[int, UnsetType] = UNSET
    output_tokens: Union[int, UnsetType] = UNSET
    prompt_tokens: Union[int, UnsetType] = UNSET
    completion_tokens: Union[int, UnsetType] = UNSET


class _Response(Struct, gc=False):
    output: Union[Raw, UnsetType] = UNSET
    usage: Union[_Usage, UnsetType] = UNSET
    created_at: Union[int, float, None, UnsetType] = UNSET


class _Perf(Struct, gc=False):
    total_latency_ms: Union[int, float, None, UnsetType] = UNSET


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
    masked: Union[bool, int, float, None, UnsetType] = field(name=MASK_KEY, default=UNSET)
    perf: Union[_Perf, None, UnsetType] = field(name=PERF_KEY, default=UNSET)


class _InputRow(Struct, gc=False):
    task: int = field(name=TASK_KEY)
    rollout: int = field(name=ROLLOUT_KEY)
    attempt: Union[int, UnsetType] = field(name=ATTEMPT_KEY, default=UNSET)
    agent_ref: Union[_Ref, UnsetType] = field(name=AGENT_REF_KEY, default=UNSET)


_ROLLOUT_LINES = msgspec.json.Decoder(_RolloutRow).decode_lines
_INPUT_LINES = msgspec.json.Decoder(_InputRow).decode_lines


def rollouts(block: bytes) -> Optional[list[Optional[RowFacts]]]:
    """The facts of each line of a block of whole lines of a rollouts file, None for a row the
    reference must read; None when the whole block must be."""
    rows = _decoded(block, _ROLLOUT_LINES)
    return None if rows is None else [_rollout(row) for row in rows]


def inputs(block: bytes) -> Optional[list[Optional[RowFacts]]]:
    """`rollouts` for a block of the materialized inputs."""
    rows = _decoded(block, _INPUT_LINES)
    return None if rows is None else [_input(row) for row in rows]


def _decoded(block: bytes, decode_lines) -> Optional[list]:
    if not _valid_text(block) or long_integer(block):
        return None
    lines = one_row_a_line(block)
    if lines < 0:
        return None
    try:
        rows = decode_lines(block)
    except (msgspec.DecodeError, RecursionError):
        return None
    return rows if len(rows) == lines else None


def _rollout(row: _RolloutRow) -> Optional[RowFacts]:
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
    inp: Optional[int] = None
    out: Optional[int] = None
    nr = False
    answered: Optional[float] = None
    response = row.response
    if response is not UNSET:
        answered = seconds(response.created_at)
        usage = response.usage
        if usage is not UNSET:
            a, b = usage.input_tokens, usage.prompt_tokens
            inp = a if a is not UNSET else b if b is not UNSET else None
            a, b = usage.output_tokens, usage.completion_tokens
            out = a if a is not UNSET else b if b is not UNSET else None
        output = response.output
        if output is not UNSET and _raw_empty(output):
            # rule 1 holds: the rule itself decides, on the keys it reads (the output's value is
            # empty, which one does not matter)
            nr = never_ran({"output": None} if usage is UNSET else {"output": None, "usage": _usage_dict(usage)})
    ref = row.agent_ref
    agent = "" if ref is UNSET or ref.name is UNSET else ref.name
    perf, mask = row.perf, row.masked
    ms = seconds(perf.total_latency_ms) if perf is not None and perf is not UNSET else None
    return RowFacts(task, rollout, attempt, reward, inp, out, nr, agent,
                    latency=ms / 1000 if ms is not None else None, answered_at=answered,
                    masked=mask is not UNSET and bool(mask))


def _input(row: _InputRow) -> Optional[RowFacts]:
    if row.task < 0 or row.rollout < 0 or (row.attempt is not UNSET and row.attempt < 0):
        return None
    ref = row.agent_ref
    return RowFacts(row.task, row.rollout, None if row.attempt is UNSET else row.attempt,
                    agent="" if ref is UNSET or ref.name is UNSET else ref.name)


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


def _valid_text(block: bytes) -> bool:
    """All of it valid UTF-8 (ASCII, as Gym's json.dumps writes, is)."""
    if block.isascii():
        return True
    try:
        block.decode()
    except UnicodeDecodeError:
        return False
    return True


def long_integer(raw: bytes) -> bool:
    """A run of more than 4300 digits somewhere in `raw` (two neighbouring stride points)."""
    n = len(raw)
    if n > _MAX_DIGITS:
        prev = False
        for i in range(0, n, _DIGIT_STRIDE):
            digit = 48 <= raw[i] <= 57
            if digit and prev and raw[i - _DIGIT_STRIDE:i + 1].isdigit():
                return True
            prev = digit
    return False


def one_row_a_line(block: bytes) -> int:
    """The number of lines of a block of whole lines (each ending with \\n) whose every line
    starts with `{` and ends with `}`, else -1. After a `}` inside a value comes `,` `}` or `]`,
    never a line starting with `{`, and a string holds no raw newline: so no value spans lines,
    each line holds at least one, and as many values as lines means one a line."""
    if block[:1] != b"{":
        return -1
    find, pos, end, lines = block.find, 0, len(block), 0
    while pos < end:
        nl = find(b"\n", pos)
        if nl < 1 or block[nl - 1] != 0x7D:
            return -1
        pos = nl + 1
        lines += 1
        if pos < end and block[pos] != 0x7B:
            return -1
    return lines

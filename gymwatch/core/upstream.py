"""What an upstream answered when a request failed: the error message inside Gym's lines about it.

A model server logs each failed call to its model endpoint as
`[model_retry url=U status=N kind=K try=i max_tries=m error_msg=<the answer, 200 characters>]` (every
version; `[model_retry_stop ...]` in 0.7); Gym 0.7's handlers log
`[upstream_request_failed] server=... method=POST url=U status=N` and, on the next line,
`Response content: <the answer, up to 2000 characters>` (docs/gym-formats.md §4). The answer is
usually JSON: OpenAI's `{"error": {"message": ...}}`, vLLM's `{"object": "error", "message": ...}`,
FastAPI's `{"detail": ...}`; a server that relays another's error wraps it in its own words
(`"Hit an exception in X calling an inner server: b'{\"error\": ...}'"`). `message()` digs out the
innermost message, else gives the answer as it is. Pure text: no state.
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

_ERROR_MSG = "error_msg="
_CONTENT = "Response content:"
_URL_RE = re.compile(r"\burl=(\S+)")
_STATUS_RE = re.compile(r"\bstatus=(\d{3})\b")
# the keys an error answer keeps its words under, most specific first
_KEYS = ("message", "detail", "error", "msg", "error_message", "reason")
_MESSAGE_RE = re.compile(r'"(?:message|detail|msg|error_message|reason)"\s*:\s*"((?:[^"\\]|\\.)*)("?)')
_DEPTH = 6


def is_answer_line(body: str) -> bool:
    """A `Response content: ...` line (the answer after Gym 0.7's `[upstream_request_failed]`)."""
    return body.lstrip().startswith(_CONTENT)


def answer(body: str) -> Optional[str]:
    """The upstream's answer a line quotes (its `error_msg=` or its `Response content:`), as the
    line has it; None when the line quotes none."""
    i = body.find(_ERROR_MSG)
    if i >= 0:
        text = body[i + len(_ERROR_MSG):].rstrip()
        return text[:-1].rstrip() if text.endswith("]") else text    # the retry line's own bracket
    i = body.find(_CONTENT)
    if i >= 0:
        return body[i + len(_CONTENT):].strip()
    return None


def request(body: str) -> tuple[Optional[str], Optional[int]]:
    """(url, HTTP status) of a line about a failed request (`url=... status=...`)."""
    url = _URL_RE.search(body)
    status = _STATUS_RE.search(body)
    return (url.group(1).rstrip("]") if url else None), (int(status.group(1)) if status else None)


def message(text: str) -> str:
    """The innermost error message in an upstream's answer, whole; the answer itself (stripped)
    when it holds none. A message Gym cut (its 200 characters of `error_msg`) ends with `…`."""
    found = _dig(text.strip(), 0)
    return found if found else text.strip()


def _dig(text: str, depth: int) -> str:
    if not text or depth > _DEPTH:
        return ""
    value = _json(text)
    if value is not None:
        return _from_value(value, depth)
    # words around an answer: the JSON object inside them (a bytes repr's `b'{...}'` too)
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        inner = text[start:end + 1]
        for _ in range(_DEPTH):     # each server that relayed it escaped it once more
            value = _json(inner)
            if value is not None:
                return _from_value(value, depth)
            less = _unrepr(inner)
            if less == inner:
                break
            inner = less
    m = _MESSAGE_RE.search(text)        # JSON cut short (Gym keeps 200 characters of error_msg)
    if m:
        words = _unescape(m.group(1))
        return words if m.group(2) else words + "…"
    return ""


def _from_value(value: Any, depth: int) -> str:
    if isinstance(value, str):
        return _dig(value.strip(), depth + 1) or value.strip()
    if isinstance(value, dict):
        for key in _KEYS:
            if key in value and value[key] not in (None, "", [], {}):
                return _from_value(value[key], depth + 1)
        return ""
    if isinstance(value, list) and value:
        return _from_value(value[0], depth + 1)     # FastAPI's detail: [{"loc": ..., "msg": ...}]
    return ""


def _json(text: str) -> Any:
    if not text or text[0] not in "{[\"":
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


_ESCAPED = re.compile(r"\\(.)")


def _unrepr(text: str) -> str:
    """One level of a Python repr's escapes undone (`\\"` -> `"`, `\\\\` -> `\\`): the JSON a
    server quoted as `b'...'` inside its own words."""
    return _ESCAPED.sub(r"\1", text)


def _unescape(s: str) -> str:
    try:
        return json.loads(f'"{s}"')
    except ValueError:
        return s

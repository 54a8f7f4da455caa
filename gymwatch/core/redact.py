"""Secrets never leave gymwatch: values under secret-looking keys become `<redacted>`.

A key that names tokens in the plural with a plain number as its value (`max_output_tokens: 512`,
`max_tokens=2048`) is a count, and a tokenizer's name is no credential: both are shown, so the
JSON report's settings and commands, and a launched run's manifest, keep a run's generation
settings.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
_OTHERS = r"api[_-]?key|secret|password|passwd|credential"
_WORDS = rf"{_OTHERS}|token(?!i[sz]er)"
SECRET_KEY_RE = re.compile(_WORDS, re.IGNORECASE)
# A secret word but `tokens` (plural): a key holding one is secret whatever its value.
_NOT_A_COUNT_RE = re.compile(rf"{_OTHERS}|token(?!s|i[sz]er)", re.IGNORECASE)
_NUMBER_RE = re.compile(r"[+-]?\d+(?:\.\d+)?")
# key=value / key: value / "key": "value" inside free text (argv, override lists, log lines).
_ASSIGN_RE = re.compile(
    rf"""(?P<key>[\w.\-+]*(?:{_WORDS})[\w.\-]*)"""
    r"""(?P<sep>["']?\s*[=:]\s*["']?)(?P<val>[^\s"',}]+)""",
    re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY_RE.search(str(key)))


def _is_count(key: str, value: Any) -> bool:
    """A number under a key whose only secret word is `tokens` (plural): a count of tokens."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return False
    return _NUMBER_RE.fullmatch(str(value)) is not None and _NOT_A_COUNT_RE.search(str(key)) is None


def _hidden(key: Any, value: Any) -> bool:
    return is_secret_key(key) and value not in (None, "") and not _is_count(str(key), value)


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON/YAML-like structure with secret values replaced."""
    if isinstance(obj, dict):
        return {k: (REDACTED if _hidden(k, v) else redact_obj(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def redact_text(text: str) -> str:
    if SECRET_KEY_RE.search(text) is None:      # every assignment names one: a quick way out
        return text
    return _ASSIGN_RE.sub(_redacted_assignment, text)


def _redacted_assignment(m: re.Match) -> str:
    if _is_count(m.group("key"), m.group("val")):
        return m.group(0)
    return f"{m.group('key')}{m.group('sep')}{REDACTED}"


def redact_argv(argv: list[str]) -> list[str]:
    """argv with `key=secret` values and the value after `--api-key`-style flags redacted."""
    out = []
    flag = ""          # a secret-looking flag whose value comes next
    for arg in argv:
        if flag:
            out.append(arg if _is_count(flag, arg) else REDACTED)
            flag = ""
            continue
        if arg.startswith("-") and "=" not in arg and is_secret_key(arg):
            flag = arg
            out.append(arg)
            continue
        out.append(redact_text(arg))
    return out

"""Secrets never leave gymwatch: values under secret-looking keys become `<redacted>`."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
SECRET_KEY_RE = re.compile(r"api[_-]?key|token|secret|password|passwd|credential", re.IGNORECASE)
# key=value / key: value / "key": "value" inside free text (argv, override lists, log lines).
_ASSIGN_RE = re.compile(
    r"""(?P<key>[\w.\-+]*(?:api[_-]?key|token|secret|password|passwd|credential)[\w.\-]*)"""
    r"""(?P<sep>["']?\s*[=:]\s*["']?)(?P<val>[^\s"',}]+)""",
    re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY_RE.search(str(key)))


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON/YAML-like structure with secret values replaced."""
    if isinstance(obj, dict):
        return {k: (REDACTED if is_secret_key(k) and v not in (None, "") else redact_obj(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def redact_text(text: str) -> str:
    if SECRET_KEY_RE.search(text) is None:      # every assignment names one: a quick way out
        return text
    return _ASSIGN_RE.sub(lambda m: f"{m.group('key')}{m.group('sep')}{REDACTED}", text)


def redact_argv(argv: list[str]) -> list[str]:
    """argv with `key=secret` values and the value after `--api-key`-style flags redacted."""
    out = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        if arg.startswith("-") and "=" not in arg and is_secret_key(arg):
            hide_next = True
            out.append(arg)
            continue
        out.append(redact_text(arg))
    return out

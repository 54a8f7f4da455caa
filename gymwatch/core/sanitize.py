"""Untrusted text (log lines, rollout fields) made safe for a terminal or a text report."""

from __future__ import annotations

import re

# CSI, OSC (terminated by BEL or ST), other ESC sequences, then lone C0/C1 controls but tab.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]?"
    r"|[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def clean(text: str) -> str:
    """Strip terminal escapes and control characters; keep everything printable as is."""
    return _ESCAPES.sub("", text)

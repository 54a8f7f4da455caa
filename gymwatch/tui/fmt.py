"""Small formatting helpers shared by the widgets. Untrusted text only ever enters a Text as plain."""

from __future__ import annotations

from typing import Optional

from rich.text import Text

from ..core import gymlines
from ..core.sanitize import clean

STATE_LOOK = {   # server state -> (symbol, style)
    "pending": ("○", "dim"),
    "installing": ("◐", "yellow"),
    "starting": ("◑", "cyan"),
    "ready": ("●", "bold green"),
    "exited": ("■", "grey62"),
    "failed": ("✗", "bold red"),
}
STATUS_LOOK = {  # trial status -> (label, style of the status cell, style of the whole row)
    "completed": ("✓ completed", "green", ""),
    "failed": ("✗ failed", "bold red", "red"),
    "never_ran": ("◆ NEVER RAN", "bold white on dark_magenta", "bold magenta"),
    "missing": ("? missing", "bold yellow", "yellow"),
    "pending": ("… pending", "dim", ""),
}
VERDICT_LOOK = {
    "starting": ("◐ STARTING", "bold yellow"),
    "collecting": ("▶ COLLECTING", "bold cyan"),
    "ok": ("✓ OK", "bold green"),
    "some_never_ran": ("◆ SOME TRIALS NEVER RAN", "bold white on dark_magenta"),
    "no_agent_ran": ("✗ NO AGENT RAN", "bold white on red"),
    "collection_aborted": ("✗ COLLECTION ABORTED", "bold white on red"),
    "startup_failed": ("✗ STARTUP FAILED", "bold white on red"),
    "incomplete": ("? INCOMPLETE", "bold black on yellow"),
}


def plain(text: str, limit: int = 0, style: str = "") -> Text:
    """Untrusted text as a Text: escapes stripped, never parsed as markup, optionally cut."""
    s = " ".join(clean(text).split()) if limit else clean(text)
    if limit and len(s) > limit:
        s = s[: limit - 1] + "…"
    return Text(s, style=style, no_wrap=True, end="")


def body(line: str) -> str:
    """A server log line without its `(name) ` prefix."""
    _, rest = gymlines.split_prefix(line)
    return rest


def duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return ""
    if 0 < seconds < 1:
        return "<1s"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def reward(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.3f}"

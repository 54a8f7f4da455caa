"""Small formatting helpers shared by the widgets. Untrusted text only ever enters a Text as plain."""

from __future__ import annotations

from typing import Optional

from rich.style import Style
from rich.text import Text

from ..core import gymlines
from ..core.model import (
    EXITED,
    FAILED,
    H_HEALTHY,
    H_UNHEALTHY,
    H_UNOBSERVED,
    INSTALLING,
    K_AGENT,
    K_ENVIRONMENT,
    K_MODEL,
    K_RESOURCES,
    K_SERVICE,
    K_UNKNOWN,
    PENDING,
    READY,
    S_INSTALL,
    S_LOCK,
    S_START,
    S_VENV,
    STARTING,
    T_COMPLETED,
    T_FAILED,
    T_MISSING,
    T_NEVER_RAN,
    T_PENDING,
    V_COLLECTING,
    V_COLLECTION_ABORTED,
    V_INCOMPLETE,
    V_NO_AGENT_RAN,
    V_OK,
    V_QUEUED,
    V_SOME_FAILED,
    V_SOME_NEVER_RAN,
    V_STARTING,
    V_STARTUP_FAILED,
    V_UNREADABLE,
)
from ..core.sanitize import clean

STATE_LOOK = {   # server state -> (symbol, style)
    PENDING: ("○", "dim"),
    INSTALLING: ("◐", "yellow"),
    STARTING: ("◑", "cyan"),
    READY: ("●", "bold green"),
    EXITED: ("■", "grey62"),
    FAILED: ("✗", "bold red"),
}
STEP_LOOK = {   # a server's startup step (core/model.py S_*) -> style of its bar in the timeline
    S_LOCK: "magenta", S_VENV: "blue", S_INSTALL: "cyan", S_START: "yellow"}
KIND_LABEL = {K_RESOURCES: "res", K_AGENT: "agent", K_MODEL: "model", K_ENVIRONMENT: "env", K_UNKNOWN: "",
              K_SERVICE: "svc"}
STATUS_LOOK = {  # trial status -> (label, style of the status cell, style of the whole row)
    T_COMPLETED: ("✓ completed", "green", ""),
    T_FAILED: ("✗ failed", "bold red", "red"),
    T_NEVER_RAN: ("◆ NEVER RAN", "bold white on dark_magenta", "bold magenta"),
    T_MISSING: ("? missing", "bold yellow", "yellow"),
    T_PENDING: ("… pending", "dim", ""),
}
GYM_HEALTH_LOOK = {  # Gym's own rollout verdict -> (label, style)
    H_HEALTHY: ("healthy", "green"),
    H_UNHEALTHY: ("unhealthy", "bold red"),
    H_UNOBSERVED: ("unobs.", "dim"),
}
VERDICT_LOOK = {
    V_QUEUED: ("◌ QUEUED", "bold yellow"),
    V_STARTING: ("◐ STARTING", "bold yellow"),
    V_COLLECTING: ("▶ COLLECTING", "bold cyan"),
    V_OK: ("✓ OK", "bold green"),
    V_SOME_FAILED: ("✗ SOME TRIALS FAILED", "bold white on dark_red"),
    V_SOME_NEVER_RAN: ("◆ SOME TRIALS NEVER RAN", "bold white on dark_magenta"),
    V_NO_AGENT_RAN: ("✗ NO AGENT RAN", "bold white on red"),
    V_COLLECTION_ABORTED: ("✗ COLLECTION ABORTED", "bold white on red"),
    V_STARTUP_FAILED: ("✗ STARTUP FAILED", "bold white on red"),
    V_INCOMPLETE: ("? INCOMPLETE", "bold black on yellow"),
    V_UNREADABLE: ("✗ UNREADABLE", "bold white on red"),
}
STALLED_LOOK = ("‖ STALLED", "bold black on yellow")     # collecting, but no result comes (core/pace.py)


class ComponentLooks:
    """For widgets that draw their own lines (a mixin before the Textual base): the colours of
    their parts come from the theme, as COMPONENT_CLASSES with defaults in DEFAULT_CSS, the way
    DataTable does it, so a theme (or the app's CSS) restyles them."""

    def look(self, name: str) -> Style:
        """Component class `name` as a Rich style to lay over or under text that has colours of
        its own: only the colours its rules set (theme variables resolved, `auto` and alpha
        worked out against the widget's background) and its text style."""
        looks = self.__dict__.setdefault("_looks", {})
        style = looks.get(name)
        if style is None:
            rules = self.get_component_styles(name)  # type: ignore[attr-defined]
            full = self.get_component_rich_style(name)  # type: ignore[attr-defined]
            attrs = self.get_component_rich_style(name, partial=True).without_color  # type: ignore[attr-defined]
            style = looks[name] = Style(color=full.color if rules.has_rule("color") else None,
                                        bgcolor=full.bgcolor if rules.has_rule("background") else None) + attrs
        return style

    def notify_style_update(self) -> None:
        """The CSS or the theme changed: look again."""
        self.__dict__["_looks"] = {}
        super().notify_style_update()  # type: ignore[misc]


def plain(text: str, limit: int = 0, style: str | Style = "") -> Text:
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

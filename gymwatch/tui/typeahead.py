"""Screens closed by keys typed ahead of them.

Enter then q (or escape) in one burst, from a fast typist, a paste or a busy machine, can close a
screen after it was pushed but before its Mount was handled: q popped it, or reached the app and
quit it. By then the screen's nested widgets are gone: setting them up raised NoMatches, an error
that ends the app with exit code 1, and opening a log there would start readers nothing shows.
"""

from __future__ import annotations

from textual.screen import Screen


def closed_early(screen: Screen) -> bool:
    """True when `screen` left the app's screen stack, or the app began to quit, before the
    screen's Mount was handled."""
    return not screen.is_attached or screen not in screen.app.screen_stack

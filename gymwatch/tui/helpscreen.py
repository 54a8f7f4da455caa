"""`?`: what the screen shows and the keys, as plain Text (no markup)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .fmt import STATE_LOOK, STATUS_LOOK

KEYS = (
    ("tab / shift+tab", "next / previous pane (servers, trials, log)"),
    ("↑ ↓ j k, PgUp PgDn", "move; selecting a server shows its log live"),
    ("enter", "open the evidence of the selected failed server / trial at its line"),
    ("l", "open the log behind the selection (a trial: where its cause is)"),
    ("] / [", "next / previous failure (failed server, failed / never-ran / missing trial)"),
    ("!", "open the line the verdict rests on"),
    ("v / s", "trials: cycle filter (all, failed, never-ran, missing, pending) / sort"),
    ("f, G", "log: follow on/off (scrolling up pauses it), jump to the end and follow"),
    ("/  n N", "log: find, next / previous match"),
    ("e", "log: error lines only"),
    ("m", "log: every server's log merged, a coloured label per server (l: back to one)"),
    ("ctrl+p", "command palette"),
    ("q / ctrl+q", "quit (the run keeps going: gymwatch never stops it)"),
)


def help_text() -> Text:
    t = Text()
    t.append("gymwatch: the live screen of a NeMo Gym run\n\n", style="bold")
    for key, what in KEYS:
        t.append(f"  {key:<22}", style="bold cyan")
        t.append(f"{what}\n")
    t.append("\nServer states\n", style="bold")
    for state, (sym, style) in STATE_LOOK.items():
        t.append(f"  {sym} {state:<12}", style=style)
    t.append("\n  ⚠ slow: not ready for far longer than its slowest sibling needed\n")
    t.append("\nTrial statuses\n", style="bold")
    for _, (label, style, _row) in STATUS_LOOK.items():
        t.append(f"  {label}  ", style=style)
    t.append("\n  never ran: the model was never called (empty output, zero usage); its 0.0 reward"
             " is withheld from the mean\n")
    t.append("\nEsc or ? closes this.", style="dim")
    return t


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_text())

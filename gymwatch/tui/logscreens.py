"""The log view's modal screens: a one-line question (find, filter, go to line) and one whole
line (for lines the view cuts at its cap)."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from ..core.sanitize import clean


class Prompt(ModalScreen[Optional[str]]):
    """A one-line question at the bottom of the screen (find, filter, jump)."""

    DEFAULT_CSS = """
    Prompt { align: left bottom; background: $background 0%; }
    Prompt > Input { width: 100%; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", show=False)]

    def __init__(self, placeholder: str, value: str = ""):
        super().__init__()
        self._placeholder, self._value = placeholder, value

    def compose(self) -> ComposeResult:
        yield Input(value=self._value, placeholder=self._placeholder)

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class LineScreen(ModalScreen[None]):
    """One whole line, wrapped (for lines capped in the view)."""

    DEFAULT_CSS = """
    LineScreen { align: center middle; }
    LineScreen > VerticalScroll { width: 90%; height: 80%; border: round $accent; background: $surface; }
    """
    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close")]
    MAX_CHARS = 1 << 20

    def __init__(self, title: str, text: str):
        super().__init__()
        self._title, self.text = title, text

    def compose(self) -> ComposeResult:
        text = clean(self.text[: self.MAX_CHARS])
        if len(self.text) > self.MAX_CHARS:
            text += f" … ({len(self.text) - self.MAX_CHARS} more characters: press o to open the file)"
        with VerticalScroll() as vs:
            vs.border_title = Text(self._title)     # a file name is not markup
            yield Static(Text(text), markup=False)

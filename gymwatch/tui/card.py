"""The trial card (`enter` on a trial): the core's Card laid out in one scrollable screen, with
the lines that explain the trial as a list to open. `r` opens the raw row instead. The screen
hands back what to open (an Evidence) and the app opens it; it changes nothing itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ..core.card import Card
from ..core.model import Evidence
from ..core.sanitize import clean
from .fmt import STATUS_LOOK
from .footer import WholeLabels
from .typeahead import closed_early


def card_text(card: Card) -> Text:
    """Everything but the lines list, as one Text (untrusted parts never parsed as markup)."""
    t = Text(end="")
    label, style, _ = STATUS_LOOK.get(card.status, (card.status, "bold", ""))
    t.append(f" {label} ", style=style)
    t.append(f"  {card.title}\n", style="bold")
    for i, line in enumerate(card.rule):
        t.append(("  " if i else "") + clean(line) + "\n", style="" if i else "bold")
    if card.facts:
        t.append("\n")
        width = max(len(k) for k, _ in card.facts)
        for k, v in card.facts:
            t.append(f"{k:>{width}}  ", style="dim")
            t.append(clean(v) + "\n")
    if card.health:
        t.append("\n")
        for line in card.health:
            t.append(clean(line) + "\n", style="yellow" if line.startswith("≠") else "")
    if card.conversation:
        t.append("\nConversation\n", style="bold underline")
        for who, text in card.conversation:
            t.append(f"{clean(who)}: ", style="bold cyan" if who == "assistant" else "bold")
            t.append(clean(text).rstrip() + "\n")
    return t


def line_label(ev: Evidence) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(ev.where(), style="underline")
    what = ev.note or ev.text.strip()
    if what:
        t.append("  " + " ".join(clean(what).split())[:300], style="dim" if ev.note else "")
    return t


@dataclass
class AroundIt:
    """What `t` on a card asks for: every server's log merged, at the trial's line `picked` (or
    the first of `lines` that is in a server's log)."""

    picked: Optional[Evidence]
    lines: list[Evidence]


class TrialCard(ModalScreen[Union[Evidence, AroundIt, None]]):
    """Dismissed with the Evidence to open (a listed line, or the row itself), AroundIt, or None."""

    DEFAULT_CSS = """
    TrialCard { align: center middle; }
    TrialCard > Vertical { width: 96%; max-width: 160; height: 92%; border: thick $accent; background: $surface; }
    TrialCard #card-body { height: 1fr; padding: 0 1; }
    TrialCard #card-lines { height: auto; max-height: 40%; border-top: solid $primary-darken-2; }
    """
    BINDINGS = [
        Binding("escape,q", "close", "Close", id="card.close"),
        Binding("r", "raw_row", "Raw row", id="card.raw-row"),
        Binding("right_curly_bracket", "step(1)", "Next line", key_display="}", id="card.next-line"),
        Binding("left_curly_bracket", "step(-1)", "Prev line", key_display="{", id="card.prev-line"),
        Binding("t", "around", "Around it", id="card.around"),
    ]

    def __init__(self, card: Card, context: str = ""):
        super().__init__()
        self.card, self.context = card, context     # context: which run, when it is not obvious

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = f"Trial {self.card.title}"
            if self.context:
                box.border_subtitle = Text(self.context)    # run paths are not markup
            with VerticalScroll(id="card-body"):
                yield Static(card_text(self.card), markup=False)
            lines = OptionList(*(Option(line_label(ev), id=str(i)) for i, ev in enumerate(self.card.lines)),
                               id="card-lines")
            lines.border_title = "Lines that explain it (in order)"
            yield lines
        yield WholeLabels()

    def on_mount(self) -> None:
        if closed_early(self):
            return
        lines = self.query_one(OptionList)
        if self.card.lines:
            lines.highlighted = 0
            lines.focus()
        else:
            lines.display = False

    @on(OptionList.OptionSelected)
    def _open(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.card.lines[event.option_index])

    def action_step(self, step: int) -> None:
        lines = self.query_one(OptionList)
        if self.card.lines:
            n = len(self.card.lines)
            lines.highlighted = ((lines.highlighted or 0) + step) % n
            self.notify(f"line {lines.highlighted + 1} of {n}", timeout=1.5)

    def action_around(self) -> None:
        """Every server's log around the trial, in the order the lines were written (the app
        opens it at the highlighted line when that is a server's, else at the first that is)."""
        lines = self.query_one(OptionList)
        pick = self.card.lines[lines.highlighted] if self.card.lines and lines.highlighted is not None else None
        self.dismiss(AroundIt(pick, self.card.lines))

    def action_raw_row(self) -> None:
        if self.card.row is None:
            self.notify("no row for this trial (it has none, or it is not read yet)")
            return
        self.dismiss(self.card.row)

    def action_close(self) -> None:
        self.dismiss(None)

"""`?`: the keys, read from the live bindings (a keymap file's keys included), and what the
screen shows. Plain Text throughout: nothing here is markup."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .fmt import STATE_LOOK, STATUS_LOOK
from .keymap import CARD, all_bindings

# What a few keys do, beyond their footer word.
EXPLAIN = {
    "gymwatch.next-failure": "next failure: failed server, failed / never-ran / missing trial",
    "gymwatch.prev-failure": "previous failure",
    "gymwatch.evidence": "open the line the verdict rests on",
    "gymwatch.maximize": "the focused pane fills the screen (again, or escape: back)",
    "gymwatch.wrap": "long log lines wrap instead of being cut with …",
    "gymwatch.quit": "quit (the run keeps going: gymwatch never stops it)",
    "gymwatch.all-logs": "every server's log merged, a coloured label per server (l: back to one)",
    "gymwatch.next-cause": "next line of the selected trial's cause chain",
    "gymwatch.prev-cause": "previous line of the selected trial's cause chain",
    "servers.open": "open the selected server's log (its evidence when it failed)",
    "trials.filter": "cycle the filter: all, failed, never-ran, missing, pending, ...",
    "trials.cause-log": "open the log line behind the selected trial's failure",
    "logview.follow": "follow on/off (scrolling up or g pauses it, G goes on)",
    "gymwatch.retry-input": "retry file: the selected trial's inputs (or all that did not complete) and the command",
    "gymwatch.copy": "copy the text selected with the mouse",
    "gymwatch.ctrl-c": "say how to quit",
    "card.close": "close the card",
    "card.raw-row": "the trial's row, whole and indented, over the log pane at that row",
    "card.next-line": "next line that explains it",
    "card.prev-line": "previous line that explains it",
}
# What a binding a key's first binding shadows does, told on that row (when it has no key left).
FALLBACK = {"gymwatch.ctrl-c": "nothing selected: say how to quit"}
# Keys a section has beyond its bindings' (the card's list of lines is an OptionList).
EXTRA = {CARD: [("⏎", "open the highlighted line in the log pane (↑ ↓ move)", "")]}


def help_rows(app) -> dict[str, list[tuple[str, str, str]]]:
    """Section -> (keys, what, binding ids) of every binding, keys of one binding together.

    A key is listed once a section, on the binding that gets it first (all_bindings' order is
    the order a key is looked up in); a binding left with no key of its own is what that key
    does when the first one has nothing to do (ctrl+c copies the selected text, else says how
    to quit), so it is told on the same row, its id beside the first's."""
    rows: dict[str, dict[tuple, list[str]]] = {}
    owner: dict[tuple[str, str], tuple] = {}
    shadowed: dict[tuple, list[tuple]] = {}
    for section, b in all_bindings(app):
        row = (b.id or b.action, b.description or b.action, b.id or "")
        shown = app.get_key_display(b)
        first = owner.setdefault((section, shown), row)
        if first != row:
            shadowed.setdefault(first, []).append(row)
            continue
        keys = rows.setdefault(section, {}).setdefault(row, [])
        if shown not in keys:
            keys.append(shown)
    out: dict[str, list[tuple[str, str, str]]] = {}
    for section, group in rows.items():
        lines = out[section] = []
        for row, keys in group.items():
            _, what, bid = row
            what, ids = EXPLAIN.get(bid, what), [bid] if bid else []
            for other in dict.fromkeys(shadowed.get(row, [])):
                if other not in group:
                    what += "; " + FALLBACK.get(other[2], f"else: {EXPLAIN.get(other[2], other[1])}")
                    ids += [other[2]] if other[2] else []
            lines.append((" ".join(keys), what, " ".join(ids)))
        lines.extend(EXTRA.get(section, []))
    return out


def help_text(app) -> Group:
    """The help as columns: keys, what they do (wrapping in its own column), binding ids (one a
    line): a row stays a row at 80 columns, nothing wraps to the left edge."""
    sections = help_rows(app)
    rows = [row for section in sections.values() for row in section]
    key_width = max((cell_len(keys) for keys, _, _ in rows), default=1)
    id_width = max((cell_len(bid) for _, _, ids in rows for bid in ids.split()), default=1)
    head = Text()
    head.append("gymwatch: the live screen of a NeMo Gym run\n", style="bold")
    head.append("tab / shift+tab move between the panes; the footer shows the focused pane's keys.", style="dim")
    parts: list[RenderableType] = [head]
    for section, lines in sections.items():
        parts.append(Text(f"\n{section}", style="bold"))
        table = Table(box=None, show_header=False, show_edge=False, padding=(0, 0, 0, 2), expand=True)
        table.add_column(width=key_width, no_wrap=True, style="bold cyan")
        table.add_column(ratio=1)
        table.add_column(width=id_width, no_wrap=True, style="dim")
        for keys, what, ids in lines:
            table.add_row(Text(keys), Text(what), Text("\n".join(ids.split())))
        parts.append(table)
    foot = Text()
    path = app.keymap_path
    foot.append(f"\nRemap a key by its id in {path or 'keymap.toml'}, e.g. \"gymwatch.maximize\" = \"Z\"\n",
                style="dim")
    legend(foot)
    foot.append("\nEsc or ? closes this.", style="dim")
    parts.append(foot)
    return Group(*parts)


def legend(t: Text) -> None:
    t.append("\nServer states\n", style="bold")
    for state, (sym, style) in STATE_LOOK.items():
        t.append(f"  {sym} {state:<12}", style=style)
    t.append("\n  ⚠ slow: not ready for far longer than its slowest sibling needed\n")
    t.append("\nTrial statuses\n", style="bold")
    for _, (label, style, _row) in STATUS_LOOK.items():
        t.append(f"  {label}  ", style=style)
    t.append("\n  never ran: the model was never called (empty output, zero usage); its 0.0 reward"
             " is withheld from the mean\n")


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close", id="help.close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(help_text(self.app))

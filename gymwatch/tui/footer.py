"""The footer: the keys whose labels fit whole, in their order, and the palette key at the right.

Textual's Footer lays every shown binding out in a row and lets the palette key (docked right)
cover the last ones: at 80 columns `l Cause log` was cut to `l`. Here the keys that would not fit
whole are left out (`?` lists every key), and the row is made again when the width changes.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# Cells a key takes besides its key and its label, from Footer's and FooterKey's CSS. Compact: no
# padding round the key, one space before the label, one cell of margin after it. Otherwise a
# space each side of the key and after the label. The palette key has a border on its left too.
EXTRA = {True: 2, False: 3}
PALETTE_EXTRA = {True: 1, False: 2}


def key_width(key: FooterKey, compact: bool) -> int:
    """Cells `key` takes in the footer, its label whole."""
    label = cell_len(key.description) if key.description else -1   # no label: no space before it
    return cell_len(key.key_display) + label + EXTRA[compact]


class WholeLabels(Footer):
    """Shows the first keys whose labels fit whole beside the palette key (the order of the
    screen's active bindings: MainScreen puts the few global keys first)."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._laid_out_for: tuple[int, bool] = (0, False)

    def _width(self) -> int:
        return self.size.width or self.screen.size.width or self.app.size.width

    def compose(self) -> ComposeResult:
        keys = list(super().compose())
        palette = [k for k in keys if isinstance(k, FooterKey) and "-command-palette" in k.classes]
        room = self._width() - sum(key_width(k, self.compact) + PALETTE_EXTRA[self.compact] for k in palette)
        self._laid_out_for = (self._width(), self.compact)
        for key in keys:
            if key in palette:
                continue
            need = key_width(key, self.compact) if isinstance(key, FooterKey) else room + 1
            if need > room:
                break                  # the rest are a `?` away: none jumps ahead of a cut one
            room -= need
            yield key
        yield from palette

    def on_resize(self) -> None:
        if self._laid_out_for != (self._width(), self.compact):
            self.call_after_refresh(self.recompose)

    def watch_compact(self) -> None:
        if self.is_attached and self._laid_out_for[1] != self.compact:
            self.call_after_refresh(self.recompose)

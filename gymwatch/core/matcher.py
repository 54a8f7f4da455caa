"""What the log viewer's find and filter look for (headless: no Textual here).

A `Matcher` is a text (case-insensitive by default; `!text` inverts) and/or the core's error
markers (the errors-only filter). It answers at two levels: `candidates()` finds where in a
block's bytes a match may be (a text by memchr, the markers' keywords by one RE2 search: most
blocks are ruled out undecoded), and `line()` decides for one decoded line. `LogIndex.scan()`
walks a file's blocks with it.
"""

from __future__ import annotations

from typing import Optional

from .eolcount import line_end
from .fast.scan import find, literals
from .markers import MARKER_KEYWORDS, is_error_line


class Matcher:
    """What find/filter look for: a text (`!text` inverts), or error lines (core markers)."""

    def __init__(self, text: str = "", errors_only: bool = False, ignore_case: bool = True):
        self.invert = text.startswith("!")
        text = text[1:] if self.invert else text
        self.ignore_case = ignore_case
        self.text = text.lower() if ignore_case else text
        self.errors_only = errors_only

    @property
    def empty(self) -> bool:
        return not self.text and not self.errors_only

    def candidates(self, data: bytes) -> Optional[list[int]]:
        """Byte offsets in `data` where a match may be: [] rules the block out, None means
        every line must be tested (inverted text, non-ASCII text)."""
        if self.errors_only:
            hits = _keyword_lines(data)
            if not hits or not self.text or self.invert:
                return hits
        if not self.text or self.invert or not self.text.isascii():
            return None
        needle = self.text.encode()
        return _positions(data.lower() if self.ignore_case else data, (needle,))

    def line(self, text: str) -> bool:
        ok = True
        if self.text:
            ok = self.text in (text.lower() if self.ignore_case else text)
            ok = ok != self.invert
        if self.errors_only:
            ok = ok and is_error_line(text)
        return ok

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the text occurs in a line, for highlighting."""
        if not self.text or self.invert:
            return []
        hay = text.lower() if self.ignore_case else text
        out, i = [], hay.find(self.text)
        while i >= 0:
            out.append((i, i + len(self.text)))
            i = hay.find(self.text, i + len(self.text))
        return out


def _positions(data: bytes, needles: tuple[bytes, ...]) -> list[int]:
    out = []
    for needle in needles:
        i = data.find(needle)
        while i >= 0:
            out.append(i)
            i = data.find(needle, i + len(needle))
    return out


def _keyword_lines(data: bytes) -> list[int]:
    """Where the first of the markers' keywords is in each line holding one, ascending: one
    search of all of them, resumed at the next line (a `find` a keyword took a pass over the
    block each: most of an errors-only filter's time)."""
    out: list[int] = []
    pos, end = 0, len(data)
    while pos < end:
        i = find(_KEYWORDS, data, pos, end)
        if i < 0:
            break
        out.append(i)
        pos = line_end(data, i) + 1       # (a lone \r ends a line too: the index's lines)
    return out


# The markers' keywords: one search finds the lines that may hold a marker.
_KEYWORDS = literals(tuple(k.encode() for k in MARKER_KEYWORDS))

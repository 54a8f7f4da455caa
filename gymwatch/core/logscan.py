"""A server's log read in blocks: find the few lines that can change what gymwatch knows.

Most of a running server's log is request and worker lines that change nothing but the server's
last line. Reading them one by one through every pattern cost ~6 us a line (11 MB/s: a 1 GB log
took a minute and a half). Instead, while a server is in a steady state (running, not inside an
error block, not installing), one search of a compiled pattern over the whole block finds the next
line that holds any keyword that can change its state; everything before it is skipped in C, line
ends counted once (`bytes.count`), and only that line takes the line-by-line path.

The pattern is RE2's (google-re2): a DFA over ~40 literals scans ~0.5 GB/s whatever their number.
Python's `re` tries the alternation at every position (~60 MB/s for these literals), and one
`bytes.find` per literal costs a pass of the block each.

A literal must be in every line a pattern of the line-by-line path can act on in that state:
`tests/test_logscan.py` generates matches of each such pattern and checks it (as it does for the
failure markers' keywords), and that a log read in blocks gives the same model as read by lines.
"""

from __future__ import annotations

import re
from typing import Optional

import re2

from . import gymlines as gl
from .gymlines import split_prefix
from .markers import MARKER_KEYWORDS
from .tail import decode

# Lines a steady server's line-by-line path acts on, by the pattern that acts (core/servers.py,
# core/reducer.py): each of those patterns' matches holds one of its literals here.
STEADY_KEYWORDS: dict[str, tuple[str, ...]] = {
    "VENV_RE": gl.VENV_RE.words,
    "UVICORN_RE": ("Uvicorn running on ",),
    "STARTING_RE": gl.STARTING_RE.words,
    "SHUTDOWN_RE": gl.SHUTDOWN_RE.words,
    "STOPPING_RE": gl.STOPPING_RE.words,
    "CHAINED": ("The above exception", "During handling of the above exception"),
    "VENV_LOCK_RE": ("Waiting for virtual environment setup",),
    "GYM_PACKAGE_RE": ("nemo-gym==",),
    "REQUEST_RETRY_RE": ("[request_retry ",),     # a connection it cannot make (Reducer._retrying)
    # literal tests in Reducer._output_signs: features that bound the Gym version
    "VERSION_SIGNS": ("aiohttp connection pool capacity", "Disabling a uvicorn access logging"),
}
ACCESS_KEYWORD = 'HTTP/1.1" '          # the first access-log line is a sign of the Gym version
RUN_ACCESS_KEYWORD = '"POST /run HTTP/'   # an agent's first /run (RUN_ACCESS_RE)
_BASE = tuple(dict.fromkeys(MARKER_KEYWORDS + tuple(k for ks in STEADY_KEYWORDS.values() for k in ks)))

_OPTIONS = re2.Options()
_OPTIONS.max_mem = 64 << 20     # room for the DFA: with less, RE2 falls back to a slower engine
# Blocks and patterns are bytes: each byte of a pattern is that byte (RE2 reads a pattern as UTF-8
# by default, where `\xc3` is the character U+00C3), so a server named outside ASCII is matched as
# the UTF-8 its prefix is written in.
_OPTIONS.encoding = re2.Options.Encoding.LATIN1
_patterns: dict[tuple[str, bool, bool], "re2._Regexp"] = {}
_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)     # (see find)

# A line that may start with a timestamp (after an optional `(server) ` prefix); core/stamps.py
# decides whether it does.
_STAMPED = re2.compile(rb"(?m)^(?:\([A-Za-z_][\w.\-/]*\) ?)?\[?(?:19|20|21)\d\d-", _OPTIONS)
_STAMPED_AT = re.compile(rb"(?:\([A-Za-z_][\w.\-/]*\) ?)?\[?(?:19|20|21)\d\d-")    # the same, at a line start
STAMP_LOOKBACK = 64         # lines looked at back from a region's end for its last stamped line


def pattern(server: str, access: bool, first_run: bool):
    """The search for the next line that matters in `server`'s log while it is steady: a keyword,
    or a line starting with `(` but not with `(<server>)` (the line-by-line path may give such a
    line to another server). `access`: this file's first access line is still to be seen;
    `first_run`: this server's first /run access line is."""
    key = (server, access, first_run)
    pat = _patterns.get(key)
    if pat is None:
        if len(_patterns) > 256:
            _patterns.clear()
        words = _BASE + ((ACCESS_KEYWORD,) if access else ()) + ((RUN_ACCESS_KEYWORD,) if first_run else ())
        alts = [re.escape(w.encode()) for w in words] + [b"(?m:^\\()" + not_starting_with([f"{server})".encode()])]
        pat = _patterns[key] = alternatives(alts)
    return pat


def literals(words: tuple[bytes, ...]):
    """One compiled search for any of `words` (RE2's DFA: one pass over a block, whatever their
    number)."""
    return alternatives([re.escape(w) for w in words])


def alternatives(patterns: list[bytes]):
    """One compiled search for any of the RE2 `patterns`."""
    return re2.compile(b"|".join(patterns), _OPTIONS)


def find(pat, block: bytes, pos: int, end: int) -> int:
    """Where the first match of the compiled `pat` in block[pos:end] starts; -1 if none. The
    wrapper's `search` makes a generator and a Match object a call (~3.5 us of its ~5.7 us on a
    short block, paid at every line that matters): the compiled matcher the pinned google-re2
    holds is asked directly when it is there (any other pattern object: its `search`)."""
    matcher = getattr(pat, "_regexp", None)
    if matcher is not None and _UNANCHORED is not None:
        return matcher.Match(_UNANCHORED, block, pos, end)[0][0]
    m = pat.search(block, pos, end)
    return m.start() if m else -1


def not_starting_with(words: list[bytes]) -> bytes:
    """A pattern for any text (a line end, the end) that starts with none of `words` (RE2 has no
    lookahead): the complement of their trie, `[^ab]|$|a(?:[^c]|$|c...)|b(?:...)`."""
    trie: dict = {}
    for w in words:
        node = trie
        for byte in w:
            node = node.setdefault(byte, {})
        node[-1] = {}

    def outside(node: dict) -> Optional[bytes]:
        if -1 in node:
            return None              # a whole word: the text starts with it
        alts = [b"[^" + b"".join(b"\\x%02x" % c for c in node) + b"]", b"$"]
        for c, child in sorted(node.items()):
            rest = outside(child)
            if rest is not None:
                alts.append(b"\\x%02x(?:%s)" % (c, rest))
        return b"|".join(alts)
    return b"(?:" + (outside(trie) or b"[^\\s\\S]") + b")"


def next_line(pat, block: bytes, pos: int, end: int) -> int:
    """Where the first line at or after `pos` holding a match of `pat` starts (`end`: none)."""
    found = find(pat, block, pos, end)
    return line_start(block, found, pos) if found >= 0 else end


def line_start(block: bytes, pos: int, lo: int = 0) -> int:
    return block.rfind(b"\n", lo, pos) + 1 or lo


def foreign(block: bytes, at: int, server: str) -> bool:
    """The line at `at` starts with `(` but not with `(<server>)`: it may be another server's."""
    return block.startswith(b"(", at) and not block.startswith(f"({server})".encode(), at)


def has_text(block: bytes, at: int) -> bool:
    """The line at `at` holds more than whitespace after its `(server) ` prefix (as on_line sees it)."""
    return bool(split_prefix(decode(block[at:block.index(b"\n", at)]))[1].strip())


def last_text_line(block: bytes, lo: int, hi: int) -> Optional[int]:
    """Where the last line of block[lo:hi] holding more than whitespace after its `(server) `
    prefix starts (None: none does). The lines there are whole, each ending with a newline."""
    end = hi
    while end > lo:
        start = line_start(block, end - 1, lo)
        if has_text(block, start):
            return start
        end = start
    return None


def stamped_lines(block: bytes, lo: int, hi: int) -> tuple[Optional[int], Optional[int]]:
    """Starts of the first and the last lines of block[lo:hi] that may start with a timestamp:
    the first by one search, the last by looking at line starts back from the end."""
    first = find(_STAMPED, block, lo, hi)
    if first < 0:
        return None, None
    end = hi
    for _ in range(STAMP_LOOKBACK):
        if end <= first:
            return first, first
        start = line_start(block, end - 1, first)
        if _STAMPED_AT.match(block, start):
            return first, start
        end = start
    last = first           # a long unstamped end: the stamps before it, in one pass
    for m in _STAMPED.finditer(block, first, end):
        last = m.start()
    return first, last

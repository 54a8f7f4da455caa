"""The lines of a block that can change nothing, skipped in C. Its reference twin is the reducer's
line path: `Reducer.server_log_line` / `stream_line`, a line at a time.

Most of a running server's log is request and worker lines that change nothing but its last line,
and most of Gym's captured output is Ray's chatter, banners' frames, tracebacks' source lines and
copies of the servers' lines. While the line path is steady (no state open that reads the next
lines one by one), one search over the block finds the next line holding any word of a pattern the
line path acts on (core/gymlines.py's registries: `SERVER`, `PARENT`, `COLLECTOR`), or a line of
another server; the lines before it are skipped, and what they still say (the last line, the
timestamps) is handed to the reducer, which applies it. The words come from the registries: a
pattern declared there is found here with no change to this module.

The search is RE2's (google-re2): one DFA over all the words, whatever their number. Python's `re`
tries an alternation at every position, and a `bytes.find` a word costs a pass of the block each.
"""

from __future__ import annotations

import re
from typing import Callable, Iterator, Optional, Protocol

import re2

from .. import gymlines as gl
from ..tail import decode

_OPTIONS = re2.Options()
_OPTIONS.max_mem = 64 << 20     # room for the DFA: with less, RE2 falls back to a slower engine
# Blocks and patterns are bytes: each byte of a pattern is that byte (RE2 reads a pattern as UTF-8
# by default, where `\xc3` is the character U+00C3), so a server named outside ASCII is matched as
# the UTF-8 its prefix is written in.
_OPTIONS.encoding = re2.Options.Encoding.LATIN1
_UNANCHORED = getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)     # (see find)
_cache: dict[tuple, object] = {}

# A line that may start with a timestamp (after an optional `(server) ` prefix); core/stamps.py
# decides whether it does.
_STAMPED = re2.compile(rb"(?m)^(?:\([A-Za-z_][\w.\-/]*\) ?)?\[?(?:19|20|21)\d\d-", _OPTIONS)
_STAMPED_AT = re.compile(rb"(?:\([A-Za-z_][\w.\-/]*\) ?)?\[?(?:19|20|21)\d\d-")    # the same, at a line start
_STAMP_LOOKBACK = 64         # lines looked at back from a region's end for its last stamped line
# In Gym's captured output: a line starting with a timestamp, and a line not starting with `(`,
# after a line end (Python's `re`: its scan for a literal first character beats RE2 on these).
_STREAM_STAMPED_AT = re.compile(rb"\[?(?:19|20|21)\d\d-")
_STREAM_STAMPED_NEXT = re.compile(rb"\n(?=\[?(?:19|20|21)\d\d-)")
_UNPREFIXED_NEXT = re.compile(rb"\n(?=[^(])")
_LOOKBACK = 64               # lines looked at back from a span's end for its last line


# --- what the reducer offers the walk -------------------------------------------------------------
class ServerReader(Protocol):
    def owner(self, stem: str) -> str: ...
    def steady(self, stem: str) -> bool: ...
    def done(self, name: str, file: str) -> frozenset[str]: ...
    def quiet(self, name: str, file: str, then_own: bool, last: Callable[[], Optional[tuple[int, str]]]) -> None: ...
    def line(self, name: str, file: str, lineno: int, text: str) -> None: ...
    def stamp(self, text: str) -> None: ...


class StreamReader(Protocol):
    def steady(self, file: str, lineno: int) -> bool: ...
    def quiet_servers(self) -> frozenset[str]: ...
    def quiet(self, role: str, file: str, stamps: list[str], unprefixed: bool,
              last: Callable[[], Optional[tuple[int, str]]]) -> None: ...
    def line(self, role: str, file: str, lineno: int, text: str) -> None: ...


# --- a server's own log -----------------------------------------------------------------------------
def server_block(r: ServerReader, stem: str, file: str, first: int, block: bytes) -> None:
    """Lines `first`.. of `<logs>/<stem>.log` (whole lines, none holding a \\r), with the effect of
    `r.line()` on each: while the server is steady (`r.steady()`), the lines up to the next one
    that can change it go to `r.quiet()` at once. Of the timestamps, the block's first and last
    stamped lines count (a server writes its lines in time order), and those of the lines read
    one by one."""
    end = len(block)

    def next_hit(pos: int) -> int:
        name = r.owner(stem)
        return next_line(server_search(name, r.done(name, file)), block, pos, end)

    def skip(lo: int, hi: int, lineno: int) -> None:
        name = r.owner(stem)
        # The line at `hi` is the server's next last line, unless another server's prefix may
        # give it to that one (or there is none).
        own = hi < end and not _foreign(block, hi, name) and _has_text(block, hi)

        def last() -> Optional[tuple[int, str]]:
            at = _last_text_line(block, lo, hi)
            return None if at is None else (lineno + block.count(b"\n", lo, at), _line(block, at))
        r.quiet(name, file, own, last)

    walk(block, first, lambda lineno: r.steady(stem), next_hit, skip,
         lambda lineno, text: r.line(stem, file, lineno, text))
    for at in _stamped_lines(block, 0, end):
        if at is not None:
            r.stamp(gl.split_prefix(_line(block, at))[1])


def server_search(server: str, done: frozenset[str]):
    """The search for the next line that matters in `server`'s log while it is steady: a word of
    `gl.SERVER` (but its `once` entries in `done`), or a line starting with `(` but not with
    `(<server>)` (the line path may give such a line to another server). A line is read with its
    prefix, so a word the registry wants at a line's start is looked for anywhere in it."""
    key = ("server", gl.SERVER.version, server, done)
    pat = _cache.get(key)
    if pat is None:
        if len(_cache) > 256:
            _cache.clear()
        words, starts = gl.SERVER.keywords(done)
        alts = [re.escape(w.encode()) for w in words + starts]
        alts.append(b"(?m:^\\()" + not_starting_with([f"{server})".encode()]))
        pat = _cache[key] = alternatives(alts)
    return pat


# --- Gym's captured output ---------------------------------------------------------------------------
def stream_block(r: StreamReader, role: str, file: str, first: int, block: bytes) -> None:
    """Lines `first`.. of a captured stream (whole lines, none holding a \\r), with the effect of
    `r.line()` on each: while the line path is steady (`r.steady()`), the lines up to the next
    one the line path must read go to `r.quiet()` at once, with their timestamps, whether any is
    Gym's own (not a server's), and the last of those that holds text."""
    pattern = stream_search(r.quiet_servers())

    def skip(lo: int, hi: int, lineno: int) -> None:
        stamps = [_line(block, at) for at in _stream_stamped(block, lo, hi)]

        def last() -> Optional[tuple[int, str]]:
            at = _last_unprefixed_text(block, lo, hi)
            return None if at is None else (lineno + block.count(b"\n", lo, at), _line(block, at))
        r.quiet(role, file, stamps, next(_unprefixed(block, lo, hi), None) is not None, last)

    walk(block, first, lambda lineno: r.steady(file, lineno),
         lambda pos: next_line(pattern, block, pos, len(block)), skip,
         lambda lineno, text: r.line(role, file, lineno, text))


def stream_search(quiet_servers: frozenset[str]):
    """The search for the next line the line path must read: a line not starting with `(` that
    holds a word of `gl.PARENT` or `gl.COLLECTOR` (or starts with one of their starts), a line
    starting with `(` but not with a quiet server's prefix (servers known and read from their own
    logs: a merged stream's copy of their lines changes nothing), and a `(name) ` after a
    non-space (where a server's write may be glued on: gymlines.unglue)."""
    key = ("stream", gl.PARENT.version, gl.COLLECTOR.version, quiet_servers)
    pat = _cache.get(key)
    if pat is None:
        if len(_cache) > 256:
            _cache.clear()
        pw, ps = gl.PARENT.keywords()
        cw, cs = gl.COLLECTOR.keywords()
        words = tuple(dict.fromkeys(pw + cw))
        starts = tuple(dict.fromkeys(ps + cs))
        keyword = rb"(?m:^(?:[^(\n][^\n]*)?)(?:" + b"|".join(re.escape(w.encode()) for w in words) + b")"
        start = rb"(?m:^(?:" + b"|".join(re.escape(s.encode()) for s in starts) + b"))"
        # (a name `split_prefix` would not read from its prefix is no prefix: its lines are Gym's)
        names = [f"{n})".encode() for n in sorted(quiet_servers) if gl.split_prefix(f"({n}) ")[0] == n]
        other = rb"(?m:^\()" + (not_starting_with(names) if names else b"")
        glue = rb"\S\([^\n]*\) "
        pat = _cache[key] = alternatives([keyword, start, other, glue])
    return pat


# --- the walk -----------------------------------------------------------------------------------------
def walk(block: bytes, first: int, steady: Callable[[int], bool], next_hit: Callable[[int], int],
         skip: Callable[[int, int, int], None], one: Callable[[int, str], None]) -> None:
    """The whole lines of `block` (numbered from `first`): while `steady(lineno)`, those before
    `next_hit(pos)` (the next line that can change something: the start of a line, or the block's
    end) go to `skip(lo, hi, lineno)` at once; every other line to `one(lineno, text)`. A hit
    found is kept while it is ahead: a search made in another state only finds more lines."""
    pos, lineno, end = 0, first, len(block)
    hit = -1
    while pos < end:
        if steady(lineno):
            if hit < pos:
                hit = next_hit(pos)
            if hit > pos:
                skip(pos, hit, lineno)
                lineno += block.count(b"\n", pos, hit)
                pos = hit
                if pos >= end:
                    return
        nl = block.index(b"\n", pos)
        one(lineno, decode(block[pos:nl]))
        pos, lineno = nl + 1, lineno + 1


# --- the search ---------------------------------------------------------------------------------------
def literals(words: tuple[bytes, ...]):
    """One compiled search for any of `words` (RE2's DFA: one pass over a block, whatever their
    number)."""
    return alternatives([re.escape(w) for w in words])


def alternatives(patterns: list[bytes]):
    """One compiled search for any of the RE2 `patterns`."""
    return re2.compile(b"|".join(patterns), _OPTIONS)


def find(pat, block: bytes, pos: int, end: int) -> int:
    """Where the first match of the compiled `pat` in block[pos:end] starts; -1 if none. The
    wrapper's `search` makes a generator and a Match object a call: the compiled matcher the
    pinned google-re2 holds is asked directly when it is there (any other pattern: its `search`)."""
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
    return _line_start(block, found, pos) if found >= 0 else end


# --- what a skipped span still says ------------------------------------------------------------------
def _line(block: bytes, at: int) -> str:
    return decode(block[at:block.index(b"\n", at)])


def _line_start(block: bytes, pos: int, lo: int = 0) -> int:
    return block.rfind(b"\n", lo, pos) + 1 or lo


def _foreign(block: bytes, at: int, server: str) -> bool:
    """The line at `at` starts with `(` but not with `(<server>)`: it may be another server's."""
    return block.startswith(b"(", at) and not block.startswith(f"({server})".encode(), at)


def _has_text(block: bytes, at: int) -> bool:
    """The line at `at` holds more than whitespace after its `(server) ` prefix (as on_line sees it)."""
    return bool(gl.split_prefix(_line(block, at))[1].strip())


def _last_text_line(block: bytes, lo: int, hi: int) -> Optional[int]:
    """Where the last line of block[lo:hi] holding more than whitespace after its `(server) `
    prefix starts (None: none does). The lines there are whole, each ending with a newline."""
    end = hi
    while end > lo:
        start = _line_start(block, end - 1, lo)
        if _has_text(block, start):
            return start
        end = start
    return None


def _stamped_lines(block: bytes, lo: int, hi: int) -> tuple[Optional[int], Optional[int]]:
    """Starts of the first and the last lines of block[lo:hi] that may start with a timestamp:
    the first by one search, the last by looking at line starts back from the end."""
    first = find(_STAMPED, block, lo, hi)
    if first < 0:
        return None, None
    end = hi
    for _ in range(_STAMP_LOOKBACK):
        if end <= first:
            return first, first
        start = _line_start(block, end - 1, first)
        if _STAMPED_AT.match(block, start):
            return first, start
        end = start
    last = first           # a long unstamped end: the stamps before it, in one pass
    for m in _STAMPED.finditer(block, first, end):
        last = m.start()
    return first, last


def _stream_stamped(block: bytes, lo: int, hi: int) -> Iterator[int]:
    """Starts of the lines of block[lo:hi] that may start with a timestamp."""
    if _STREAM_STAMPED_AT.match(block, lo, hi):
        yield lo
    for m in _STREAM_STAMPED_NEXT.finditer(block, lo, hi):      # (hi: a lookahead never sees past it)
        yield m.end()


def _unprefixed(block: bytes, lo: int, hi: int) -> Iterator[int]:
    """Starts of the lines of block[lo:hi] (whole lines) not starting with `(`, blank ones too."""
    if lo < hi and block[lo] != 0x28:
        yield lo
    for m in _UNPREFIXED_NEXT.finditer(block, lo, hi):
        yield m.end()


def _last_unprefixed_text(block: bytes, lo: int, hi: int) -> Optional[int]:
    """Where the last line of block[lo:hi] that holds more than whitespace and does not start with
    `(` starts (None: none does): looked for back from the end, then in windows growing back."""
    end = hi
    for _ in range(_LOOKBACK):
        if end <= lo:
            return None
        start = _line_start(block, end - 1, lo)
        if block[start:start + 1] != b"(" and _has_text(block, start):
            return start
        end = start
    size = 1 << 16
    while end > lo:
        at = _line_start(block, end - size, lo) if end - size > lo else lo
        for start in reversed(list(_unprefixed(block, at, end))):
            if _has_text(block, start):
                return start
        end, size = at, size * 4
    return None

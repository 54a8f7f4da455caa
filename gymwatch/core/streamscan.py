"""Gym's captured output (`gym env start`'s and `gym eval run`'s streams) read in blocks.

Most of those lines change nothing but a stream's last line: Ray's start-up chatter, Gym's
banner frames, tracebacks' source lines, blank lines. Through every pattern of the reducer's
line path they cost 5-30 us each (a run's whole output is read when a summary needs it). Instead,
while no line-by-line state is open (a server banner's fields, the endpoint list under Gym's
give-up line, the line after `Examples left:`, the lines of a `gym` command's error), one RE2
search over the block finds the next line holding any keyword of a pattern the line path acts
on; the lines before it are skipped in C, keeping what they do to the model: the stream was seen,
its last line, and the timestamps they start with. The copies of a server's lines in `gym env
start`'s output (the bulk of a long run's) change nothing when the server is read from its own
log, whatever they hold: they are skipped too.

A keyword must be in every line a pattern of the line path can act on: tests/test_streamscan.py
generates matches of each pattern to check it, and that output read in blocks gives the same
model as read line by line.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from . import gymlines as gl
from . import logscan
from .markers import MARKER_KEYWORDS

# Literals of the patterns the line path acts on (core/reducer.py), by pattern.
HOT_KEYWORDS: dict[str, tuple[str, ...]] = {
    "PARENT_PATTERNS": gl.PARENT_KEYWORDS,            # gym env start's own lines
    "MARKERS": MARKER_KEYWORDS,                       # the parent's error line
    "BIND_ERROR_RE": ("error while attempting to bind on address",),
    "GLUE_STARTS": gl.GLUE_STARTS,                    # a line another write may be glued onto
    "COLLECT_START_RE": gl.COLLECT_START_RE.words,
    "REQUEST_RETRY_RE": (gl.REQUEST_RETRY,),
    "COLLECT_DONE_RE": ("Finished rollout collection!",),
    "PROGRESS_RE": ("Finished ",),
    "TQDM_RE": ("Collecting rollouts:",),
    "EXAMPLES_LEFT": ("Examples left:",),             # the line after it is read by itself
    "EXC_LINE_RE": ("Error:", "Exception:", "Interrupt:", "Exit:"),
    "INTERRUPT_RE": ("KeyboardInterrupt",),
    "CLI_ERROR_RE": ("Error: ",),
    "TRIAL_LINES": ("[rollout_",),                    # RUN_FAILED_RE, DROPPED_RE
    "COLLECTOR_SIGNS": ("Rollout health:", "rollouts for `", "route_failures_to_sidecar is on",
                        "Per-task latency over"),
    "NOT_LAST_LINES": ("Reading rows:",),             # a progress bar is never a collector's last line
}
_WORDS = tuple(dict.fromkeys(k for ks in HOT_KEYWORDS.values() for k in ks))
_KEYWORD_LINE = rb"(?m:^(?:[^(\n][^\n]*)?)(?:" + b"|".join(re.escape(w.encode()) for w in _WORDS) + b")"
# Besides a keyword in a line that is not a quiet server's: a line starting with `(` but not with a
# quiet server's prefix, Gym's banner line (`[1] name (type/path)`, its fields follow; any digits
# Python's `\d` takes), and a `(name) ` after a non-space (where a server's write may be glued on:
# gymlines.unglue).
_BANNER, _GLUE = rb"(?m:^\[[^\]\n]+\] )", rb"\S\([^\n]*\) "
_patterns: dict[frozenset[str], object] = {}
# A line starting with a timestamp `line_stamp` may read (a quiet line's only other effect), and a
# line not starting with `(`: after a line end, searched with Python's `re`, whose scan for a
# literal first character (~0.5 GB/s) beats RE2's DFA on patterns this short.
_STAMPED_AT = re.compile(rb"\[?(?:19|20|21)\d\d-")
_STAMPED_NEXT = re.compile(rb"\n(?=\[?(?:19|20|21)\d\d-)")
_UNPREFIXED_NEXT = re.compile(rb"\n(?=[^(])")
LOOKBACK = 64               # lines looked at back from a span's end for its last line


def hot_pattern(quiet_servers: frozenset[str]):
    """The search for the next line the line path must read. Lines of `quiet_servers` (servers known
    and read from their own logs: a merged stream's copy of their lines changes nothing) are not,
    whatever they hold, unless a write may be glued onto them."""
    pat = _patterns.get(quiet_servers)
    if pat is None:
        if len(_patterns) > 256:
            _patterns.clear()
        # (a name `split_prefix` would not read from its prefix is no prefix: its lines are Gym's)
        words = [f"{n})".encode() for n in sorted(quiet_servers) if gl.split_prefix(f"({n}) ")[0] == n]
        other = rb"(?m:^\()" + (logscan.not_starting_with(words) if words else b"")
        pat = _patterns[quiet_servers] = logscan.alternatives([_KEYWORD_LINE, other, _BANNER, _GLUE])
    return pat


def stamped_starts(block: bytes, lo: int, hi: int) -> Iterator[int]:
    """Starts of the lines of block[lo:hi] that may start with a timestamp."""
    if _STAMPED_AT.match(block, lo, hi):
        yield lo
    for m in _STAMPED_NEXT.finditer(block, lo, hi):      # (hi: a lookahead never sees past it)
        yield m.end()


def unprefixed_starts(block: bytes, lo: int, hi: int) -> Iterator[int]:
    """Starts of the lines of block[lo:hi] (whole lines) not starting with `(`, blank ones too."""
    if lo < hi and block[lo] != 0x28:
        yield lo
    for m in _UNPREFIXED_NEXT.finditer(block, lo, hi):
        yield m.end()


def any_unprefixed(block: bytes, lo: int, hi: int) -> bool:
    """Does block[lo:hi] hold a line not starting with `(` (blank or not)?"""
    return next(unprefixed_starts(block, lo, hi), None) is not None


def last_unprefixed_text(block: bytes, lo: int, hi: int) -> Optional[int]:
    """Where the last line of block[lo:hi] that holds more than whitespace and does not start with
    `(` starts (None: none does): looked for back from the end, then in windows growing back."""
    end = hi
    for _ in range(LOOKBACK):
        if end <= lo:
            return None
        start = logscan.line_start(block, end - 1, lo)
        if block[start:start + 1] != b"(" and logscan.has_text(block, start):
            return start
        end = start
    size = 1 << 16
    while end > lo:
        at = logscan.line_start(block, end - size, lo) if end - size > lo else lo
        for start in reversed(list(unprefixed_starts(block, at, end))):
            if logscan.has_text(block, start):
                return start
        end, size = at, size * 4
    return None

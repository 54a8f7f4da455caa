"""Several logs shown as one list of rows, for the merged view (headless: no Textual here)."""

from __future__ import annotations

import bisect
import os
from typing import Iterator, Optional

from .logindex import LogIndex, Refresh
from .matcher import Matcher

INTERLEAVE_MAX = 64 << 20     # bytes of logs (and of Gym's output) read to interleave them at open
MATCH_AHEAD = 16              # lines of Gym's output skipped looking for a log's next line
BY_GYM, BY_STAMPS = "Gym's output", "timestamps"


class LogSet:
    """One or more logs as one list of rows, each row a (source, line) pair.

    Order: lines appended after the logs were opened come in arrival order, as `tail -f a b`
    prints them. The lines already there are interleaved when something says in which order they
    were written (`arrival_order`): the servers' own lines as Gym's captured stdout has them (a
    server prints to it and to its log), else the timestamps lines start with; otherwise, and for
    logs too big to read whole at open, they come file by file. `order_basis` says which.
    """

    def __init__(self, sources: list[tuple[str, str]], background: bool = True, hints: tuple[str, ...] = ()):
        self.labels = [label for label, _ in sources]
        self.paths = [path for _, path in sources]
        self.hints = hints
        self.indexes = [LogIndex(path, background=background) for _, path in sources]
        self._reset()

    def _reset(self) -> None:
        self._segs: list[list[int]] = [[i, 0, 0] for i in range(len(self.indexes))]  # [src, a, b)
        self._loading = [True] * len(self.indexes)
        self._seen = [0] * len(self.indexes)
        self.appended = 0
        self._cum: list[int] = [0] * len(self._segs)
        self.order_basis = ""
        if len(self.indexes) > 1:
            order = arrival_order(list(zip(self.labels, self.paths, strict=True)), self.hints)
            if order is not None:
                self.order_basis, segs, counts = order
                self._segs = [list(seg) for seg in segs] or self._segs
                self._seen = counts
                self._loading = [False] * len(self.indexes)
                self._cum = list(_accumulate(self._segs))
        self.sync()

    @property
    def rows(self) -> int:
        return self._cum[-1] + self._seg_len(-1) if self._segs else 0

    def _seg_len(self, i: int) -> int:
        return self._segs[i][2] - self._segs[i][1]

    @property
    def done(self) -> bool:
        return all(ix.done for ix in self.indexes)

    def sync(self) -> int:
        """Take in lines indexed since the last call (background or refresh). Returns rows added;
        `appended` says how many of them were appended to a file after its first index (the
        rest were there all along: a big file's first index takes a while)."""
        before = self.rows if self._cum else 0
        self.appended = 0
        for src, ix in enumerate(self.indexes):
            n = ix.line_count
            if n <= self._seen[src]:
                continue
            if not self._loading[src]:
                self.appended += n - self._seen[src]
            if self._loading[src]:
                self._segs[src][2] = n
            elif self._segs[-1][0] == src and self._segs[-1][2] == self._seen[src]:
                self._segs[-1][2] = n
            else:
                self._segs.append([src, self._seen[src], n])
            self._seen[src] = n
        for src, ix in enumerate(self.indexes):
            self._loading[src] = self._loading[src] and not ix.done
        self._cum = list(_accumulate(self._segs))
        return self.rows - before

    def refresh(self) -> Refresh:
        out = Refresh()
        for ix in self.indexes:
            r = ix.refresh()
            out.reset |= r.reset
        if out.reset:
            self._reset()
            out.added = self.rows
        else:
            out.added = self.sync()
        return out

    def locate(self, row: int) -> tuple[int, int]:
        """(source, line) of a row."""
        i = bisect.bisect_right(self._cum, row) - 1
        while i > 0 and self._seg_len(i) == 0 and self._cum[i] == row:
            i -= 1
        src, a, _ = self._segs[i]
        return src, a + row - self._cum[i]

    def row_of(self, src: int, line: int) -> Optional[int]:
        for i, (s, a, b) in enumerate(self._segs):
            if s == src and a <= line < b:
                return self._cum[i] + line - a
        return None

    def text(self, row: int) -> tuple[int, int, str]:
        src, line = self.locate(row)
        return src, line, self.indexes[src].line(line)

    def iter_filter(self, matcher: Matcher, start: int = 0) -> Iterator[int]:
        """Rows from `start` on whose line matches, ascending (safe from a worker thread:
        it walks a snapshot of the segments)."""
        segs, cum = [list(x) for x in self._segs], list(self._cum)
        # a sync on the screen's thread between the two copies may leave segs the longer: their rows
        # came after the filter began, and the caller reads those again when it ends
        for (src, a, b), c in zip(segs, cum, strict=False):
            if c + (b - a) <= start or a == b:
                continue
            for n in self.indexes[src].scan(matcher, max(a, a + start - c)):
                if n >= b:
                    break
                yield c + n - a

    def filter(self, matcher: Matcher, start: int = 0) -> list[int]:
        return list(self.iter_filter(matcher, start))

    def find(self, matcher: Matcher, row: int, forward: bool = True) -> Optional[int]:
        """The next (previous) matching row after (before) `row`, wrapping around."""
        if len(self.indexes) == 1:
            return self.indexes[0].find(matcher, row, forward)
        hits = self.filter(matcher)
        if not hits:
            return None
        i = bisect.bisect_right(hits, row) if forward else bisect.bisect_left(hits, row) - 1
        return hits[i % len(hits)]

    def close(self) -> None:
        for ix in self.indexes:
            ix.close()


def _accumulate(segs: list[list[int]]) -> Iterator[int]:
    total = 0
    for _, a, b in segs:
        yield total
        total += b - a


# --- the order lines already there were written in ---------------------------------------------
def arrival_order(sources: list[tuple[str, str]], hints: tuple[str, ...] = ()
                  ) -> Optional[tuple[str, list[tuple[int, int, int]], list[int]]]:
    """Segments (source, first line, end) putting the logs' current lines in the order they were
    written, with what that order comes from and each log's line count; None when nothing says
    (or the logs are too big to read whole now).

    - Gym's output (`hints`: its captured stdout): every server also prints there, as
      `(<server>) <line>`, in the order Gym received the lines. Each log's lines are matched in
      order to its server's lines there; a line with no match (stderr, unprefixed Ray lines) goes
      right after the log's previous line.
    - Else the timestamps lines start with (Ray's, Python logging's); a line without one goes
      right after the line before it.
    """
    from .stamps import line_stamp
    from .tail import Tailer, decode

    paths = [p for _, p in sources] + list(hints)
    try:
        if sum(os.path.getsize(p) for p in paths if os.path.exists(p)) > INTERLEAVE_MAX:
            return None
    except OSError:
        return None
    texts = [[decode(raw) for _, raw in Tailer(p).read(final=True).lines] for _, p in sources]
    counts = [len(t) for t in texts]
    keys = _by_gym_output(sources, texts, hints)
    basis = BY_GYM
    if keys is None:
        keys, basis = _by_stamps(texts, line_stamp), BY_STAMPS
    if keys is None:
        return None
    rows = sorted((k, src, n) for src, ks in enumerate(keys) for n, k in enumerate(ks))
    segs: list[list[int]] = []
    for _, src, n in rows:
        if segs and segs[-1][0] == src and segs[-1][2] == n:
            segs[-1][2] = n + 1
        else:
            segs.append([src, n, n + 1])
    return basis, [tuple(seg) for seg in segs], counts     # type: ignore[misc]


def _by_gym_output(sources: list[tuple[str, str]], texts: list[list[str]], hints: tuple[str, ...]
                   ) -> Optional[list[list[tuple]]]:
    from .gymlines import split_prefix
    from .tail import Tailer, decode

    if not hints:
        return None
    said: dict[str, list[tuple[int, str]]] = {}          # server -> (line in Gym's output, its text)
    for raw_line in Tailer(hints[0]).read(final=True).lines:
        n, raw = raw_line
        pref, body = split_prefix(decode(raw))
        if pref is not None:
            said.setdefault(pref, []).append((n, body))
    keys: list[list[tuple]] = []
    matched = total = 0
    for (label, _), lines in zip(sources, texts, strict=True):
        queue, at, last = said.get(label, []), 0, -1
        ks = []
        for line in lines:
            total += 1
            pref, body = split_prefix(line)
            body = body if pref is not None else line
            hit = next((i for i in range(at, min(at + MATCH_AHEAD, len(queue))) if queue[i][1] == body), None)
            if hit is not None:
                last, at = queue[hit][0], hit + 1
                matched += 1
            ks.append((last,))
        keys.append(ks)
    return keys if total and matched * 2 >= total else None


def _by_stamps(texts: list[list[str]], line_stamp) -> Optional[list[list[tuple]]]:
    from .gymlines import split_prefix

    keys: list[list[tuple]] = []
    stamped = 0
    for lines in texts:
        last = float("-inf")
        ks = []
        for line in lines:
            body = split_prefix(line)[1]
            ts = line_stamp(body) if body[:1] in "[12" else None
            if ts is not None:
                last = max(last, ts)
                stamped += 1
            ks.append((last,))
        keys.append(ks)
    return keys if stamped and sum(1 for ks in keys if ks and ks[-1][0] != float("-inf")) > 1 else None

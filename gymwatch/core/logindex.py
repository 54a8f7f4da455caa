"""The line index of one log file of any size, for the viewer (headless: no Textual here).

The index is sparse: a list of *blocks* (~256 KiB, each starting at a line start) with the
number of the first line in each. Building it only counts line ends per chunk (`eolcount`:
memchr speed); a block is split into lines only when one of its lines is read, and the split
is kept in an LRU cache. The first chunks are indexed synchronously so the first screen is
there at once; a daemon thread indexes the rest, or for a big file has two child processes
count its halves (off this process's GIL, on two cores).

Line ends are universal newlines (`\\n`, `\\r\\n`, lone `\\r`) like the core's Tailer, so
line N here (0-based N-1) is line N in evidence. A trailing `\\r` at EOF stays undecided
(it may be half of `\\r\\n`) until more bytes come. Bytes after the last line end are the
*partial* last line: shown, counted, and re-read when it grows.

Bytes are read with `os.pread`, not mmap: a log truncated under an mmap (copytruncate
rotation) kills the process with SIGBUS; a short pread is harmless.

What find and filter look for is a `matcher.Matcher`; several logs merged into one view are a
`logset.LogSet`.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
import sys
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from . import eolcount, fast
from .eolcount import CHUNK, EolScan
from .matcher import Matcher
from .procs import usable_cpus

SPLIT_MIN = 64 << 20       # with more than this left to count, a child process counts half
SYNC_LINES = 2000          # lines indexed before the constructor returns
SYNC_BYTES = 4 << 20       # appends smaller than this are indexed at once, bigger in a thread
CAP = 4096                 # bytes of a line read for display; `full_line` reads it all
_EOL = re.compile(rb"\r\n|\r|\n")
_BLOCK_CACHE = 64


def _text(raw: bytes) -> str:
    """A line's bytes as text (invalid UTF-8 replaced; its line end is already gone)."""
    return raw.decode("utf-8", "replace")


@dataclass(slots=True)
class Refresh:
    added: int = 0         # lines added (a grown partial line counts 0)
    reset: bool = False    # truncated or replaced: everything was re-indexed


class LogIndex:
    """Line index of one file. Line numbers in this API are 0-based."""

    def __init__(self, path: str, sync_lines: int = SYNC_LINES, background: bool = True,
                 split: bool = True):
        self.path = str(path)
        self.generation = 0          # bumped on every reindex
        self._lock = threading.Lock()     # guards the block lists
        self._state = threading.Lock()    # guards `_running`
        self._cache_lock = threading.Lock()
        self._running = False
        self._fd: Optional[int] = None
        self._thread: Optional[threading.Thread] = None
        self._background = background
        self._split_ok = split
        self._children: dict[int, subprocess.Popen] = {}   # start offset -> the child counting from it
        # A child is started, or the children are stopped, never both at once: a child started
        # just after close() stopped the others would count its half to the end, close() waiting
        # for it, on the screen's thread.
        self._spawning = threading.Lock()
        self.error = ""
        self._open(sync_lines)

    # --- indexing -------------------------------------------------------------------
    def _open(self, sync_lines: int) -> None:
        self._close_fd()
        self._starts: list[int] = []     # byte offset of each block (a line start)
        self._first: list[int] = []      # line number of each block's first line
        self._lines = 0                  # complete lines indexed
        self._scan = EolScan()           # the indexer's own state (only the indexer moves it)
        self._end = 0                    # `_scan.end` as committed with the blocks (under _lock)
        self._size = 0
        self._ident: Optional[tuple[int, int]] = None
        self._blocks: OrderedDict[int, list[int]] = OrderedDict()
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
            st = os.fstat(self._fd)
            self._ident, self._size = (st.st_dev, st.st_ino), st.st_size
            self.error = ""
        except OSError as exc:
            self.error = exc.strerror or str(exc)
            return
        self._index(lambda: self._lines >= sync_lines)
        self._kick()

    def _kick(self) -> None:
        """Make sure someone indexes up to `_size`: small work here, big work in a thread."""
        with self._state:
            if self._running or self.done:
                return
            self._running = True
        gen = self.generation
        stop = lambda: gen != self.generation  # noqa: E731
        if not self._background or self._size - self._scan.probe < SYNC_BYTES:
            self._run(stop)
            return
        self._thread = threading.Thread(target=self._run, args=(stop,), daemon=True,
                                        name=f"logindex:{os.path.basename(self.path)}")
        self._thread.start()

    def _run(self, stop: Callable[[], bool]) -> None:
        self._split(stop)
        while True:
            size = self._size
            stuck = self._index(stop)
            with self._state:          # `refresh` may have raised `_size` meanwhile: look again
                if self.done or stop() or (stuck and size == self._size):
                    self._running = False
                    return

    def _index(self, stop: Callable[[], bool], limit: Optional[int] = None) -> bool:
        """Index chunks until done (or at `limit`, a line start) or `stop()`.
        True: could not go on (an error, no progress)."""
        scan = self._scan
        while not self.done and not stop():
            bound = self._size if limit is None else limit
            if scan.probe >= bound:
                return False
            begin = scan.end
            n = scan.step(self._fd, bound)  # type: ignore[arg-type]
            if n < 0:
                return True
            with self._lock:
                if n:
                    self._starts.append(begin)
                    self._first.append(self._lines)
                    self._lines += n
                self._end = scan.end
        return False

    # --- counting the back half in a child process ------------------------------------------
    def _split(self, stop: Callable[[], bool]) -> None:
        """For a big file, count its front and back halves in two child processes (counting
        holds the GIL: in this process it would slow the screen, which may be parsing the same
        log), then take their blocks in order. Whatever a child fails to do, this thread does."""
        size, begin = self._size, self._scan.end
        if not (self._split_ok and sys.executable and _cores() > 1 and fast.enabled("fork:index")) or size - begin < SPLIT_MIN \
                or self._fd is None:
            return
        mid = eolcount.line_start_after(self._fd, begin + (size - begin) // 2, 1 << 20)
        if mid < 0 or mid >= size:
            return
        try:
            for a, b in ((begin, mid), (mid, size)):
                if not self._spawn(a, b, stop):        # listed at once: close() kills it
                    return
            front, back = (self._collect(a) for a in (begin, mid))
            if stop():
                return
            if front is None or not self._adopt(front, begin):
                self._scan = EolScan(begin)            # the front child failed: count it here
                if self._index(stop, limit=mid):
                    return
            if self._scan.end == mid and back is not None and not stop():
                self._adopt(back, mid)
        finally:
            for child in self._children.values():
                if child.poll() is None:
                    child.kill()
                child.wait()
            self._children = {}

    def _spawn(self, start: int, size: int, stop: Callable[[], bool]) -> bool:
        """Start the child counting from `start`; False: stopped (closed or re-indexed) first."""
        with self._spawning:
            if stop():
                return False
            try:
                child = subprocess.Popen(
                    [sys.executable, "-I", "-S", eolcount.__file__, str(self._fd), str(start), str(size),
                     str(eolcount.CHUNK)], pass_fds=(self._fd,),   # type: ignore[arg-type]
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            except (OSError, ValueError):
                return True                           # that half is counted here instead
            self._children[start] = child
            return True

    def _collect(self, start: int) -> Optional[bytes]:
        """What the child that counted from `start` wrote, if it ran to its end."""
        child = self._children.get(start)
        if child is None:
            return None
        out, _ = child.communicate()
        return out if child.returncode == 0 else None

    def _adopt(self, out: bytes, start: int) -> bool:
        """Take the blocks a child counted from `start` (the line start this index ends at)."""
        vals = array("q")
        vals.frombytes(out[:len(out) - len(out) % 8])
        if len(vals) < 3 or len(vals) % 2 == 0 or (len(vals) > 3 and vals[0] != start) \
                or self._scan.end != start:
            return False                         # not what the child writes, or not where we are
        end, probe, pending = vals[-3], vals[-2], vals[-1]
        with self._lock:
            for i in range(0, len(vals) - 3, 2):
                self._starts.append(vals[i])
                self._first.append(self._lines)
                self._lines += vals[i + 1]
            self._scan.end, self._scan.probe, self._scan.pending_cr = end, probe, bool(pending)
            self._end = end
        return True

    @property
    def done(self) -> bool:
        return self._fd is None or self._scan.done(self._size)

    @property
    def progress(self) -> float:
        return 1.0 if self.done or not self._size else self._scan.probe / self._size

    def wait(self, timeout: Optional[float] = None) -> bool:
        t = self._thread
        if t is not None:
            t.join(timeout)
        return self.done

    def refresh(self) -> Refresh:
        """Index what was appended; reindex from scratch if the file was truncated or replaced."""
        before = self.line_count
        if self._fd is None:
            self._open(SYNC_LINES)
            return Refresh(self.line_count, False)
        try:
            st = os.stat(self.path)
        except OSError as exc:
            self.error = exc.strerror or str(exc)
            return Refresh()
        if (st.st_dev, st.st_ino) != self._ident or st.st_size < self._size:
            self.generation += 1
            self._stop_child()
            self.wait()
            self._open(SYNC_LINES)
            return Refresh(self.line_count, True)
        if st.st_size > self._size:
            self._size = st.st_size
            self._kick()
        return Refresh(max(0, self.line_count - before), False)

    def close(self) -> None:
        self.generation += 1
        self._stop_child()
        self.wait()
        self._close_fd()

    def _stop_child(self) -> None:
        with self._spawning:
            children = list(self._children.values())
        for child in children:
            if child.poll() is None:
                try:
                    child.kill()
                except OSError:
                    pass

    def _close_fd(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    # --- reading --------------------------------------------------------------------
    @property
    def line_count(self) -> int:
        """Complete lines indexed so far, plus the partial last line if there is one."""
        with self._lock:
            return self._lines + (1 if self.done and self._size > self._end else 0)

    @property
    def size(self) -> int:
        return self._size

    def span(self, n: int) -> tuple[int, int]:
        """Byte range of line `n`'s text (end of line excluded)."""
        with self._lock:
            lines, end = self._lines, self._end
            if n >= lines:
                if n == lines and self.done and self._size > end:
                    return end, self._size
                raise IndexError(n)
            b = bisect.bisect_right(self._first, n) - 1
            b_end = self._starts[b + 1] if b + 1 < len(self._starts) else end
        starts = self._block_starts(b, b_end)
        i = n - self._first[b]
        return starts[i], starts[i + 1] if i + 1 < len(starts) else b_end

    def _block_starts(self, b: int, b_end: int) -> list[int]:
        """Line starts in block `b` (LRU-cached)."""
        with self._cache_lock:
            cached = self._blocks.get(b)
            if cached is not None:
                self._blocks.move_to_end(b)
                return cached
        starts = _line_starts(self, self._starts[b], b_end)
        with self._cache_lock:
            self._blocks[b] = starts
            if len(self._blocks) > _BLOCK_CACHE:
                self._blocks.popitem(last=False)
        return starts

    def _pread(self, pos: int, n: int) -> bytes:
        if self._fd is None:
            return b""
        try:
            return os.pread(self._fd, n, pos)
        except OSError:
            return b""

    def raw(self, n: int, cap: Optional[int] = CAP) -> bytes:
        a, b = self.span(n)
        data = self._pread(a, (b - a) if cap is None else min(b - a, cap))
        return _strip_eol(data)

    def line(self, n: int) -> str:
        """Line `n` as text, capped at CAP bytes (see `is_capped`, `full_line`)."""
        return _text(self.raw(n))

    def full_line(self, n: int) -> str:
        return _text(self.raw(n, None))

    def is_capped(self, n: int) -> bool:
        a, b = self.span(n)
        return b - a > CAP + 2

    def lines(self, start: int, stop: int) -> Iterator[tuple[int, str]]:
        for n in range(max(0, start), min(stop, self.line_count)):
            yield n, self.line(n)

    # --- find / filter --------------------------------------------------------------
    def block_count(self) -> int:
        return len(self._starts) + (1 if self.done and self._size > self._end else 0)

    def block_raw(self, b: int) -> tuple[int, bytes, Callable[[], list[int]]]:
        """Block `b`: its first line number, its bytes, and a function giving its line starts
        (relative to those bytes; computed only if needed). A block holding a giant line
        is given as the capped heads of its lines."""
        with self._lock:
            if b >= len(self._starts):     # the partial last line
                first, data = self._lines, self._pread(self._end, min(self._size - self._end, CAP))
                return first, data, lambda: [0] if data else []
            start, first = self._starts[b], self._first[b]
            b_end = self._starts[b + 1] if b + 1 < len(self._starts) else self._end
        if b_end - start <= 4 * CHUNK:
            return first, self._pread(start, b_end - start), \
                lambda: [x - start for x in self._block_starts(b, b_end)]
        heads = [self.raw(first + i) + b"\n" for i in range(len(self._block_starts(b, b_end)))]
        rel = [0]
        for h in heads[:-1]:
            rel.append(rel[-1] + len(h))
        return first, b"".join(heads), lambda: rel

    def block_of(self, n: int) -> int:
        with self._lock:
            if n >= self._lines:
                return len(self._starts)
            return bisect.bisect_right(self._first, n) - 1

    def scan(self, matcher: Matcher, start: int = 0, reverse: bool = False) -> Iterator[int]:
        """Matching line numbers from line `start` (inclusive) forwards, or backwards.
        Blocks are searched as bytes first; only lines near a possible hit are decoded."""
        b0 = self.block_of(start)
        order = range(b0, -1, -1) if reverse else range(b0, self.block_count())
        for b in order:
            first, data, line_starts = self.block_raw(b)
            hits = matcher.candidates(data)
            if hits is not None and not hits:
                continue
            if hits is None:
                starts = line_starts()
                lines: Iterator[tuple[int, bytes]] = ((i, _raw(data, starts, i)) for i in range(len(starts)))
            else:
                lines = _hit_lines(data, sorted(hits))
            found = [first + i for i, raw in lines if (first + i <= start if reverse else first + i >= start)
                     and matcher.line(_text(raw))]
            yield from (reversed(found) if reverse else found)

    def find(self, matcher: Matcher, frm: int, forward: bool = True, wrap: bool = True) -> Optional[int]:
        """The next (or previous) matching line after (before) `frm`, wrapping around."""
        first = next(self.scan(matcher, frm + 1 if forward else frm - 1, not forward), None) \
            if (frm + 1 < self.line_count if forward else frm > 0) else None
        if first is None and wrap:
            first = next(self.scan(matcher, 0 if forward else self.line_count - 1, not forward), None)
        return first

    def filter(self, matcher: Matcher, start: int = 0) -> list[int]:
        return list(self.scan(matcher, start))


def _raw(data: bytes, starts: list[int], i: int) -> bytes:
    """Line i of a block (capped at CAP bytes, no line end)."""
    end = starts[i + 1] if i + 1 < len(starts) else len(data)
    return _strip_eol(data[starts[i]:min(end, starts[i] + CAP)])


def _hit_lines(data: bytes, hits: list[int]) -> Iterator[tuple[int, bytes]]:
    """(index in the block, capped text) of each line holding one of `hits` (ascending byte
    offsets). Line ends are counted only up to each hit: splitting every line of a block
    cost more than the search itself when hits are sparse."""
    n, pos = 0, 0            # pos: a line start, and n the index of the line starting there
    for h in hits:
        if h < pos:
            continue                              # another hit in the line just given
        start = max(data.rfind(b"\n", pos, h), data.rfind(b"\r", pos, h)) + 1 or pos
        n += eolcount.count_eols(data, pos, start)
        end = eolcount.line_end(data, h)
        yield n, data[start:min(end, start + CAP)]
        n += 1
        pos = end + (2 if data[end:end + 2] == b"\r\n" else 1)


def _cores() -> int:
    """A second process only pays with a second core."""
    return usable_cpus()


def _strip_eol(data: bytes) -> bytes:
    if data.endswith(b"\n"):
        data = data[:-1]
    if data.endswith(b"\r"):
        data = data[:-1]
    return data


def _line_starts(ix: LogIndex, start: int, b_end: int) -> list[int]:
    """Starts of the lines in [start, b_end) (a region that ends just after a line end)."""
    starts = [start]
    pos = start
    carry_cr = False
    while pos < b_end:
        data = ix._pread(pos, min(CHUNK, b_end - pos))
        if not data:
            break
        off = 0
        if carry_cr and data[:1] == b"\n":
            starts[-1] += 1          # the \n of a \r\n split across reads
            off = 1
        for m in _EOL.finditer(data, off):
            starts.append(pos + m.end())
        carry_cr = data.endswith(b"\r")
        pos += len(data)
    if starts and starts[-1] >= b_end:
        starts.pop()
    return starts

"""Counting universal line ends (\\n, \\r\\n, lone \\r) in a file, chunk by chunk, fast.

`LogIndex` counts with `EolScan`. For a big file it also runs this module as a script, in a
child process, over the back half of the file, so the two halves are counted on two cores
(counting holds the GIL, so a thread would not help). The script imports only the stdlib and
starts at once with `python -I -S`. It writes native int64s to stdout: a `(start, lines)` pair for
every block it found, then `(end, probe, pending_cr)`, the scan's final state.
"""

from __future__ import annotations

import os
import sys
from array import array

CHUNK = 256 << 10          # bytes counted per step; also the target block size
# Below this many bytes a line, `count` is the faster way to count \n (see count_lf).
_DELETE_MIN_LINE = 40
# `replace` copies; copies this small reuse freed heap, where 256 KiB ones grew and trimmed
# it (brk) every chunk, which cost more than the counting itself in a fresh process.
_PIECE = 64 << 10


def count_lf(data: bytes | bytearray, cut: int) -> int:
    """\n in data[:cut]. `count` of one byte is a scalar loop, while deleting one byte
    (`replace(b"\n", b"")`) finds each with memchr: quicker on log-like lines, slower on very
    short ones (_DELETE_MIN_LINE). A sample of the chunk picks the way."""
    if data.count(b"\n", 0, 4096) * _DELETE_MIN_LINE > min(cut, 4096):
        return data.count(b"\n", 0, cut)
    n = 0
    for i in range(0, cut, _PIECE):
        piece = data[i:min(i + _PIECE, cut)]
        n += len(piece) - len(piece.replace(b"\n", b""))
    return n


def lone_crs(body: bytes | bytearray, a: int, b: int) -> int:
    """Lone \r in body[a:b]: a memchr walk, fast when \r is rare (counting \r\n is not).
    The range must not split a \r\n."""
    n, i = 0, body.find(b"\r", a, b)
    while i >= 0:
        if i + 1 >= b or body[i + 1] != 0x0A:
            n += 1
        i = body.find(b"\r", i + 1, b)
    return n


def count_eols(data: bytes | bytearray, a: int, b: int) -> int:
    """Line ends in data[a:b] (which must not split a \r\n)."""
    return data.count(b"\n", a, b) + lone_crs(data, a, b)


def line_end(data: bytes | bytearray, at: int) -> int:
    """Where the line holding data[at] ends: at its \\r (of a \\r\\n, or a lone one) or its \\n,
    else at the end of data. (The \\r is looked for only up to the \\n: a free search would run far.)"""
    end = data.find(b"\n", at)
    end = len(data) if end < 0 else end
    cr = data.find(b"\r", at, end)
    return cr if cr >= 0 else end


class EolScan:
    """Where a scan of a file stands. `end`: just past the last line end counted; `probe`:
    scanned up to here (beyond `end` while a long line has no end yet); `pending_cr`: stopped
    before a \\r at the scan's end of file, which may be half of a \\r\\n still to be written."""

    __slots__ = ("end", "probe", "pending_cr", "_buf", "_view")

    def __init__(self, pos: int = 0):
        self.end = self.probe = pos
        self.pending_cr = False
        self._buf = bytearray(CHUNK + 1)     # read into, reused: no big allocation per chunk
        self._view = memoryview(self._buf)

    def done(self, size: int) -> bool:
        return self.probe + self.pending_cr >= size

    def step(self, fd: int, size: int) -> int:
        """Count the next chunk below `size`. Returns the lines in a new block that starts at
        the old `end` and ends at the new one; 0 if there is no block (a long line); -1 if
        nothing could be read (an error, or the file shrank)."""
        want = min(CHUNK, size - self.probe)
        try:                                         # +1: look ahead for \r\n
            got = os.preadv(fd, [self._view[:want + 1]], self.probe)
        except (OSError, TypeError, ValueError):
            return -1
        if got <= 0:
            return -1
        return self._take(self._buf, got, min(want, got))

    def _take(self, data: bytearray, got: int, end: int) -> int:
        """Count data[:end]; data[end:got] is the lookahead byte, if any."""
        probe = self.probe
        self.pending_cr = False
        if end and data[end - 1] == 0x0D:
            if got > end and data[end] == 0x0A:
                end += 1                            # \r\n across the chunk edge
            elif got == end:
                end -= 1                            # \r at EOF: maybe half of \r\n, wait
                self.pending_cr = True
        nl = data.rfind(b"\n", 0, end)
        cut = max(nl, data.rfind(b"\r", nl + 1, end)) + 1
        if cut == 0:
            self.probe = probe + end                # a long line: no end yet
            return 0 if end > 0 else -1
        self.end = self.probe = probe + cut
        return count_lf(data, cut) + lone_crs(data, 0, cut)


def line_start_after(fd: int, pos: int, limit: int) -> int:
    """The first line start at or after `pos` (pos > 0), if one is within `limit` bytes;
    else -1. A \\r\\n is one line end: a start is never between its two bytes."""
    try:
        data = os.pread(fd, limit + 2, pos - 1)
    except OSError:
        return -1
    nl, cr = data.find(b"\n"), data.find(b"\r")
    hits = [i for i in (nl, cr) if i >= 0]
    if not hits:
        return -1
    i = min(hits)
    if data[i] == 0x0D:
        if i + 1 >= len(data):
            return -1                               # \r at the end of what we read: unsure
        if data[i + 1] == 0x0A:
            i += 1
    return pos + i if i < len(data) - 1 else -1     # pos - 1 + i + 1; must leave data after it


def scan_range(fd: int, start: int, size: int) -> array:
    """Blocks from `start` (a line start) to `size`, and the final state, as `main` writes them."""
    scan, out = EolScan(start), array("q")
    while not scan.done(size):
        begin = scan.end
        n = scan.step(fd, size)
        if n < 0:
            break
        if n:
            out.extend((begin, n))
    out.extend((scan.end, scan.probe, int(scan.pending_cr)))
    return out


def main(argv: list[str]) -> int:
    """eolcount.py FD START SIZE [CHUNK]. FD: the parent's open file, passed down, so this
    counts the very file the parent indexes even if its path was renamed or replaced since.
    CHUNK keeps the blocks the size the parent's are."""
    global CHUNK
    fd, start, size = int(argv[1]), int(argv[2]), int(argv[3])
    CHUNK = int(argv[4]) if len(argv) > 4 else CHUNK
    sys.stdout.buffer.write(scan_range(fd, start, size).tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

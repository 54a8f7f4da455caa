"""Byte-offset tailing: read only what is new, hold back a partial last line, notice truncation.

A tailer never reads a file from the start twice unless the file was truncated or
replaced (new inode, or smaller than what was already read); then it says so with
`reset=True` so the reducer can drop what that file contributed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field

from .eolcount import count_lf

CHUNK = 1 << 20
_EOL = re.compile(rb"\r\n|\r|\n")
# A single line longer than this is cut: the rest is skipped, the line still counts once.
MAX_LINE = 16 << 20


@dataclass(slots=True)
class Batch:
    lines: list[tuple[int, bytes]] = field(default_factory=list)  # (1-based line number, raw bytes)
    reset: bool = False          # file truncated or replaced: earlier lines no longer hold
    error: str = ""              # unreadable: permission, not a file, ...
    more: bool = False           # `max_bytes` stopped the read: call `read()` again for the rest
    # read(blocks=True): the new lines as blocks instead, in order: (number of the first line, its
    # lines, each ending with b"\n"). Line ends are the same as `lines`' (a block holds no \r).
    blocks: list[tuple[int, bytes]] = field(default_factory=list)


def as_asked(batch: Batch, blocks: bool = False) -> Batch:
    """A batch of `lines` in the form `Tailer.read(blocks=...)` gives, for readers that make
    lines some other way (numbered consecutively, none holding a \r)."""
    if blocks and batch.lines:
        first = batch.lines[0][0]
        batch.blocks = [(first, b"".join(raw + b"\n" for _, raw in batch.lines))]
        batch.lines = []
    return batch


class Tailer:
    """Tails one file by byte offset. `read()` returns complete lines added since last call."""

    __slots__ = ("path", "offset", "lineno", "_partial", "_ident", "_skipping", "exists", "mtime", "_blocks")

    def __init__(self, path: str, start_offset: int = 0, start_lineno: int = 0):
        self.path = path
        self.offset = start_offset
        self.lineno = start_lineno
        self._partial = b""
        self._ident: tuple[int, int] | None = None
        self._skipping = False
        self.exists = False
        self.mtime: float | None = None    # the file's last write, as of the last read
        self._blocks = False

    @property
    def held(self) -> bool:
        """A partial last line is held back (no line end after it yet)."""
        return bool(self._partial) or self._skipping

    def adopt(self, offset: int, lineno: int) -> None:
        """Another reader read the file up to `offset` (`lineno` whole lines): go on from there."""
        try:
            st = os.stat(self.path)
        except OSError:
            return
        self._ident, self.exists, self.mtime = (st.st_dev, st.st_ino), True, st.st_mtime
        self.offset, self.lineno, self._partial, self._skipping = offset, lineno, b"", False

    def _restart(self) -> None:
        self.offset = 0
        self.lineno = 0
        self._partial = b""
        self._skipping = False

    def read(self, final: bool = False, max_bytes: int | None = None, blocks: bool = False,
             stop: int | None = None) -> Batch:
        """New complete lines. With `final`, a trailing partial line is returned too.

        `max_bytes` bounds how much is read in this call (at least one chunk), so a caller that
        loops while `batch.more` holds only that much of a big file at a time. `blocks`: the lines
        come in `batch.blocks`, a few big byte strings instead of one object a line (the same
        lines, numbered the same), for a reader that searches whole blocks (core/fast/scan.py).
        `stop`: read no further than this offset (a line start: another reader has the rest).
        """
        batch = Batch()
        self._blocks = blocks
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            if self.exists:
                self.exists = False
            return batch
        except OSError as exc:
            batch.error = exc.strerror or str(exc)
            return batch
        try:
            st = os.fstat(fd)
            if not _is_regular(st.st_mode):
                batch.error = os.strerror(errno.EISDIR) if stat.S_ISDIR(st.st_mode) else "not a regular file"
                return batch
            ident = (st.st_dev, st.st_ino)
            if self._ident is not None and (ident != self._ident or st.st_size < self.offset):
                batch.reset = True
                self._restart()
            self._ident = ident
            self.exists = True
            self.mtime = st.st_mtime
            self._read_into(fd, st.st_size if stop is None else min(stop, st.st_size), batch, max_bytes)
        except OSError as exc:
            batch.error = exc.strerror or str(exc)
        finally:
            os.close(fd)
        if final and self._partial and not batch.more:
            if self._partial.endswith(b"\r"):
                self._partial = self._partial[:-1]
            if blocks:
                self._as_block(lambda b: self._emit(b"", b), batch)
            else:
                self._emit(b"", batch)
        return batch

    def _read_into(self, fd: int, size: int, batch: Batch, max_bytes: int | None = None) -> None:
        budget = size if max_bytes is None else max_bytes
        while self.offset < size:
            if budget <= 0:
                batch.more = True
                break
            data = os.pread(fd, min(CHUNK, size - self.offset), self.offset)
            if not data:
                break
            self.offset += len(data)
            budget -= len(data)
            self._split(data, batch)

    def _split(self, data: bytes, batch: Batch) -> None:
        if self._blocks:
            self._split_block(data, batch)
        else:
            self._split_lines(data, batch)

    def _split_block(self, data: bytes, batch: Batch) -> None:
        """Whole lines as one block, copied once; data with a \r (or a giant line) is split
        line by line as always and packed back into a block."""
        partial = self._partial
        cut = data.rfind(b"\n") + 1
        if self._skipping or b"\r" in data or partial.endswith(b"\r") or len(partial) + cut > MAX_LINE:
            self._as_block(lambda b: self._split_lines(data, b), batch)
            return
        if cut:
            block = partial + data[:cut] if partial else data[:cut]
            batch.blocks.append((self.lineno + 1, block))
            # memchr, not bytes.count's scalar loop, unless the lines are short (eolcount.count_lf)
            self.lineno += count_lf(block, len(block))
            self._partial = b""
            self._hold(data[cut:])
        else:
            self._hold(data)

    def _as_block(self, split, batch: Batch) -> None:
        lines = Batch()
        split(lines)
        if lines.lines:
            batch.blocks.append((lines.lines[0][0], b"\n".join(raw for _, raw in lines.lines) + b"\n"))

    def _split_lines(self, data: bytes, batch: Batch) -> None:
        # Universal newlines (\n, \r\n, lone \r), as Python's text mode counts them (and so do
        # the fixtures' truth files): tqdm's \r-redrawn bars become separate lines.
        if self._partial.endswith(b"\r"):
            if data.startswith(b"\n"):
                data = data[1:]      # a \r\n split across two reads
            self._partial = self._partial[:-1]
            self._emit(b"", batch)
        if len(data) > MAX_LINE:
            self._split_slow(data, batch)
            return
        # Split in C: on \n first, then (only if there is a \r at all) each piece on lone \r.
        # No piece of `data` is longer than MAX_LINE, so only the first (joined to the held
        # partial) can need cutting.
        pieces = data.split(b"\n")
        rest = pieces.pop()
        if b"\r" in data:
            pieces = _split_crs(pieces)
            tail = rest.split(b"\r")
            if rest.endswith(b"\r"):
                tail.pop()
                tail[-1] += b"\r"       # a trailing \r may be half of \r\n: decide on the next read
            rest = tail.pop()
            pieces += tail
        if pieces:
            self._emit(pieces[0], batch)
            n = self.lineno
            if len(pieces) > 1:
                batch.lines.extend(zip(range(n + 1, n + len(pieces)), pieces[1:], strict=True))
                self.lineno = n + len(pieces) - 1
        self._hold(rest)

    def _split_slow(self, data: bytes, batch: Batch) -> None:
        """A read bigger than MAX_LINE (a test's tiny MAX_LINE): line by line, each one cut."""
        start = 0
        for m in _EOL.finditer(data):
            if m.end() == len(data) and m.group() == b"\r":
                break                # a trailing \r may be half of \r\n: decide on the next read
            self._emit(data[start:m.start()], batch)
            start = m.end()
        self._hold(data[start:])

    def _emit(self, piece: bytes, batch: Batch) -> None:
        line = self._take(piece)     # (first: it counts the line)
        batch.lines.append((self.lineno, line))

    def _take(self, piece: bytes) -> bytes:
        """The next line: what is held, completed by `piece`."""
        if self._skipping:
            piece = self._partial              # the cut head of a giant line
        elif self._partial:
            piece = self._partial + piece
        self._partial = b""
        self._skipping = False
        self.lineno += 1
        return piece[:MAX_LINE]

    def _hold(self, rest: bytes) -> None:
        if self._skipping:
            return
        self._partial += rest
        if len(self._partial) > MAX_LINE:
            # Keep the head of a giant line; the tail is dropped until its newline.
            self._partial = self._partial[:MAX_LINE]
            self._skipping = True


def _split_crs(pieces: list[bytes]) -> list[bytes]:
    """Lines from pieces split on \n: a piece's final \r was half of \r\n; any other \r
    ends a line of its own (tqdm redraws its bar after a lone \r)."""
    out: list[bytes] = []
    for p in pieces:
        if b"\r" not in p:
            out.append(p)
            continue
        if p.endswith(b"\r"):
            p = p[:-1]
        out += p.split(b"\r")
    return out


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)


def decode(raw: bytes) -> str:
    """Bytes of one line as text: invalid UTF-8 replaced, CR stripped."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", "replace")


def read_head(path: str | os.PathLike, limit: int | None = None) -> bytes:
    """Up to `limit` bytes from the start of the file at `path` (None: all of it); OSError as
    open() raises it. One open, fstat and read: Python's buffered open() adds an isatty call, a
    seek, a second fstat and a read to see the end (a run's summary reads several such files)."""
    return read_head_stat(path, limit)[0]


def read_head_stat(path: str | os.PathLike, limit: int | None = None) -> tuple[bytes, os.stat_result]:
    """read_head, and the file's stat as it was opened."""
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        return read_fd(fd, st.st_size, limit), st
    finally:
        os.close(fd)


def read_fd(fd: int, size: int, limit: int | None = None) -> bytes:
    """Up to `limit` bytes (None: all) from the start of a file just opened, `size` bytes by its
    fstat: a read of all of them needs no second read to see the end (a file grown since its
    fstat is read as it was then)."""
    want = size + 1 if limit is None else min(limit, size + 1)     # (sized: a read allocates it first)
    data = os.read(fd, want)
    if len(data) >= size or len(data) == want or not data:
        return data
    parts, got = [data], len(data)
    while got < want and (more := os.read(fd, want - got)):
        parts.append(more)
        got += len(more)
    return b"".join(parts)

"""Part of the work of a process that does nothing else meanwhile, done by a forked child on the
other core. Its reference twin is the same work done in this process: a caller always has it, and
does it whenever a child cannot be had (no fork, one core, threads: `can_fork()`) or fails.

One way of working in parallel: `Child(work)` forks a child that runs `work(out)`, writing its
answer into an anonymous in-memory file; `answer()` waits for it and reads that (None: it failed in
any way), `pour()` copies it out in the kernel. A forked child starts with everything imported and
the parent's data in place (no start-up, no message with its input), and leaves by `os._exit`
only: no atexit handler runs in it and no buffer it inherited is flushed a second time.
"""

from __future__ import annotations

import errno
import os
import signal
import tempfile
import threading
from typing import BinaryIO, Callable, Optional, TextIO, Union

import msgspec

from ..procs import usable_cpus
from ..rowfacts import BadLine, Row, RowFacts
from ..tail import Tailer
from . import enabled


def forkable() -> bool:
    """This process may fork: the platform forks, and it has no thread but this one (a forked
    child of a threaded one may inherit a lock another thread held)."""
    return hasattr(os, "fork") and threading.active_count() == 1


def can_fork(use: str = "fork") -> bool:
    """A child is worth forking: this process may fork, has a second core, and the fast path is on
    (`use`: which of its uses, `fork:rows`, ...: fast.PATHS)."""
    return enabled(use) and forkable() and usable_cpus() >= 2


def fork_child(work: Callable[[], object]) -> int:
    """The pid of a forked child that runs `work` and leaves by `os._exit` only: status 0 when
    `work` returned, 1 when it raised. OSError when the fork failed."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        work()
        code = 0
    finally:
        os._exit(code)


class Child:
    """A forked child writing `work(out)`'s answer while this process goes on. `nice`: it yields
    its core to this process (which everything waits for) when both want one."""

    def __init__(self, work: Callable[[BinaryIO], object], nice: bool = False):
        self._fd = _anonymous_file()
        fd = self._fd

        def run() -> None:
            if nice:
                try:
                    os.nice(10)
                except OSError:
                    pass
            with open(fd, "wb", closefd=False) as out:
                work(out)
        try:
            self.pid = fork_child(run)
        except OSError:
            os.close(fd)
            raise
        self._status: Optional[int] = None

    def done(self) -> bool:
        """Wait for the child: True when it finished its work."""
        if self._status is None:
            _, self._status = os.waitpid(self.pid, 0)
        return self._status == 0

    def answer(self) -> Optional[bytes]:
        """The child's answer, once it has finished; None when it failed in any way."""
        try:
            if not self.done():
                return None
            size = os.fstat(self._fd).st_size
            data = os.pread(self._fd, size, 0) if size else b""
            return data if len(data) == size else None
        except OSError:
            return None
        finally:
            self.close()

    def pour(self, out: TextIO) -> bool:
        """The child's answer written after what `out` has (copied in the kernel where it can
        be); False, and nothing written, when the child failed."""
        try:
            if not self.done():
                return False
            out.flush()
            size, dst, done = os.fstat(self._fd).st_size, out.fileno(), 0
            try:
                while done < size:
                    done += os.sendfile(dst, self._fd, done, size - done)
            except OSError as exc:
                if done or exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                    raise
                while done < size:
                    chunk = os.pread(self._fd, 1 << 20, done)
                    out.buffer.write(chunk)
                    done += len(chunk)
            return True
        finally:
            self.close()

    def close(self) -> None:
        """Let the child go (killed first if it has not finished) and its answer with it."""
        if self._status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == 0:
                os.kill(self.pid, signal.SIGKILL)
                _, status = os.waitpid(self.pid, 0)
            self._status = status
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _anonymous_file() -> int:
    """A file with no name, in memory where the platform has one (memfd), for a child's answer."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("gymwatch-child", os.MFD_CLOEXEC)
    return os.dup(tempfile.TemporaryFile().fileno())


# --- a file of rows read from a byte offset to its end, by a child --------------------------------
READ_BUDGET = 8 << 20        # bytes the child reads at a time
# What the child answers: (end offset, lines read, [(first line, [each line's facts, why it is no
# row, or None for a blank line]), ...]); typed, so that anything else fails the decode.
_ROWS = msgspec.msgpack.Decoder(tuple[int, int, list[tuple[int, list[Union[RowFacts, str, None]]]]]).decode
Blocks = list[tuple[int, list[Row]]]


def rows_child(path: str, start: int, final: bool, decode: Callable[[bytes], list[Row]]) -> Child:
    """A child reading the rows file at `path` from `start` (a line start) to its end, each block
    of lines decoded by `decode` (core/records.py's rollout_rows, input_rows), lines numbered
    from 1 at `start`."""
    def work(out: BinaryIO) -> None:
        t = Tailer(path, start, 0)
        blocks = []
        while True:
            batch = t.read(final=final, max_bytes=READ_BUDGET, blocks=True)
            if batch.error or batch.reset:
                raise OSError(batch.error or "the file was replaced")
            for first, block in batch.blocks:
                blocks.append((first, [str(r) if isinstance(r, BadLine) else r for r in decode(block)]))
            if not batch.more:
                break
        out.write(msgspec.msgpack.encode((t.offset, t.lineno, blocks)))
    return Child(work, nice=True)


def rows_answer(child: Child) -> Optional[tuple[int, int, Blocks]]:
    """(end offset, lines read, [(first line, rows), ...]) of a `rows_child`; None when it failed."""
    data = child.answer()
    if data is None:
        return None
    try:
        end, lines, blocks = _ROWS(data)
    except msgspec.DecodeError:
        return None
    return end, lines, [(first, [BadLine(r) if isinstance(r, str) else r for r in rows]) for first, rows in blocks]


def split_point(path: str, size: int, share: float) -> Optional[int]:
    """The start of the first line at or after the last `share` of the file, if any."""
    at = max(1, int(size * (1 - share)))
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        window = os.pread(fd, 1 << 20, at - 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    nl = window.find(b"\n")
    if nl < 0 or at + nl >= size:
        return None
    return at + nl

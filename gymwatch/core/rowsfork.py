"""The report's second core on a big rollouts file: a forked child decodes the back part of the
file while the report's process reads the front part, and hands back each row's facts.

The child is a fork of the report's process, taken just before the rollouts are read: it has
the same code loaded (no start-up), reads its part with the same Tailer and decodes it with the
same functions (records.block_items), and sends, for each block of lines, each row's facts or,
when only the general code can read a row, its raw bytes (msgpack; floats and ints exact). It
never touches the model: the report's process applies them after its own part, in file order
(Reducer.rollout_items), as if it had read them itself. If the child fails in any way, the
report reads the rest of the file itself.

Only for a process that does nothing else meanwhile (`gymwatch report`: no threads).
"""

from __future__ import annotations

import os
from typing import Optional, Union

import msgspec

from . import records
from .forkchild import fork_child
from .tail import Tailer

READ_BUDGET = 8 << 20        # bytes the child reads at a time
# What the child sends: (end offset, lines read, [(first line, [each line's facts, why it is no
# row, or None for a blank line]), ...]); typed, so that anything else fails the decode.
_PAYLOAD = msgspec.msgpack.Decoder(
    tuple[int, int, list[tuple[int, list[Union[records.RowFacts, str, None]]]]]).decode


class RowsChild:
    """A forked child decoding a rollouts file from `start` (a line start) to its end."""

    def __init__(self, path: str, start: int, final: bool):
        self.start = start
        r, w = os.pipe()

        def work() -> None:
            os.close(r)
            _yield_cpu()
            _write_all(w, _decode(path, start, final))
        try:
            self.pid = fork_child(work)
        except OSError:
            os.close(r)
            os.close(w)
            raise
        os.close(w)
        self.fd: Optional[int] = r

    def result(self) -> Optional[tuple[int, int, list]]:
        """(end offset, lines read, [(first line, items), ...] with lines numbered from 1 at
        `start`), or None when the child did not finish its work."""
        chunks = []
        try:
            while chunk := os.read(self.fd, 1 << 20):     # type: ignore[arg-type]
                chunks.append(chunk)
        except OSError:
            chunks = []
        self.close()
        if self.status != 0 or not chunks:
            return None
        try:
            end, lines, blocks = _PAYLOAD(b"".join(chunks))
        except msgspec.DecodeError:
            return None
        return end, lines, [(first, [records.BadLine(r) if type(r) is str else r for r in rows])
                            for first, rows in blocks]

    status: Optional[int] = None

    def close(self) -> None:
        """Reap the child (killed first if it has not finished)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == 0:
                os.kill(self.pid, 9)
                _, status = os.waitpid(self.pid, 0)
            self.status = status


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


def _decode(path: str, start: int, final: bool) -> bytes:
    t = Tailer(path, start, 0)
    blocks = []
    while True:
        batch = t.read(final=final, max_bytes=READ_BUDGET, blocks=True)
        if batch.error or batch.reset:
            raise OSError(batch.error or "the file was replaced")
        for first, block in batch.blocks:
            blocks.append((first, [str(r) if type(r) is records.BadLine else r for r in records.rollout_rows(block)]))
        if not batch.more:
            break
    return msgspec.msgpack.encode((t.offset, t.lineno, blocks))


def _yield_cpu() -> None:
    """A helper runs beside the report's process and the materialized-inputs child, three on two
    cores: niced, so that the report's process (the one everything waits for) keeps a core. At
    equal priority the scheduler took ~0.1 s of its 0.5 s read from it."""
    try:
        os.nice(10)
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

"""The trial keys of the materialized inputs, and a child process that reads them for a report.

A report on a big finished run reads two big files: the rollouts (the facts of each trial) and
the materialized inputs (one row per expected trial, ~1.4 KB each, of which only the
`(_ng_task_index, _ng_rollout_index)` key is needed). A child process decodes the inputs on the
other core while the report's process reads the rollouts (`KeysChild`); its keys are applied
after. Run as a script this module imports only the stdlib and msgspec (`python -I`, ~40 ms).

The script's output on stdout, native int64s: `(line, task, rollout)` for each row of the usual
shape; `(line, -1, n)` and then its n raw bytes for any other row (the report reads it the
general way: records.materialized_facts); at the end `(-1, end offset, lines read)`. A file with
a `\\r` (line ends the tailer counts differently) makes it exit 3: the report then reads the file
itself, as it does when the child fails in any way.

The trial's index keys are named here (records.py, which names every other Gym key, takes them
from here) so the script needs nothing else.
"""

from __future__ import annotations

import io
import os
import struct
import sys
from typing import Optional, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType, field

TASK_KEY = "_ng_task_index"
ROLLOUT_KEY = "_ng_rollout_index"
ATTEMPT_KEY = "_ng_attempt_index"
CHUNK = 8 << 20
_MAX_DIGITS = 4300        # jiter (the reference parser, like int()) refuses an integer of more digits
_DIGIT_STRIDE = 2048      # a run of > 4300 digits covers two neighbouring multiples of this
_TRIPLE = struct.Struct("=qqq")
NO_CR = 3                 # the script's exit status for a file with a \r


class KeyOnly(Struct, gc=False):
    task: int = field(name=TASK_KEY)
    rollout: int = field(name=ROLLOUT_KEY)
    attempt: Union[int, UnsetType] = field(name=ATTEMPT_KEY, default=UNSET)


_DECODE = msgspec.json.Decoder(KeyOnly).decode


def long_integer(raw: bytes) -> bool:
    """A run of more than 4300 digits somewhere in `raw` (two neighbouring stride points)."""
    n = len(raw)
    if n > _MAX_DIGITS:
        prev = False
        for i in range(0, n, _DIGIT_STRIDE):
            digit = 48 <= raw[i] <= 57
            if digit and prev and raw[i - _DIGIT_STRIDE:i + 1].isdigit():
                return True
            prev = digit
    return False


def plain_key(raw: bytes) -> Optional[tuple[int, int]]:
    """The (task, rollout) of a row of the usual shape whose run of rows is plain (ASCII, no
    over-long integer: records.rows_plain), else None."""
    try:
        row = _DECODE(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    if row.task < 0 or row.rollout < 0 or row.attempt is not UNSET:
        return None
    return row.task, row.rollout


# --- the child process -------------------------------------------------------------------------
def _scan(fd: int, start: int, first_line: int, final: bool, out) -> int:
    offset, line, rest = start, first_line, b""
    while True:
        data = os.pread(fd, CHUNK, offset)
        if not data:
            break
        offset += len(data)
        if b"\r" in data:
            return NO_CR
        rows = (rest + data).split(b"\n")
        rest = rows.pop()
        line = _emit(rows, line, out)
    if rest and final:
        line = _emit([rest], line, out)
        rest = b""
    out.write(_TRIPLE.pack(-1, offset - len(rest), line - first_line))
    return 0


def guarded(raw: bytes) -> bool:
    """The row passes what only the reference parser refuses (valid UTF-8, no over-long integer)."""
    if not raw.isascii():
        try:
            raw.decode()
        except UnicodeDecodeError:
            return False
    return not long_integer(raw)


def _emit(rows: list[bytes], line: int, out) -> int:
    block = b"\n".join(rows)
    plain = block.isascii() and not long_integer(block)
    pack, write = _TRIPLE.pack, out.write
    for raw in rows:
        key = plain_key(raw) if plain or guarded(raw) else None
        if key is None:
            write(pack(line, -1, len(raw)))
            write(raw)
        else:
            write(pack(line, key[0], key[1]))
        line += 1
    return line


def main(argv: list[str]) -> int:
    fd, start, first_line, final = int(argv[0]), int(argv[1]), int(argv[2]), argv[3] == "final"
    out = io.BytesIO()      # all of it at the end: the report reads the pipe only once its own
    code = _scan(fd, start, first_line, final, out)    # reading is done, and a full pipe would stall this
    if code == 0:
        sys.stdout.buffer.write(out.getbuffer())
        sys.stdout.buffer.flush()
    return code


# --- the report's side -------------------------------------------------------------------------
class KeysChild:
    """The child reading one file's keys from `start` (line `first_line` + 1 on)."""

    def __init__(self, path: str, start: int, first_line: int, final: bool):
        import subprocess

        self.fd = os.open(path, os.O_RDONLY)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", os.path.abspath(__file__), str(self.fd), str(start), str(first_line + 1),
                 "final" if final else "more"], pass_fds=(self.fd,), stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL)
        except OSError:
            os.close(self.fd)
            raise

    def result(self) -> Optional[tuple[list[tuple[int, int, int, Optional[bytes]]], int, int]]:
        """((line, task, rollout, raw of an unusual row or None) for each row, end offset, lines
        read), or None when the child did not finish its work (the caller reads the file itself)."""
        try:
            data, _ = self.proc.communicate()
        finally:
            os.close(self.fd)
        if self.proc.returncode != 0 or len(data) < _TRIPLE.size:
            return None
        rows: list[tuple[int, int, int, Optional[bytes]]] = []
        view, i, n = memoryview(data), 0, len(data)
        unpack = _TRIPLE.unpack_from
        while i + _TRIPLE.size <= n:
            line, a, b = unpack(view, i)
            i += _TRIPLE.size
            if line == -1:
                return (rows, a, b) if i == n else None
            if a == -1:
                rows.append((line, -1, -1, bytes(view[i:i + b])))
                i += b
            else:
                rows.append((line, a, b, None))
        return None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

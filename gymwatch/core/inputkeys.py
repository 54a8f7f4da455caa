"""The trial keys of the materialized inputs, and a child process that reads them for a report.

A report on a big finished run reads two big files: the rollouts (the facts of each trial) and
the materialized inputs (one row per expected trial, ~1.4 KB each, of which only the
`(_ng_task_index, _ng_rollout_index)` key is needed). A child process decodes the inputs on the
other core while the report's process reads the rollouts (`KeysChild`); its keys are applied
after. Run as a script this module imports only the stdlib and msgspec (`python -I`, ~40 ms).

The script's output on stdout, native int64s: `(rows, end offset, lines read)`, then the task
index of each row, then its rollout index, then the raw bytes of the rows not of the usual shape
(task -1, rollout their length: the report reads them the general way,
records.materialized_facts). Rows are decoded a block at a time (`decode_lines`, see
`one_row_a_line`), a block with any odd row line by line. A file with a `\\r` (line ends the
tailer counts differently) makes it exit 3: the report then reads the file itself, as it does
when the child fails in any way.

The trial's index keys are named here (records.py, which names every other Gym key, takes them
from here) so the script needs nothing else.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from typing import Optional, Union

import msgspec
from msgspec import UNSET, Struct, UnsetType, field

TASK_KEY = "_ng_task_index"
ROLLOUT_KEY = "_ng_rollout_index"
ATTEMPT_KEY = "_ng_attempt_index"
CHUNK = 8 << 20
_MAX_DIGITS = 4300        # jiter (the reference parser, like int()) refuses an integer of more digits
_DIGIT_STRIDE = 2048      # a run of > 4300 digits covers two neighbouring multiples of this
_HEAD = struct.Struct("=qqq")
NO_CR = 3                 # the script's exit status for a file with a \r


class KeyOnly(Struct, gc=False):
    task: int = field(name=TASK_KEY)
    rollout: int = field(name=ROLLOUT_KEY)
    attempt: Union[int, UnsetType] = field(name=ATTEMPT_KEY, default=UNSET)


_DECODE = msgspec.json.Decoder(KeyOnly).decode
_DECODE_LINES = msgspec.json.Decoder(KeyOnly).decode_lines


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


def one_row_a_line(block: bytes) -> int:
    """The number of lines of a block of whole lines (each ending with \\n) whose every line
    starts with `{` and ends with `}`, else -1: for msgspec's `decode_lines`, which reads a
    stream of values, not lines (a value may span lines, a line may hold two). After a `}`
    inside a value comes `,` `}` or `]`, never a line starting with `{`, and a string holds no raw
    newline: so no value spans lines, each line holds at least one, and as many values as lines
    means one a line. A `find` a line (~0.06 ms a MB); `bytes.count(b"}\\n")` is a scalar
    two-byte search (~0.8 ms a MB, measured)."""
    if block[:1] != b"{":
        return -1
    find, pos, end, lines = block.find, 0, len(block), 0
    while pos < end:
        nl = find(b"\n", pos)
        if nl < 1 or block[nl - 1] != 0x7D:
            return -1
        pos = nl + 1
        lines += 1
        if pos < end and block[pos] != 0x7B:
            return -1
    return lines


# --- the child process -------------------------------------------------------------------------
def _scan(fd: int, start: int, final: bool, tasks: array, rollouts: array, odd: list[bytes]) -> tuple[int, int]:
    """(end offset, -1) after the keys of every row from `start` on; (0, NO_CR) for a file with a \\r."""
    offset, rest = start, b""
    while True:
        data = os.pread(fd, CHUNK, offset)
        if not data:
            break
        offset += len(data)
        if b"\r" in data:
            return 0, NO_CR
        data = rest + data if rest else data
        cut = data.rfind(b"\n") + 1
        rest = data[cut:]
        if cut:
            _emit_block(data[:cut] if rest else data, tasks, rollouts, odd)
    if rest and final:
        _emit([rest], tasks, rollouts, odd)
        rest = b""
    return offset - len(rest), -1


def _emit_block(block: bytes, tasks: array, rollouts: array, odd: list[bytes]) -> None:
    """A block of whole lines: decoded at once when every row is of the usual shape and plain."""
    if block.isascii() and not long_integer(block):
        lines = one_row_a_line(block)
        if lines > 0:
            try:
                rows = _DECODE_LINES(block)
            except (msgspec.DecodeError, RecursionError):
                rows = []
            if len(rows) == lines:
                ts = [r.task for r in rows]
                rs = [r.rollout for r in rows]
                if min(ts) >= 0 and min(rs) >= 0 and all(r.attempt is UNSET for r in rows):
                    tasks.extend(ts)
                    rollouts.extend(rs)
                    return
    _emit(block.split(b"\n")[:-1], tasks, rollouts, odd)


def guarded(raw: bytes) -> bool:
    """The row passes what only the reference parser refuses (valid UTF-8, no over-long integer)."""
    if not raw.isascii():
        try:
            raw.decode()
        except UnicodeDecodeError:
            return False
    return not long_integer(raw)


def _emit(rows: list[bytes], tasks: array, rollouts: array, odd: list[bytes]) -> None:
    block = b"\n".join(rows)
    plain = block.isascii() and not long_integer(block)
    for raw in rows:
        key = plain_key(raw) if plain or guarded(raw) else None
        if key is None:
            tasks.append(-1)
            rollouts.append(len(raw))
            odd.append(raw)
        else:
            tasks.append(key[0])
            rollouts.append(key[1])


def main(argv: list[str]) -> int:
    fd, start, final = int(argv[0]), int(argv[1]), argv[2] == "final"
    try:
        os.nice(10)     # the report's process is the one everything waits for (core/rowsfork.py)
    except OSError:
        pass
    tasks, rollouts, odd = array("q"), array("q"), list[bytes]()
    end, code = _scan(fd, start, final, tasks, rollouts, odd)   # all of it at the end: the report reads
    if code >= 0:                                               # the pipe only once its own reading is
        return code                                             # done, and a full pipe would stall this
    out = sys.stdout.buffer
    out.write(_HEAD.pack(len(tasks), end, len(tasks)))
    out.write(tasks.tobytes())
    out.write(rollouts.tobytes())
    for raw in odd:
        out.write(raw)
    out.flush()
    return 0


# --- the report's side -------------------------------------------------------------------------
Keys = list     # each row's facts (records.RowFacts), why it is no row, or None


class KeysChild:
    """The child reading one file's keys from `start` on."""

    def __init__(self, path: str, start: int, final: bool):
        import subprocess

        self.fd = os.open(path, os.O_RDONLY)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", os.path.abspath(__file__), str(self.fd), str(start),
                 "final" if final else "more"], pass_fds=(self.fd,), stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL)
        except OSError:
            os.close(self.fd)
            raise

    def result(self) -> Optional[tuple[Keys, int, int]]:
        """((task of each row, rollout of each row, raw bytes of the odd rows), end offset, lines
        read), or None when the child did not finish its work (the caller reads the file itself).
        Two int64 arrays, not a tuple a row: ~0.01 s for 100k rows against ~0.06 s."""
        try:
            data, _ = self.proc.communicate()
        finally:
            os.close(self.fd)
        if self.proc.returncode != 0 or len(data) < _HEAD.size:
            return None
        n, end, lines = _HEAD.unpack_from(data)
        body = _HEAD.size + 16 * n
        if n < 0 or len(data) < body:
            return None
        view = memoryview(data)
        tasks = view[_HEAD.size:_HEAD.size + 8 * n].cast("q").tolist()
        rollouts = view[_HEAD.size + 8 * n:body].cast("q").tolist()
        from . import records     # (not at the top: this module also runs alone as a script)

        rows: list = []
        at = body
        for task, rollout in zip(tasks, rollouts):
            if task >= 0:
                rows.append(records.RowFacts(task, rollout))
            else:
                rows.append(records.one_row(records.materialized_facts, data[at:at + rollout]))
                at += rollout
        return (rows, end, lines) if at == len(data) else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

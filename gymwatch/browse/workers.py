"""Run summaries made in worker processes, for a cold listing of many runs.

A worker is given a run's path and, when the listing had it, its signature; it answers with
both, `[signature, summary]` (a listing of runs never seen leaves their signatures to the
workers, in parallel). Workers are forked (ForkPool), the listing's own process one of them:
they start with everything imported and take run numbers from a shared pipe, so a worker with
costly runs does fewer; answers come back as msgpack frames, put in walk order. A process with
other threads must not fork (the browse screen's scanning thread): its WorkerPool starts one
`python -m gymwatch.browse.workers N` process, which has no thread but its own, to be those
workers and pass their answers on.
"""

from __future__ import annotations

import fcntl
import os
import selectors
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import msgspec

from ..core.fast.fork import fork_child, forkable
from ..core.layout import NotARun, discover
from .procscan import ProcessSweep
from .scan import Found, discover_found, found_at, listings, signature
from .summary import summarize

# A run for a worker: its path and signature (None: the worker makes it); its answer, `made()`
Item = tuple[str, Optional[list]]
Answer = list           # [signature, summary or None]


class BrokenPool(RuntimeError):
    """A worker died or answered nonsense; the caller makes the rest itself."""


def make(path, sig: list, sweep: Optional[ProcessSweep] = None,
         found: Optional[Found] = None) -> Optional[dict[str, Any]]:
    """One run's summary, or None if it is not a run after all. `sweep`: the listing's look at
    the process table (None: this run's own); `found`: the walk's look at the run's dir."""
    listed = listings(found) if found is not None else None
    try:
        layout = discover_found(found, listed) if found is not None else discover(path)
    except NotARun:
        return None
    return summarize(path, layout, sig, sweep or ProcessSweep(), listed=listed)


def made(path: str, sig: Optional[list], sweep: Optional[ProcessSweep] = None,
         found: Optional[Found] = None) -> Answer:
    """[signature, summary] of one run, its signature made here when the listing left it to us."""
    if sig is None:
        found = found if found is not None else found_at(path)
        sig = signature(found)
    return [sig, make(path, sig, sweep, found)]


class WorkerPool:
    """ForkPool's workers for a process with other threads: one `python -m gymwatch.browse.workers
    N` process and those it forks, which read the items on its stdin and write ForkPool's frames,
    in walk order, on its stdout. (N `python -m` workers, each importing the core and given a
    fixed share of the runs, made the browse screen's cold listing slower.)
    A plain child process, not multiprocessing: that one's helper process needs a real stderr,
    which a Textual app does not have, and its spawn re-runs the main script."""

    def __init__(self, n: int):
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])     # gymwatch importable even uninstalled
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gymwatch.browse.workers", str(n)], env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as exc:
            raise BrokenPool(str(exc)) from exc

    def map(self, items: list[Item], found: Optional[list[Found]] = None) -> Iterator[Answer]:
        """Answers for `items`, in order, as they come (`found`: ForkPool's; not passed on)."""
        proc = self.proc
        try:        # it reads all of them before it answers: no deadlock on a full pipe
            proc.stdin.write(msgspec.msgpack.encode(items))          # type: ignore[union-attr]
            proc.stdin.close()                                        # type: ignore[union-attr]
        except (OSError, ValueError) as exc:
            raise BrokenPool(f"the workers' process is gone ({exc})") from None
        read, head = proc.stdout.read, ForkPool.FRAME             # type: ignore[union-attr]
        for i in range(len(items)):
            frame = read(head.size)
            n, size = head.unpack(frame) if len(frame) == head.size else (-1, 0)
            data = read(size)
            if n != i or len(data) != size:
                raise BrokenPool(f"the workers stopped answering at run {i}")
            yield _decoded(data, i)

    def close(self) -> None:
        proc = self.proc
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for fh in (proc.stdin, proc.stdout):
            try:
                fh and fh.close()
            except OSError:
                pass


FORK_MAX_RUNS = 16384          # run numbers a pipe holds before anyone reads (64 KiB): ForkPool's queue


class ForkPool:
    """n workers, this process and n - 1 forked from it, for a listing made by a process with no
    other thread (`can_fork`): they start with everything imported (a `python -m` worker imports
    the core before its first summary) and have the runs they inherit. They take them one at a
    time from a shared pipe of run numbers, so a worker with costly runs does fewer (run i from
    worker i % n left one worker with more work than the others on a tree of repeated cases).
    The forked ones answer in msgpack frames (run number, length, then the answer: cheaper than
    JSON to read, on a parent that shares the cores with them), put back in walk order here."""

    TAKE = struct.Struct("<i")
    FRAME = struct.Struct("<iI")          # run number, answer bytes

    def __init__(self, n: int, sweep: Optional[ProcessSweep] = None):
        self.n, self.sweep = n, sweep
        self.pids: list[int] = []
        self.fds: list[int] = []
        self.queue: Optional[int] = None

    def map(self, items: list[Item], found: Optional[list[Found]] = None) -> Iterator[Answer]:
        """Answers for `items`, in order, as they come; `found`: the walk's look at each (the
        workers inherit it)."""
        for i, got in enumerate(self._results(items, found)):
            yield got if isinstance(got, list) else _decoded(got, i)

    def raw(self, items: list[Item], found: Optional[list[Found]] = None) -> Iterator[bytes]:
        """The answers encoded as the workers encode them, in order."""
        encode = msgspec.msgpack.Encoder().encode
        for got in self._results(items, found):
            yield encode(got) if isinstance(got, list) else got

    def _results(self, items: list[Item], found: Optional[list[Found]]) -> Iterator[bytes | Answer]:
        """Per run, in order, a worker's encoded answer or the answer made here: this process is
        the n-th worker (it would otherwise wait on the others, sharing their cores: with one
        worker less, a cold listing took less time)."""
        if len(items) > FORK_MAX_RUNS:        # (runs.py asks for no more)
            raise BrokenPool("too many runs for one queue")
        self.queue, tw = os.pipe()
        os.write(tw, b"".join(self.TAKE.pack(i) for i in range(len(items))))
        os.close(tw)                    # drained, the queue reads as closed: a worker stops
        for _ in range(self.n - 1):
            self._fork(items, found)
        yield from self._answers(items, found)

    def _fork(self, items: list[Item], found: Optional[list[Found]]) -> None:
        r, w = os.pipe()
        _widen(r)

        def work() -> None:
            os.close(r)
            for fd in self.fds:
                os.close(fd)
            encode = msgspec.msgpack.Encoder().encode
            with open(w, "wb") as out:
                while (i := self._take()) is not None:
                    data = encode(self._made(items, found, i))
                    out.write(self.FRAME.pack(i, len(data)) + data)
        try:
            pid = fork_child(work)
        except OSError as exc:
            os.close(r)
            os.close(w)
            raise BrokenPool(str(exc)) from exc
        os.close(w)
        self.pids.append(pid)
        self.fds.append(r)

    def _take(self) -> Optional[int]:
        """The next run from the queue (None: none left)."""
        took = os.read(self.queue, self.TAKE.size)      # type: ignore[arg-type]
        return self.TAKE.unpack(took)[0] if len(took) == self.TAKE.size else None

    def _made(self, items: list[Item], found: Optional[list[Found]], i: int) -> Answer:
        """Run i's answer, made in this process (a worker, or the pool's own)."""
        path, sig = items[i]
        return made(path, sig, self.sweep, found[i] if found else None)

    def _answers(self, items: list[Item], found: Optional[list[Found]]) -> Iterator[bytes | Answer]:
        """The answers in order: the workers' as they come, and between them, whenever none is
        waiting, a run from the queue made here."""
        sel = selectors.DefaultSelector()
        held = {fd: b"" for fd in self.fds}
        for fd in self.fds:
            sel.register(fd, selectors.EVENT_READ)
        done: dict[int, bytes | Answer] = {}
        mine = True                   # the queue may still have runs for this process
        try:
            for i in range(len(items)):
                while i not in done:
                    if not mine and not held:
                        raise BrokenPool("a worker stopped answering")
                    ready = sel.select(0 if mine else None) if held else []
                    for key, _ in ready:
                        chunk = os.read(key.fd, 1 << 16)
                        if not chunk:
                            sel.unregister(key.fd)
                            del held[key.fd]
                            continue
                        held[key.fd] = self._frames(held[key.fd] + chunk, done)
                    if not ready and mine:
                        k = self._take()
                        if k is None:
                            mine = False
                        else:
                            done[k] = self._made(items, found, k)
                yield done.pop(i)
        finally:
            sel.close()

    def _frames(self, data: bytes, done: dict[int, bytes | Answer]) -> bytes:
        """Whole frames of `data` into `done`; what is left of a frame still coming."""
        at, head = 0, self.FRAME.size
        while len(data) - at >= head:
            i, size = self.FRAME.unpack_from(data, at)
            if len(data) - at - head < size:
                break
            done[i] = data[at + head:at + head + size]
            at += head + size
        return data[at:]

    def close(self) -> None:
        for fd in self.fds + ([self.queue] if self.queue is not None else []):
            os.close(fd)
        self.queue = None
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(pid, 0)
        self.pids, self.fds = [], []


def _widen(fd: int) -> None:
    """A worker's answers wait in its pipe while this process makes a run of its own: room for
    ~1,000 of them (Linux; elsewhere the worker waits)."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (AttributeError, OSError):
        pass


_DECODE = msgspec.msgpack.Decoder().decode


def _decoded(data: bytes, i: int) -> Answer:
    """Run i's answer from its frame: `[signature, summary or None]`, else BrokenPool."""
    try:
        answer = _DECODE(data)
    except msgspec.DecodeError:
        answer = None
    if not (isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], list)
            and (answer[1] is None or isinstance(answer[1], dict))):
        raise BrokenPool(f"a worker answered nonsense for run {i}")
    return answer


def can_fork() -> bool:
    """A process with no thread but this one may fork workers (core/fast/fork.py; the browse
    screen's listing, made by a thread, uses WorkerPool)."""
    return forkable()


def main(argv: list[str]) -> int:
    """WorkerPool's process: `[path, signature]` items (msgpack) on stdin; ForkPool's frames, in
    order, on stdout. Exits 1 when a worker died (the caller makes the rest itself)."""
    n = int(argv[0]) if argv else 2
    items = msgspec.msgpack.decode(sys.stdin.buffer.read())
    sweep = ProcessSweep()          # one look at the process table for all of them
    out = sys.stdout.buffer
    for start in range(0, len(items), FORK_MAX_RUNS):
        pool = ForkPool(n, sweep)
        try:
            for k, data in enumerate(pool.raw(items[start:start + FORK_MAX_RUNS])):
                out.write(ForkPool.FRAME.pack(start + k, len(data)) + data)
                out.flush()
        except BrokenPool:
            return 1
        finally:
            pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

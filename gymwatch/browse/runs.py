"""List runs: walk the roots, take each summary from the cache or make it (in parallel if many)."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Iterator, Optional

from ..core.fast import bulk_load
from ..core.procs import usable_cpus
from . import fresh, workers
from .cache import SummaryCache
from .procscan import ProcessSweep
from .scan import Found, found_at, signature, walk
from .summary import still_true
from .workers import FORK_MAX_RUNS, Answer, BrokenPool, ForkPool, WorkerPool, can_fork

# A worker process is slow to start (it imports the core), so a pool pays off only for this
# many uncached runs, or this many bytes of them.
POOL_MIN_RUNS = 64
POOL_MIN_BYTES = 64 << 20


def list_runs(roots: Iterable[str | os.PathLike], cache: Optional[SummaryCache] = None,
              on_run: Optional[Callable[[dict[str, Any]], None]] = None,
              jobs: Optional[int] = None, stop: Callable[[], bool] = lambda: False) -> list[dict[str, Any]]:
    """Summaries of every run under `roots`, in walk order; `on_run` sees each as soon as it
    is there. Uncached runs are summarised by `jobs` processes (default: one a core, up to 4)
    when there are enough of them. `stop()` true: return what is listed so far (the cache
    keeps what was made). A cached summary whose verdict depended on liveness is made again
    when that changed (summary.still_true): a process came or went, or the files fell quiet."""
    cache = cache if cache is not None else SummaryCache()
    sweep = ProcessSweep()            # the process table, read once and only if a run needs it
    jobs = default_jobs() if jobs is None else jobs
    early = _Early(jobs, cache)
    pool: Optional[WorkerPool | ForkPool] = None
    try:
        with bulk_load():             # (a warm listing is mostly this: ~20 objects a run, kept)
            found = [early.saw(f) for f in walk(roots, cache.known)]
            paths = [f.dir for f in found]
            # a listing of many runs never seen has their signatures made by its workers, in parallel
            # (the stat calls of many runs here would hold every worker back)
            sigs, summaries = fresh.check(found, paths, cache, sign_new_below=POOL_MIN_RUNS)
            summaries = [s if s is None or still_true(s, sweep) else None for s in summaries]
            for f, s in zip(found, summaries, strict=True):
                if s is not None and f.known is None:     # still true, its dirs listed this time
                    cache.reshape(f.dir, f.shape)
        cold = [i for i, s in enumerate(summaries) if s is None]
        for i in cold:      # a run the walk did not list (its dirs unchanged) is made from listings
            if found[i].known is not None:
                found[i] = found_at(found[i].dir, found[i].real, shaped=True)
                sigs[i] = signature(found[i])
        n = min(jobs, len(cold)) if _worth_a_pool(cold, sigs) else 1
        pool = _pool(n, sweep, len(cold), early.take())
        made = pool.map([(paths[i], sigs[i]) for i in cold], [found[i] for i in cold]) if pool else None
        out = []
        for i, f in enumerate(found):
            if stop():
                break
            summary = summaries[i]
            if summary is None:
                (sig, summary), made = _next(made, f, sigs[i], sweep)
                if summary is None:
                    continue
                cache.put(paths[i], sig, summary, found[i].shape)
            out.append(summary)
            if on_run is not None:
                on_run(summary)
        cache.save()        # (before the pool's close: its worker, done, exits meanwhile)
    finally:
        early.close()
        if pool is not None:
            pool.close()
    return out


class _Early:
    """A WorkerPool's process started while the walk goes on, once it has found POOL_MIN_RUNS runs
    the cache never saw: the process imports the core meanwhile, not after the walk.
    Only where ForkPool cannot be used (a caller with threads: the browse screen)."""

    def __init__(self, jobs: int, cache: SummaryCache):
        self.jobs, self.cache = jobs, cache
        self.new = 0
        self.pool: Optional[WorkerPool] = None

    def saw(self, found: Found) -> Found:
        if self.new < POOL_MIN_RUNS and self.jobs >= 2 and not self.cache.knows(found.dir):
            self.new += 1
            if self.new == POOL_MIN_RUNS and not can_fork():
                try:
                    self.pool = WorkerPool(self.jobs)
                except BrokenPool:
                    pass
        return found

    def take(self) -> Optional[WorkerPool]:
        pool, self.pool = self.pool, None
        return pool

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


def _worth_a_pool(cold: list[int], sigs: list[Optional[list]]) -> bool:
    if len(cold) >= POOL_MIN_RUNS:
        return True
    return sum(size or 0 for i in cold for _, size, _ in sigs[i] or ()) >= POOL_MIN_BYTES


def _pool(n: int, sweep: Optional[ProcessSweep] = None, runs: int = 0,
          started: Optional[WorkerPool] = None) -> Optional[WorkerPool | ForkPool]:
    """The pool for `n` workers (None: make the summaries here); `started`: a WorkerPool started
    during the walk (closed when not wanted after all)."""
    if n < 2 or (can_fork() and runs <= FORK_MAX_RUNS):
        if started is not None:
            started.close()
        return ForkPool(n, sweep) if n >= 2 else None
    if started is not None:
        return started
    try:
        return WorkerPool(n)
    except BrokenPool:
        return None


def _next(made: Optional[Iterator], found: Found, sig: Optional[list],
          sweep: Optional[ProcessSweep] = None) -> tuple[Answer, Optional[Iterator]]:
    """The next [signature, summary] from the pool, or made here if there is no pool (any more)."""
    if made is not None:
        try:
            return next(made), made
        except (BrokenPool, StopIteration):   # a worker died: go on here
            pass
    return workers.made(found.dir, sig, sweep, found), None


def default_jobs() -> int:
    return max(1, min(4, usable_cpus()))

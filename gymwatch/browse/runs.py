"""List runs: walk the roots, take each summary from the cache or make it (in parallel if many)."""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Optional

from ..core.layout import NotARun, discover
from .cache import SummaryCache
from .scan import signature, walk
from .summary import summarize

# A worker process costs ~0.2 s to start (it imports the core), so a pool pays off only for
# this many uncached runs, or this many bytes of them.
POOL_MIN_RUNS = 64
POOL_MIN_BYTES = 64 << 20


def list_runs(roots: Iterable[str | os.PathLike], cache: Optional[SummaryCache] = None,
              on_run: Optional[Callable[[dict[str, Any]], None]] = None,
              jobs: Optional[int] = None) -> list[dict[str, Any]]:
    """Summaries of every run under `roots`, in walk order; `on_run` sees each as soon as it
    is there. Uncached runs are summarised by `jobs` processes (default: one a core, up to 4)
    when there are enough of them. Safe to call from any thread (workers are spawned)."""
    cache = cache if cache is not None else SummaryCache()
    found = list(walk(roots))
    sigs = [signature(f) for f in found]
    summaries = [cache.get(str(f.path), s) for f, s in zip(found, sigs)]
    cold = [i for i, s in enumerate(summaries) if s is None]
    jobs = default_jobs() if jobs is None else jobs
    workers = min(jobs, len(cold)) if _worth_a_pool(cold, sigs) else 1
    pool = None
    if workers > 1:
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet)
    try:
        made = _made_in_pool(pool, workers, found, sigs, cold) if pool else None
        out = []
        for i, (f, sig) in enumerate(zip(found, sigs)):
            summary = summaries[i]
            if summary is None:
                summary, made = _next(made, f.path, sig)
                if summary is None:
                    continue
                cache.put(str(f.path), sig, summary)
            out.append(summary)
            if on_run is not None:
                on_run(summary)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    cache.save()
    return out


def _worth_a_pool(cold: list[int], sigs: list[list]) -> bool:
    if len(cold) >= POOL_MIN_RUNS:
        return True
    return sum(size or 0 for i in cold for _, size, _ in sigs[i]) >= POOL_MIN_BYTES


def _made_in_pool(pool: ProcessPoolExecutor, workers: int, found, sigs,
                  cold: list[int]) -> Iterator[Optional[dict]]:
    """Summaries of the cold runs, in their order (`map` yields them as they finish, in order)."""
    chunk = max(1, min(16, len(cold) // (4 * workers)))
    yield from pool.map(_make, [found[i].path for i in cold], [sigs[i] for i in cold], chunksize=chunk)


def _next(made: Optional[Iterator], path, sig: list) -> tuple[Optional[dict], Optional[Iterator]]:
    """The next summary from the pool, or made here if there is no pool (any more)."""
    if made is not None:
        try:
            return next(made), made
        except Exception:  # noqa: BLE001 - a broken pool (a worker killed, a failed spawn): go on here
            pass
    return _make(path, sig), None


def _quiet() -> None:
    """A worker must never write to the terminal a screen is drawn on."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


def _make(path, sig: list) -> Optional[dict[str, Any]]:
    try:
        layout = discover(path)
    except NotARun:
        return None
    return summarize(path, layout, sig)


def default_jobs() -> int:
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))

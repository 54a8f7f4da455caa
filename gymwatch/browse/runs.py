"""List runs: walk the roots, take each summary from the cache or make it (in parallel if many)."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterable, Optional

from ..core.layout import NotARun, discover
from .cache import SummaryCache
from .scan import signature, walk
from .summary import summarize

POOL_MIN = 48          # fewer cold runs than this are summarised in-process


def list_runs(roots: Iterable[str | os.PathLike], cache: Optional[SummaryCache] = None,
              on_run: Optional[Callable[[dict[str, Any]], None]] = None, jobs: int = 1) -> list[dict[str, Any]]:
    """Summaries of every run under `roots`, in walk order. `on_run` sees each as it is made.
    `jobs` > 1: cold runs are summarised by that many processes (not from a threaded caller)."""
    cache = cache if cache is not None else SummaryCache()
    found = list(walk(roots))
    sigs = [signature(f) for f in found]
    summaries = [cache.get(str(f.path), s) for f, s in zip(found, sigs)]
    cold = [i for i, s in enumerate(summaries) if s is None]
    made: set[int] = set()
    if jobs > 1 and len(cold) >= POOL_MIN:
        with ProcessPoolExecutor(jobs) as pool:
            for i, summary in zip(cold, pool.map(_make, [found[i].path for i in cold],
                                                  [sigs[i] for i in cold], chunksize=16)):
                summaries[i] = summary
                made.add(i)
    out = []
    for i, (f, sig) in enumerate(zip(found, sigs)):
        summary = summaries[i]
        if i in made or summary is None:
            summary = summary or _make(f.path, sig)
            if summary is None:
                continue
            cache.put(str(f.path), sig, summary)
        out.append(summary)
        if on_run is not None:
            on_run(summary)
    cache.save()
    return out


def _make(path, sig: list) -> Optional[dict[str, Any]]:
    try:
        layout = discover(path)
    except NotARun:
        return None
    return summarize(path, layout, sig)


def default_jobs() -> int:
    return max(1, min(4, os.cpu_count() or 1))

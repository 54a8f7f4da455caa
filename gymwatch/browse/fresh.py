"""Which cached summaries are still true to their runs' files, and the signatures of the rest.

A warm listing is mostly this: a stat of every file a summary read (more time than the walk).
With many cached runs the stat calls are split with a forked child, which answers one byte a
run (its signature matched, or not).
"""

from __future__ import annotations

from typing import Optional

from ..core.fast import fork
from .cache import SummaryCache
from .scan import Found, signature

# Cached runs below which one process is as quick as a forked child (its fork and its answer cost).
SPLIT_MIN = 256


def check(found: list[Found], paths: list[str], cache: SummaryCache, sign_new_below: int
          ) -> tuple[list[Optional[list]], list[Optional[dict]]]:
    """Per run, its signature (None: not made here, the run's worker makes it) and its cached
    summary when that was made from files with that signature (None: to be made). Runs the cache
    never saw are signed here only when fewer than `sign_new_below` (more: their workers sign them,
    in parallel)."""
    sigs: list[Optional[list]] = [None] * len(found)
    summaries: list[Optional[dict]] = [None] * len(found)
    known: list[int] = []
    new: list[int] = []
    for i, p in enumerate(paths):
        (known if cache.knows(p) else new).append(i)
    theirs: list[int] = []
    child = None
    if len(known) >= SPLIT_MIN and fork.can_fork("fork:fresh"):
        child = _fork_matches(found, paths, cache, known[1::2])
        if child is not None:
            known, theirs = known[::2], known[1::2]
    for i in known:
        sigs[i] = signature(found[i])
        summaries[i] = cache.get(paths[i], sigs[i])
    same = _answer(child, len(theirs)) if child is not None else None
    for k, i in enumerate(theirs):
        if same is not None and same[k]:
            summaries[i] = cache.hit(paths[i])
        else:           # changed (the cache's put needs its signature), or the child died: here
            sigs[i] = signature(found[i])
            summaries[i] = cache.get(paths[i], sigs[i])
    cache.misses += len(new)
    if len(new) < sign_new_below:
        for i in new:
            sigs[i] = signature(found[i])
    return sigs, summaries


def _fork_matches(found: list[Found], paths: list[str], cache: SummaryCache, runs: list[int]
                  ) -> Optional[fork.Child]:
    """A child that answers, per run of `runs`, b"\\1" when its signature matches its cached one,
    else b"\\0"; None when it cannot fork."""
    try:
        return fork.Child(lambda out: out.write(bytes(cache.matches(paths[i], signature(found[i])) for i in runs)))
    except OSError:
        return None


def _answer(child: fork.Child, count: int) -> Optional[list[bool]]:
    """The child's answer; None when it died before answering in full."""
    data = child.answer()
    return [b == 1 for b in data] if data is not None and len(data) == count else None

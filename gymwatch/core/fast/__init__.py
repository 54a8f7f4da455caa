"""The fast seam: each module here is a faster way to what a reference module outside it does,
and is chosen at one place, where the reference is called (reading the reference code tells the
whole meaning):

  rows.py   a block of rows decoded at once (msgspec)        twin: core/records.py
  scan.py   the lines of a block that can change nothing,    twin: the reducer's line path
            skipped in C (RE2)
  fork.py   part of a one-shot read done by a forked child   twin: the same work done here
  bulk_load()  no cyclic garbage collection while a model     twin: the collector as it runs
               is made                                          anyway

Each has one property test that checks it gives what its reference gives, and a line in
benchmarks/README.md saying what it is worth. `GYMWATCH_REFERENCE=rows,scan,fork` (or `all`)
turns them off: the reference path alone (benchmarks measure with and without).
"""

from __future__ import annotations

import gc
import os
from contextlib import contextmanager
from typing import Iterator

__all__ = ["OFF", "PATHS", "bulk_load", "enabled"]

PATHS = ("rows", "scan", "fork", "fork:rows", "fork:inputs", "fork:json", "fork:fresh", "fork:index", "gc")
# The fast paths turned off (tests set it; the environment sets it for a process).
OFF: set[str] = {p.strip() for p in os.environ.get("GYMWATCH_REFERENCE", "").split(",") if p.strip()}
if "all" in OFF:
    OFF = set(PATHS)


def enabled(path: str) -> bool:
    """Is the fast path `path` (one of PATHS; `fork:x` is off with `fork` too) in use?"""
    return path not in OFF and not (path.startswith("fork:") and "fork" in OFF)


@contextmanager
def bulk_load(keep: bool = False) -> Iterator[None]:
    """No cyclic garbage collection while many long-lived objects are made, none in a cycle: a
    whole run's model (~5 objects a trial), the runs browser's summaries. The collector walks
    every object each time its young generation fills; over a growing heap of objects that stay,
    that is all it does. `keep`: the objects live until the process ends (`gymwatch report`):
    frozen, so the collections after (while writing, at exit) pass them by."""
    if not enabled("gc"):
        yield
        return
    was = gc.isenabled()
    gc.disable()
    try:
        yield
        if keep:
            gc.freeze()
    finally:
        if was:
            gc.enable()

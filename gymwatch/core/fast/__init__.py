"""The fast seam: each module here is a faster way to what a reference module outside it does,
and is chosen at one place, where the reference is called (reading the reference code tells the
whole meaning):

  rows.py   a block of rows decoded at once (msgspec)        twin: core/records.py
  scan.py   the lines of a block that can change nothing,    twin: the reducer's line path
            skipped in C (RE2)
  fork.py   part of a one-shot read done by a forked child   twin: the same work done here

Each has one property test that checks it gives what its reference gives, and a line in
benchmarks/README.md saying what it is worth. `GYMWATCH_REFERENCE=rows,scan,fork` (or `all`)
turns them off: the reference path alone (benchmarks measure with and without).
"""

from __future__ import annotations

import os

__all__ = ["OFF", "PATHS", "enabled"]

PATHS = ("rows", "scan", "fork")
# The fast paths turned off (tests set it; the environment sets it for a process).
OFF: set[str] = {p.strip() for p in os.environ.get("GYMWATCH_REFERENCE", "").split(",") if p.strip()}
if "all" in OFF:
    OFF = set(PATHS)


def enabled(path: str) -> bool:
    """Is the fast path `path` (one of PATHS) in use?"""
    return path not in OFF

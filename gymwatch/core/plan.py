"""What a RunSession reads, and how: its reading plan.

`ReadingPlan`, the full plan, is the report's and the live screen's: every file of the run, whole,
each from where its reader stopped; the layout following the run's files as they appear; names and
settings read from the run's configs; the run's processes looked for on this machine. A caller
that needs less gives the session another plan (the runs browser's summary reads the rows first
and the logs only when they can matter: browse/summary.py); the session asks its plan at each of
these points, and reads, reduces and settles the same way whatever the plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Protocol

from . import procs
from .config import read_info
from .layout import RunLayout
from .model import RunInfo, RunState
from .tail import Batch


class Reader(Protocol):
    """What reads one file for a session: `core.tail.Tailer`, or a plan's own (a sample of a big
    log, a read that stops early). Line numbers are the file's; a line whose number is not known
    has one counted from the end (-1: the last line)."""

    @property
    def offset(self) -> int: ...          # bytes of the file read so far

    @property
    def lineno(self) -> int: ...          # lines handed over so far

    @property
    def mtime(self) -> Optional[float]: ...

    @property
    def exists(self) -> bool: ...

    def read(self, final: bool = False, max_bytes: Optional[int] = None, blocks: bool = False) -> Batch: ...


class Session(Protocol):
    """What a plan may ask of the session that reads by it (core/session.py's RunSession)."""

    layout: RunLayout
    state: RunState

    def size(self, path: Path) -> int: ...

    def server_logs(self) -> dict[str, Path]: ...


class ReadingPlan:
    follow = True        # the layout follows the run's files (RunLayout.refresh)
    orphans = True       # servers still running after gym env start ended are looked for

    def info(self, layout: RunLayout) -> RunInfo:
        """Names and settings of the run."""
        return read_info(layout.hydra_dirs, layout.bundle_meta, layout.manifest)

    def wants(self, session: Session, path: Path, server: str) -> bool:
        """Read this file now? (`server`: whose own log it is, else "")"""
        return True

    def reader(self, session: Session, path: Path, server: str) -> Optional[Reader]:
        """A reader of its own for this file (None: a Tailer from where the file was last read)."""
        return None

    def liveness(self, layout: RunLayout) -> procs.Liveness:
        """Whether the run's processes live: a launched run's manifest, else a look for gym
        processes naming the run's files."""
        if layout.manifest:
            return procs.from_manifest(layout.manifest)
        return procs.scan(procs.needles_for(layout.root, layout.rollouts, layout.logs_dir))


FULL = ReadingPlan()

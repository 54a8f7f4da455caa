"""One look at this machine's gym processes for a whole listing.

`gymwatch report` asks, for its one run, which live `gym` processes name the run's files
(core.procs.scan). A listing of a thousand runs asks the same question a thousand times: the
process table is read once here (lazily: a listing of finished, cached runs never reads it) and
each run's question is answered from that, with the same rules (core.procs).
"""

from __future__ import annotations

import os
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Optional

import psutil

from ..core import procs


@dataclass(slots=True)
class _GymProc:
    pid: int
    role: str                                  # env / eval / both
    joined: str                                # its command line
    paths: list[str] = field(default_factory=list)   # its arguments resolved against its cwd, open files: sorted

    def names(self, needle: str) -> bool:
        """Does it name `needle`: in its command line, or by a path at or under it?"""
        if needle in self.joined:
            return True
        paths, base = self.paths, needle.rstrip(os.sep)
        i = bisect_left(paths, base)
        if i < len(paths) and paths[i] == base:
            return True
        i = bisect_left(paths, base + os.sep)           # paths under it sort together, right here
        return i < len(paths) and paths[i].startswith(base + os.sep)


class ProcessSweep:
    def __init__(self) -> None:
        self._procs: Optional[list[_GymProc]] = None
        self._asked: dict[tuple, procs.Liveness] = {}

    def gym_processes(self) -> list[_GymProc]:
        if self._procs is None:
            self._procs = _sweep()
        return self._procs

    def liveness(self, needles: list[str]) -> procs.Liveness:
        """What core.procs.scan(needles) would say, from the one sweep."""
        key = tuple(n for n in needles if n)
        live = self._asked.get(key)
        if live is not None:
            return live
        live = self._asked[key] = procs.Liveness()
        for g in self.gym_processes():
            if not any(g.names(n) for n in key):
                continue
            live.saw(g.role, g.pid)
        return live


def _sweep() -> list[_GymProc]:
    out = []
    for proc, cmd, role in procs.gym_processes():
        g = _GymProc(proc.pid, role, " ".join(cmd))
        try:
            cwd = proc.cwd()
            g.paths = [os.path.normpath(os.path.join(cwd, a.split("=", 1)[-1])) for a in cmd[1:]]
            g.paths += [f.path for f in proc.open_files()]
        except (psutil.Error, OSError):
            pass
        g.paths.sort()
        out.append(g)
    return out

"""The Ray cluster under a run whose services span nodes (`--ray URL`): the dashboard's answers
(core/rayfeed.py) kept in `RunState.ray`, and what they mean for the run's servers, drawn after
every other part settled (core/cluster/raymarks.py says which): a service step or model server on
a node Ray reports dead, or a model server whose Ray actor died, is failed for that reason, its
evidence the row of Ray's answer (the dashboard's URL as its file). Not a server that had exited:
it left the node before Ray's answer speaks of it.

Like settle's, these conclusions are held apart from what the server's own lines and its job made
of it (`servers.hold()` / `lift()`): taken back before the others settle, drawn again after, so a
node that comes back, or a newer answer, leaves no mark behind.
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from ..cluster.ray import RayState
from ..cluster.raymarks import expand_nodelist, host_of, marks
from ..model import EXITED, FAILED, K_MODEL, K_SERVICE, Evidence
from ..servers import hold, lift, set_state
from .writer import Part


class RayCluster(Part):
    def __init__(self, w) -> None:
        super().__init__(w)
        self.names: dict[str, list[str]] = {}
        self.marked: dict[str, tuple[str, Optional[float]]] = {}   # per server: its mark, and since when

    def answer(self, ray: RayState, asked_at: Optional[datetime], names: Optional[dict[str, list[str]]]) -> None:
        self.state.ray, self.state.ray_asked_at = ray, asked_at
        self.names = dict(names or {})
        self.changes.run = True

    def unmark(self) -> None:
        """Before the other parts settle: the servers as they were without Ray's word."""
        for name in self.marked:
            s = self.state.servers.get(name)
            if s is not None:
                lift(s, self.trackers[name])
                s.ray = ""

    def mark(self, now: Optional[float]) -> None:
        """After them: each server Ray speaks against, failed for its reason."""
        ray = self.state.ray
        found = marks(ray, self._placed(), [s.name for s in self.state.servers.values() if s.kind == K_MODEL],
                      self.names) if ray is not None else {}
        before, self.marked = self.marked, {}
        for name, m in found.items():
            s = self.state.servers[name]
            if s.state == EXITED:       # gone from the node before: Ray's word now is not about it
                continue
            hold(s, self.trackers[name])
            own = s.failure_reason if s.state == FAILED and s.failure is not None else ""
            s.ray = m.reason
            s.failure = Evidence(f"{ray.url}{m.path}" if ray else m.path, m.row, m.text,
                                 note=f"Ray's answer{self._when()}")
            s.failure_reason = m.reason + (f"; before that: {own}" if own else "")
            old = before.get(name)
            set_state(s, FAILED, now, m.reason)
            if old is not None and old[0] == m.reason:
                s.state_since = old[1]          # the same mark drawn again: its time stays
            self.marked[name] = (m.reason, s.state_since)
        moved = {n for n in before.keys() | self.marked.keys()
                 if before.get(n, ("",))[0] != self.marked.get(n, ("",))[0]}
        if moved:
            self.changes.servers |= moved
            self.changes.run = True

    def _placed(self) -> dict[str, list[str]]:
        """Per server, the hosts it runs on as the run knows them: the host its URL names, else a
        service step's job's nodes (Slurm's node list), else the host Gym said it listens on."""
        job = self.state.job
        nodes: list[str] = []
        if job is not None and job.links:
            from .jobs import shown_link

            nodes = expand_nodelist(shown_link(job).nodes)
        placed = {}
        for s in self.state.servers.values():
            host = host_of(s.url) or host_of(s.host)
            if host:
                placed[s.name] = [host]
            elif s.kind == K_SERVICE and nodes:
                placed[s.name] = nodes
        return placed

    def _when(self) -> str:
        at = self.state.ray_asked_at
        return f" at {at:%H:%M:%S}" if at is not None else ""

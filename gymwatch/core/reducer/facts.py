"""What the session learns beside the files' lines: names and settings (configs, manifest), files
it did not read, how far its reading got, the run's processes and its files' activity, and what
the head server and `GET /` probes said (`--head`)."""

from __future__ import annotations

from typing import Optional

from .. import gymlines as gl
from ..model import FAILED, READY, RunInfo, Unreadable
from ..servers import set_state
from .writer import Part


class Facts(Part):
    def run_info(self, info: RunInfo) -> None:
        """Names and settings read from Hydra's configs, the manifest or a bundle."""
        self.state.info = info
        self.changes.run = True

    def note(self, text: str) -> None:
        """A file gymwatch did not read, and why."""
        if text not in self.state.notes:
            self.state.notes.append(text)
            self.changes.run = True

    def unreadable(self, file: str, reason: str, rows: bool = False) -> None:
        """A file (or a directory: `file` ends with `/`) that could not be read, and why."""
        known = self.state.unreadable.get(file)
        if known is None or known.reason != reason:
            self.state.unreadable[file] = Unreadable(file, reason, rows)
            self.changes.run = True

    def readable(self, file: str) -> None:
        """A file read after all (its permissions were fixed): no longer unreadable."""
        if self.state.unreadable.pop(file, None) is not None:
            self.changes.run = True

    def read_progress(self, behind: bool, now: Optional[float]) -> None:
        """Whether files are still being read to their end (a budgeted poll), and the clock."""
        self.state.reading = behind
        self.state.now = now

    def processes(self, parent: Optional[bool], collector: Optional[bool], parent_exit: Optional[int],
                  collector_exit: Optional[int], checked: bool) -> None:
        """What the process check found: True alive, False ended, None not seen (maybe elsewhere)."""
        p, c, a = self.state.parent, self.state.collector, self.state.activity
        if (p.alive, c.alive, p.exit_code, c.exit_code) != (parent, collector, parent_exit, collector_exit):
            self.changes.run = True
        p.alive, c.alive, p.exit_code, c.exit_code = parent, collector, parent_exit, collector_exit
        a.processes_checked = checked
        a.processes_seen = bool(parent or collector)

    def process_facts(self, live: dict[str, dict]) -> None:
        """psutil facts of the servers' processes (a launched run): those no longer running keep
        their last facts with alive=False."""
        for name, s in self.state.servers.items():
            facts = live.get(name)
            if facts is None and s.process and s.process.get("alive"):
                facts = {**s.process, "alive": False}
            if facts is not None and facts != s.process:
                s.process = facts
                self.changes.servers.add(name)

    def orphans(self, alive: dict[str, int]) -> None:
        """Servers whose process still runs although gym env start has ended (name -> pid)."""
        for name, s in self.state.servers.items():
            orphaned = name in alive
            if orphaned != s.orphaned:
                s.orphaned = orphaned
                if orphaned and s.state != FAILED:
                    s.phase = f"still running after Gym ended (pid {alive[name]}): an orphan holding its port"
                self.changes.servers.add(name)

    def file_activity(self, last_write: Optional[float], wall_now: float,
                      writes: Optional[dict[str, float]] = None, rows_write: Optional[float] = None,
                      results_write: Optional[float] = None, inputs_write: Optional[float] = None,
                      collector_write: Optional[float] = None) -> None:
        """The run's files' last writes (`writes`: each file's, by the name evidence gives it), and
        those of its results (rollouts, failures), its materialized inputs and the collector's output."""
        a = self.state.activity
        was_quiet = a.quiet
        a.writes, a.rows_write, a.checked_at = writes or {}, rows_write, wall_now
        a.results_write, a.inputs_write, a.collector_write = results_write, inputs_write, collector_write
        a.last_write = last_write
        a.quiet_for = None if last_write is None else max(0.0, wall_now - last_write)
        if a.quiet != was_quiet:
            self.changes.run = True

    def server_instances(self, instances: list) -> None:
        """Apply the head server's `/server_instances` list (name, host, port, pid, url)."""
        for inst in instances:
            if not isinstance(inst, dict) or not isinstance(inst.get("process_name") or inst.get("name"), str):
                continue
            s = self.w.server(inst.get("process_name") or inst["name"])
            s.kind = gl.SERVER_TYPE_KIND.get(str(inst.get("server_type")), s.kind)
            if isinstance(inst.get("port"), int):
                s.port = inst["port"]
                self.state.port_owner[s.port] = s.name
            s.host = inst.get("host") if isinstance(inst.get("host"), str) else s.host
            s.url = inst.get("url") if isinstance(inst.get("url"), str) else s.url
            s.pid = s.pid or (inst.get("pid") if isinstance(inst.get("pid"), int) else None)   # a wrapper's

    def http_answer(self, name: str, ok: bool) -> None:
        """Any HTTP response from `GET /` proves a server is up (docs/gym-formats.md §3)."""
        s = self.w.server(name)
        s.http_ok = ok
        if ok and s.state not in (READY, FAILED):
            set_state(s, READY, self.w.clock(), "answering HTTP")
            if s.ready_at is None:
                s.ready_at = self.w.clock()

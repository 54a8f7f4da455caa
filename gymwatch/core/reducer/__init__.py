"""The one reducer: the only writer of the RunState. Every line and row of every file, what the
session learns beside them (configs, processes, file activity, probes) and what the whole state
means (`settle`) go through the `Reducer` below, one method per kind of fact, which hands it to
the part of this package that owns its source:

  servers.py   a server's own lines (its log, or its prefixed lines in Gym's captured output)
  streams.py   Gym's captured output: `gym env start`'s and `gym eval run`'s own lines
  rows.py      rollouts, failures sidecar, materialized inputs, Gym's health files
  facts.py     configs, notes, processes, file activity, head-server probes
  jobs.py      a submitted run's Slurm job: its own files' lines and Slurm's answers
  raycluster.py  the Ray cluster under the run (`--ray`): its dashboard's answers, the servers they mark
  settle.py    what the whole state means, after every poll
  writer.py    the state, `Changes`, and the writes those parts share

It records what changed (`Changes`) so views update only what moved. The report and the live
screen both read the state this builds, so they cannot disagree.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from .. import records
from ..model import Evidence, GymScore, RunInfo, RunState, Server
from .facts import Facts
from .rows import Rows
from .servers import ServerLines
from .settle import Settle
from .streams import StreamLines
from .writer import Changes, Writer

if TYPE_CHECKING:      # (a submitted run's part, and what it reads, are imported when one is read)
    from ..cluster.files import JobFile
    from ..cluster.jobscript import JobScript
    from ..cluster.ray import RayState
    from ..cluster.record import Benchmark
    from ..cluster.slurmcli import SlurmPoll
    from .jobs import JobLines
    from .raycluster import RayCluster

__all__ = ["Changes", "Reducer"]


class Reducer:
    def __init__(self, state: RunState, clock: Callable[[], Optional[float]] = lambda: None):
        self.w = Writer(state, clock)
        self._servers = ServerLines(self.w)
        self._streams = StreamLines(self.w, self._servers)
        self._rows = Rows(self.w)
        self._facts = Facts(self.w)
        self._jobs: Optional["JobLines"] = None      # a submitted run's job (job_known() makes it)
        self._ray: Optional["RayCluster"] = None     # the Ray cluster under it (ray_answer() makes it)
        self._settle = Settle(self.w)

    @property
    def state(self) -> RunState:
        return self.w.state

    @property
    def changes(self) -> Changes:
        """What changed so far (`take_changes()` hands it over)."""
        return self.w.changes

    def take_changes(self) -> Changes:
        """What changed since the last call (the views redraw that), and the lines read."""
        return self.w.changes.take()

    # --- reading the run's files ------------------------------------------------------------
    def lines_read(self, file: str, n: int) -> None:
        """The session read `n` new lines of `file` (relative), whatever they did to the model."""
        self.w.lines_read(file, n)

    def file_error(self, file: str, reason: str) -> None:
        """A file of the run could not be used whole (its reason: once)."""
        self.w.file_error(file, reason)

    def unreadable(self, file: str, reason: str, rows: bool = False) -> None:
        """A file (or a directory: `file` ends with `/`) that could not be read, and why; `rows`:
        it holds the run's rows."""
        self._facts.unreadable(file, reason, rows)

    def readable(self, file: str) -> None:
        """A file read after all: no longer unreadable."""
        self._facts.readable(file)

    def last_bad_row(self, file: str) -> Optional[int]:
        """The last line of a rows file that was no row, if any."""
        return self.w.bad_rows.get(file)

    def cut_row(self, ev: Optional[Evidence]) -> None:
        """The rollouts file's last line when it is no whole row (cut mid-row), else None."""
        self._rows.cut_row(ev)

    def server_log_line(self, name: str, file: str, lineno: int, text: str) -> None:
        """A line of `<logs>/<name>.log`."""
        self._servers.line(name, file, lineno, text)

    def server_log_block(self, stem: str, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of `<logs>/<stem>.log` (whole lines, each ending with a newline, none
        holding a \\r): as if each went to `server_log_line`."""
        self._servers.block(stem, file, first, block)

    def servers_own_logs(self, stems: set[str]) -> bool:
        """The servers' own logs now (by file stem). False when a server's own log appeared after
        its lines were read from Gym's captured output: the run must be read afresh from there."""
        if stems & self._servers.fed_from_merged:
            return False
        self._servers.own_logs = set(stems)
        return True

    def stream_line(self, role: str, file: str, lineno: int, text: str) -> None:
        """A line of Gym's captured output (`role`: core/layout.py's ENV, EVAL, BOTH, VALIDATE)."""
        self._streams.line(role, file, lineno, text)

    def stream_block(self, role: str, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of Gym's captured output (whole lines, none holding a \\r): as if each
        went to `stream_line`."""
        self._streams.block(role, file, first, block)

    def rollout_row(self, file: str, lineno: int, raw: bytes) -> None:
        """One line of a rollouts file."""
        self._rows.rollouts(file, lineno, [records.one_row(records.rollout_facts, raw)])

    def rollout_block(self, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of a rollouts file (whole lines, each ending with a newline)."""
        self._rows.rollouts(file, first, records.rollout_rows(block))

    def rollout_rows(self, file: str, first: int, rows: list[records.Row]) -> None:
        """Lines `first`.. of a rollouts file, decoded (core/records.py)."""
        self._rows.rollouts(file, first, rows)

    def failure_row(self, file: str, lineno: int, raw: bytes) -> None:
        """One line of the failures sidecar."""
        self._rows.failures(file, lineno, [records.one_row(records.failure_facts, raw)])

    def failure_block(self, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of the failures sidecar (whole lines)."""
        self._rows.failures(file, first, records.failure_rows(block))

    def materialized_row(self, file: str, lineno: int, raw: bytes) -> None:
        """One line of the materialized inputs."""
        self._rows.inputs(file, lineno, [records.one_row(records.materialized_facts, raw)])

    def materialized_block(self, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of the materialized inputs (whole lines)."""
        self._rows.inputs(file, first, records.input_rows(block))

    def materialized_rows(self, file: str, first: int, rows: list[records.Row]) -> None:
        """Lines `first`.. of the materialized inputs, decoded (core/records.py)."""
        self._rows.inputs(file, first, rows)

    def verdict_row(self, file: str, lineno: int, raw: bytes) -> None:
        self._rows.verdict_row(file, lineno, raw)

    def health_summary(self, file: str, data: bytes) -> None:
        self._rows.health_summary(file, data)

    @property
    def health_file_totals(self) -> bool:
        """Gym's quality_summary.json has been read (it is read once)."""
        return self.w.health_file_totals

    def collection_began(self) -> None:
        self._rows.collection_began()

    def aggregate_done(self, scores: Optional[list[GymScore]] = None) -> None:
        """Gym's aggregate metrics file is whole (the collection finished); `scores`: its entries
        (core/score.py)."""
        self._rows.aggregate_done(scores or [])

    # --- a submitted run's Slurm job ----------------------------------------------------------
    def job_known(self, bench: "Benchmark", script: Optional["JobScript"], files: Sequence["JobFile"],
                  refused_at: Optional[Evidence] = None) -> None:
        """The run is one benchmark of a submission: its job.sh read, its job's files as listed
        now (again as the chain's links appear), the record's line of sbatch's refusal if any."""
        self._job_part().known(bench, script, files, refused_at)

    def job_line(self, file: "JobFile", lineno: int, text: str) -> None:
        """A line of one of the job's own files (its batch log, a step's log, the chain file)."""
        self._job_part().line(file, lineno, text)

    def job_block(self, file: "JobFile", first: int, block: bytes) -> None:
        """Lines `first`.. of one of the job's own files (whole lines, each ending with a newline):
        as if each went to `job_line`."""
        self._job_part().block(file, first, block)

    def slurm_answer(self, poll: "SlurmPoll", asked_at: Optional[datetime] = None) -> None:
        """What Slurm said of the submission's jobs (`asked_at`: when, local time, as Slurm's times)."""
        self._job_part().answer(poll, asked_at)

    def job_ids(self) -> set[str]:
        """The Slurm jobs of the run's chain its files name so far."""
        return self._jobs.job_ids() if self._jobs is not None else set()

    def _job_part(self) -> "JobLines":
        if self._jobs is None:
            from .jobs import JobLines

            self._jobs = JobLines(self.w)
        return self._jobs

    # --- the Ray cluster under the run (`--ray`) -----------------------------------------------
    def ray_answer(self, ray: "RayState", asked_at: Optional[datetime] = None,
                   names: Optional[dict[str, list[str]]] = None) -> None:
        """What the Ray dashboard said (`asked_at`: when, local time; `names`: per node IP, the
        hostnames it resolves to), applied to the servers at the next settle."""
        if self._ray is None:
            from .raycluster import RayCluster

            self._ray = RayCluster(self.w)
        self._ray.answer(ray, asked_at, names)

    # --- what the session learns beside the files' lines -----------------------------------
    def run_info(self, info: RunInfo) -> None:
        self._facts.run_info(info)

    def note(self, text: str) -> None:
        self._facts.note(text)

    def read_progress(self, behind: bool, now: Optional[float]) -> None:
        self._facts.read_progress(behind, now)

    def processes(self, parent: Optional[bool], collector: Optional[bool], parent_exit: Optional[int],
                  collector_exit: Optional[int], checked: bool) -> None:
        self._facts.processes(parent, collector, parent_exit, collector_exit, checked)

    def process_facts(self, live: dict[str, dict]) -> None:
        self._facts.process_facts(live)

    def orphans(self, alive: dict[str, int]) -> None:
        self._facts.orphans(alive)

    def file_activity(self, last_write: Optional[float], wall_now: float,
                      writes: Optional[dict[str, float]] = None, rows_write: Optional[float] = None,
                      results_write: Optional[float] = None, inputs_write: Optional[float] = None,
                      collector_write: Optional[float] = None) -> None:
        self._facts.file_activity(last_write, wall_now, writes, rows_write, results_write, inputs_write,
                                  collector_write)

    def server_instances(self, instances: list) -> None:
        self._facts.server_instances(instances)

    def http_answer(self, name: str, ok: bool) -> None:
        self._facts.http_answer(name, ok)

    def server(self, name: str) -> Server:
        """A server named by a source outside the run's files (a launcher's plan, a test)."""
        return self.w.server(name)

    # --- what the whole state means ---------------------------------------------------------
    def settle(self, now: Optional[float] = None) -> None:
        if self._ray is not None:      # Ray's word taken back first, drawn again last
            self._ray.unmark()
        if self._jobs is not None:
            self._jobs.settle(now)
        self._settle.settle(now)
        if self._ray is not None:
            self._ray.mark(now)

    def carry_times(self, old: RunState) -> None:
        self._settle.carry_times(old)

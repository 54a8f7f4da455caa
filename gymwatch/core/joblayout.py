"""One benchmark of a submission (`gym eval submit`) read as a run: its layout, kind `slurm_job`.

- root: the submission dir, so evidence names `mcqa/logs/driver-17.log:12`, as core/cluster's does;
- rollouts: where job.sh's driver writes them (`+output_jsonl_fpath`), read relative to where the
  record is;
- no logs dir: the job's `logs/` holds its service steps' and driver's logs, not Gym's servers';
- Gym's captured output: the driver log of the chain's latest link that has written one, the
  whole output of a one-process `gym eval run` (it serves and collects: role BOTH; its servers'
  lines carry their `(name) ` prefix). Each link's driver is another Gym process: when a newer
  link's appears, the run is read afresh from there;
- Hydra's dirs under the job dir (`outputs/<date>/<time>/.hydra`, one per link's driver);
- the job's own files (`JobFiles`: batch log, service logs and driver log per link, the chain
  file: `cluster.files.job_files()`), listed again as the chain's links appear.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .cluster import jobscript
from .cluster.files import DRIVER, SERVICE, JobFile, job_files, local_path
from .cluster.jobscript import JobScript
from .cluster.record import JOB_SCRIPT, Benchmark, Submission, job_id_key, refusal_line
from .layout import BOTH, Refreshed, RunLayout, Stream, find_hydra_dirs
from .model import Evidence

SLURM_JOB = "slurm_job"


@dataclass
class JobFiles:
    """The job's side of a `slurm_job` layout: what it is (its submission, benchmark and job.sh)
    and its own files as now listed."""

    sub: Submission
    bench: Benchmark
    script: Optional[JobScript]
    refused_at: Optional[Evidence] = None
    files: list[JobFile] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)      # the chain's links its files name (the session says)

    def relist(self) -> bool:
        """List the job's files again (new links); True when they changed."""
        files = job_files(self.sub, self.bench, self.script, self.ids)
        if files == self.files:
            return False
        self.files = files
        return True

    def driver(self) -> Optional[JobFile]:
        """The driver log of the latest link that has written one: Gym's output now."""
        written = [f for f in self.files if f.kind == DRIVER and _has_output(f.path)]
        return max(written, key=lambda f: job_id_key(f.job_id)) if written else None

    def service_log(self, name: str) -> Optional[Path]:
        """A service step's log: the latest link's that exists."""
        logs = [f for f in self.files if f.kind == SERVICE and f.step == name and f.path.is_file()]
        return max(logs, key=lambda f: job_id_key(f.job_id)).path if logs else None

    def dirs(self) -> list[Path]:
        """Where the job's files are written (for a watcher)."""
        return sorted({f.path.parent for f in self.files})

    def refresh(self, layout: RunLayout, whole: bool) -> Refreshed:
        """The job's files as they are now: a link's files appear, a newer link's driver starts
        (another Gym process: the run is read afresh from its log)."""
        out = Refreshed()
        self.relist()
        driver = self.driver()
        streams = [Stream(driver.path, BOTH, True)] if driver is not None else []
        if [s.path for s in streams] != [s.path for s in layout.streams]:
            out.new = bool(layout.streams)
            layout.streams = streams
        if whole and self.bench.local_dir is not None and self.bench.local_dir.is_dir():
            layout.hydra_dirs = find_hydra_dirs(self.bench.local_dir)
            out.names = layout.names_sig() != layout._names_sig
        return out


def _has_output(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def job_layout(sub: Submission, bench: Benchmark) -> RunLayout:
    """The layout of one benchmark of `sub`, as its files are now."""
    local = bench.local_dir if bench.local_dir is not None and bench.local_dir.is_dir() else None
    script = jobscript.read(local / JOB_SCRIPT) if local is not None and (local / JOB_SCRIPT).is_file() else None
    root = sub.root or (local.parent if local is not None else None) or (
        sub.record.parent if sub.record is not None else Path.cwd())
    rollouts = None
    if local is not None and script is not None and script.driver is not None and script.driver.rollouts:
        rollouts = local_path(bench, script.driver.rollouts)
    layout = RunLayout(root=root, kind=SLURM_JOB, rollouts=rollouts)
    layout.job = JobFiles(sub, bench, script, refusal_line(sub, bench))
    layout.refresh()
    return layout

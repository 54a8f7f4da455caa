"""A benchmark's files: which to read, and how each line of each becomes facts.

Per chain link (Slurm job id): the batch log (`slurm-<id>.out`, or job.sh's `--output`), each
service step's log and the driver's (their srun `--output`, `$SLURM_JOB_ID` filled in). Per
benchmark: `job.sh` (read whole, `jobscript.read`), `.gym_job_chain` (one link id a line), and the
rollouts the driver writes (read by the run reducer, named here so it knows where). Files that do
not exist yet are listed too: the caller tails them when they appear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, Optional

from ..model import Evidence
from . import batchlog, steplog
from .facts import ChainEntry, Fact
from .jobscript import DEFAULT_BATCH_LOG, JobScript, expand
from .record import JOB_SCRIPT, Benchmark, Submission, job_id_key

JOBSCRIPT, BATCH, SERVICE, DRIVER, CHAIN, ROLLOUTS = "jobscript", "batch", "service", "driver", "chain", "rollouts"
CHAIN_FILE = ".gym_job_chain"
_DEFAULT_DRIVER_LOG = "logs/driver-$SLURM_JOB_ID.log"


@dataclass(frozen=True)
class JobFile:
    path: Path                  # where it is read here
    name: str                   # its name in evidence: relative to the submission dir
    kind: str                   # JOBSCRIPT, BATCH, SERVICE, DRIVER, CHAIN or ROLLOUTS
    job_id: str = ""            # the chain link it belongs to (BATCH, SERVICE, DRIVER)
    step: str = ""              # the service's name, or "driver"

    def facts(self, line: int, text: str) -> tuple[Fact, ...]:
        """The facts in line `line` (1-based) of this file; JOBSCRIPT and ROLLOUTS give none."""
        text = text.rstrip("\r\n")
        ev = Evidence(self.name, line, text)
        if self.kind == BATCH:
            return batchlog.facts(self.job_id, ev)
        if self.kind in (SERVICE, DRIVER):
            return steplog.facts(self.job_id, self.step, ev)
        if self.kind == CHAIN and text.strip():
            return (ChainEntry(text.strip(), ev, position=line),)
        return ()


def job_files(sub: Submission, bench: Benchmark, script: Optional[JobScript],
              job_ids: Iterable[str] = ()) -> list[JobFile]:
    """Every file of `bench` to read, for its known links (`job_ids`, its first job, the batch
    logs already in its dir). Empty when its files are not on this machine."""
    local = bench.local_dir
    if local is None:
        return []
    name = _namer(sub, local)
    out = [JobFile(local / JOB_SCRIPT, name(local / JOB_SCRIPT), JOBSCRIPT),
           JobFile(local / CHAIN_FILE, name(local / CHAIN_FILE), CHAIN)]
    batch = script.batch_log if script else DEFAULT_BATCH_LOG
    job_name = script.job_name if script else f"gym-{bench.name}"
    ids = set(job_ids) | ({bench.first_job_id} if bench.first_job_id else set()) | set(
        _ids_on_disk(local, batch, job_name))
    for job_id in sorted(ids, key=job_id_key):
        path = local_path(bench, expand(batch, job_id, job_name))
        out.append(JobFile(path, name(path), BATCH, job_id))
        for service in script.services if script else ():
            if service.output:
                path = local_path(bench, expand(service.output, job_id, job_name))
                out.append(JobFile(path, name(path), SERVICE, job_id, service.name))
        driver = script.driver.output if script and script.driver and script.driver.output else _DEFAULT_DRIVER_LOG
        path = local_path(bench, expand(driver, job_id, job_name))
        out.append(JobFile(path, name(path), DRIVER, job_id, steplog.DRIVER))
    if script and script.driver and script.driver.rollouts:
        path = local_path(bench, script.driver.rollouts)
        out.append(JobFile(path, name(path), ROLLOUTS))
    return _unique(out)


def local_path(bench: Benchmark, written: str) -> Path:
    """A path as job.sh wrote it (relative to the job dir, or absolute on the cluster), here."""
    assert bench.local_dir is not None
    posix = PurePosixPath(written)
    if not posix.is_absolute():
        return bench.local_dir / posix
    try:
        return bench.local_dir / posix.relative_to(PurePosixPath(bench.job_dir))
    except ValueError:
        return Path(written)


def _namer(sub: Submission, local: Path) -> Callable[[Path], str]:
    root = sub.root

    def name(path: Path) -> str:
        for base in (root, local.parent):
            if base is not None:
                try:
                    return str(path.relative_to(base))
                except ValueError:
                    pass
        return str(path)
    return name


def _ids_on_disk(local: Path, template: str, job_name: str) -> list[str]:
    """Job ids of the batch logs already written (the template's `%j`, in a dir relative to the job dir)."""
    pattern = PurePosixPath(template)
    if pattern.is_absolute() or "%j" not in pattern.name or "%" in str(pattern.parent):
        return []
    name = re.escape(pattern.name).replace("%j", r"(\d+)").replace("%x", re.escape(job_name) if job_name else ".*")
    regex = re.compile(f"^{name}$")
    try:
        return [m.group(1) for p in (local / pattern.parent).iterdir() if (m := regex.match(p.name))]
    except OSError:
        return []


def _unique(files: list[JobFile]) -> list[JobFile]:
    """One entry a path: a log named without the job id is every link's, and holds the latest's."""
    latest: dict[Path, JobFile] = {}
    for f in files:
        latest.pop(f.path, None)
        latest[f.path] = f
    return sorted(latest.values(), key=files.index)

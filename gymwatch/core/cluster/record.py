"""What the user named, resolved into a `Submission`: one `gym eval submit` and its benchmarks.

Accepted: a submission dir (`<gym_job_id>/` with `gym-job.json`), one benchmark's job dir inside
it, a record file (the manifest, or the local index's `<gym_job_id>.json`), or a bare gym job
id looked up in the local index (`${XDG_CACHE_HOME:-~/.cache}/nemo-gym/jobs/`).

Every path in a record is absolute on the machine that ran the jobs. They are read relative to
where the record is (the submission dir is the manifest's own dir), so a copied bundle reads
its own files; an index record's paths are used as written when they exist here. Gym writes the
manifest last, so a submission dir without one (the jobs already running) is read from its
benchmark dirs, and from the index's copy when this machine has it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Optional

from ..model import Evidence

MANIFEST = "gym-job.json"
JOB_SCRIPT = "job.sh"
SCHEMA_VERSION = 1
GYM_JOB_ID_RE = re.compile(r"^gym-job-\d{8}T\d{6}Z-[0-9a-f]+$")
_BATCH_LOG_RE = re.compile(r"^slurm-(\d+)\.out$")


class SubmissionError(ValueError):
    """Input that is not a submission, in one line naming the file."""


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of a submission: one Slurm batch job, or a chain of them (auto-resume)."""

    name: str
    job_dir: str                  # as recorded: the job's --chdir on the cluster (Slurm's WorkDir)
    local_dir: Optional[Path]     # where its files are read here; None: not on this machine
    first_job_id: Optional[str]   # the record holds only a chain's first job
    sbatch_error: Optional[str]   # sbatch refused it (first_job_id is then None)


@dataclass(frozen=True)
class Submission:
    gym_job_id: str
    version: str                  # the Gym that submitted it ("" unknown)
    submitted_at: str             # UTC, ISO with Z, as Gym wrote it
    cluster: str
    executor: str                 # "slurm"; a record of another executor has no Slurm to ask
    hostname: Optional[str]       # set: submitted over SSH to it, and Slurm is asked there
    submitted_by: str
    run_dir: str                  # as recorded
    root: Optional[Path]          # the submission dir here (evidence file names are relative to it)
    record: Optional[Path]        # the record read, None when there was none
    benchmarks: tuple[Benchmark, ...]
    focus: Optional[str] = None   # the benchmark whose job dir the user named
    notes: tuple[str, ...] = field(default=())

    def benchmark(self, name: str) -> Benchmark:
        for b in self.benchmarks:
            if b.name == name:
                return b
        raise KeyError(name)


def index_dir(environ: Optional[dict[str, str]] = None) -> Path:
    """Gym's local index of submissions on this machine."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nemo-gym" / "jobs"


def resolve(target: str | Path, *, index: Optional[Path] = None) -> Submission:
    """The submission `target` names. Raises SubmissionError (one line, naming the file)."""
    index = index_dir() if index is None else index
    path = Path(target).expanduser()
    if path.is_file():
        return _from_record_file(path)
    if path.is_dir():
        return _from_dir(path.resolve(), index)
    text = str(target)
    if "/" not in text and text:
        indexed = index / f"{text.removesuffix('.json')}.json"
        if indexed.is_file():
            return _from_record_file(indexed)
        raise SubmissionError(f"{text}: no such file or dir, and no record of it in Gym's job index {indexed}")
    raise SubmissionError(f"{text}: no such file or directory")


def _from_record_file(path: Path) -> Submission:
    payload = load_record(path)
    if path.name == MANIFEST:
        return _submission(payload, path.resolve(), root=path.resolve().parent)
    run_dir = Path(payload["run_dir"]) if payload.get("run_dir") else None
    if run_dir is not None and (run_dir / MANIFEST).is_file():
        return _submission(load_record(run_dir / MANIFEST), run_dir / MANIFEST, root=run_dir,
                           notes=(f"read the submission's own record, {run_dir / MANIFEST}",))
    root = run_dir if run_dir is not None and run_dir.is_dir() else None
    note = () if root else (f"its files are not on this machine (run dir {payload.get('run_dir')})",)
    return _submission(payload, path.resolve(), root=root, notes=note)


def _from_dir(path: Path, index: Path) -> Submission:
    if (path / MANIFEST).is_file():
        return _from_manifest_or_scan(path, index)
    parent = path.parent
    if (path / JOB_SCRIPT).is_file() or _batch_logs(path):
        if (parent / MANIFEST).is_file() or GYM_JOB_ID_RE.match(parent.name) or _benchmark_dirs(parent):
            sub = _from_manifest_or_scan(parent, index)
            if any(b.name == path.name for b in sub.benchmarks):
                return _focused(sub, path.name)
        return _lone_benchmark(path)
    if GYM_JOB_ID_RE.match(path.name) or _benchmark_dirs(path):
        return _from_manifest_or_scan(path, index)
    raise SubmissionError(f"{path}: not a Gym submission: no {MANIFEST} and no benchmark dir with a {JOB_SCRIPT}")


def _focused(sub: Submission, name: str) -> Submission:
    return replace(sub, focus=name)


def _from_manifest_or_scan(root: Path, index: Path) -> Submission:
    manifest = root / MANIFEST
    notes: tuple[str, ...] = ()
    if manifest.is_file():
        try:
            return _submission(load_record(manifest), manifest, root=root)
        except SubmissionError as e:
            if not _benchmark_dirs(root):
                raise
            notes = (f"{e}; read from its benchmark dirs instead",)
    indexed = index / f"{root.name}.json"
    if indexed.is_file():
        try:
            sub = _submission(load_record(indexed), indexed, root=root)
            return replace(sub, notes=sub.notes + notes + (
                f"no {MANIFEST} yet (Gym writes it last): read Gym's job index {indexed}",))
        except SubmissionError:
            pass
    return _scanned(root, notes)


def _scanned(root: Path, notes: tuple[str, ...]) -> Submission:
    names = _benchmark_dirs(root)
    if not names:
        raise SubmissionError(f"{root}: not a Gym submission: no {MANIFEST} and no benchmark dir with a {JOB_SCRIPT}")
    benches = tuple(Benchmark(name=n, job_dir=str(root / n), local_dir=root / n,
                              first_job_id=_first_job_seen(root / n), sbatch_error=None) for n in names)
    note = notes or (f"no {MANIFEST} (Gym writes it last): benchmarks read from their job dirs",)
    return Submission(gym_job_id=root.name, version="", submitted_at="", cluster="", executor="slurm",
                      hostname=None, submitted_by="", run_dir=str(root), root=root, record=None,
                      benchmarks=benches, notes=note)


def _lone_benchmark(path: Path) -> Submission:
    """A job dir copied without its submission: the benchmark alone, rooted at its parent."""
    bench = Benchmark(name=path.name, job_dir=str(path), local_dir=path,
                      first_job_id=_first_job_seen(path), sbatch_error=None)
    return Submission(gym_job_id=path.parent.name, version="", submitted_at="", cluster="",
                      executor="slurm", hostname=None, submitted_by="", run_dir=str(path.parent),
                      root=path.parent, record=None, benchmarks=(bench,), focus=path.name,
                      notes=(f"no {MANIFEST} beside this job dir: read as a lone benchmark",))


def load_record(path: Path) -> dict:
    """A record's JSON, checked for the fields gymwatch reads. Raises SubmissionError."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise SubmissionError(f"{path}: cannot read it: {e.strerror or e}") from None
    try:
        payload = json.loads(raw)
    except ValueError as e:
        where = f" (line {e.lineno})" if isinstance(e, json.JSONDecodeError) else ""
        raise SubmissionError(f"{path}: not a Gym job record: not valid JSON{where}") from None
    if not isinstance(payload, dict):
        raise SubmissionError(f"{path}: not a Gym job record: a JSON {type(payload).__name__}, not an object")
    if not isinstance(payload.get("gym_job_id"), str):
        raise SubmissionError(f"{path}: not a Gym job record: no gym_job_id")
    benches = payload.get("benchmarks")
    if not isinstance(benches, list) or not all(
            isinstance(b, dict) and isinstance(b.get("benchmark"), str) for b in benches):
        raise SubmissionError(f"{path}: not a Gym job record: `benchmarks` is not a list of benchmarks")
    return payload


def _submission(payload: dict, record: Path, *, root: Optional[Path], notes: tuple[str, ...] = ()) -> Submission:
    run_dir = _text(payload.get("run_dir"))
    schema = payload.get("schema_version")
    if isinstance(schema, int) and schema > SCHEMA_VERSION:
        notes += (f"written by a newer Gym (record schema {schema}); read as schema {SCHEMA_VERSION}",)
    benches = tuple(_benchmark(b, run_dir, root) for b in payload["benchmarks"])
    return Submission(
        gym_job_id=payload["gym_job_id"], version=_text(payload.get("gym_version")),
        submitted_at=_text(payload.get("submitted_at")), cluster=_text(payload.get("cluster")),
        executor=_text(payload.get("executor")) or "slurm", hostname=_text(payload.get("hostname")) or None,
        submitted_by=_text(payload.get("submitted_by")), run_dir=run_dir, root=root, record=record,
        benchmarks=benches, notes=notes)


def _benchmark(entry: dict, run_dir: str, root: Optional[Path]) -> Benchmark:
    name = entry["benchmark"]
    job_dir = _text(entry.get("job_dir")) or (f"{run_dir}/{name}" if run_dir else name)
    job_id = entry.get("job_id")
    return Benchmark(name=name, job_dir=job_dir, local_dir=_local_dir(job_dir, run_dir, root),
                     first_job_id=str(job_id) if job_id not in (None, "") else None,
                     sbatch_error=_text(entry.get("error")) or None)


def _local_dir(job_dir: str, run_dir: str, root: Optional[Path]) -> Optional[Path]:
    """Where a recorded job dir is on this machine: under the record's root, else as written."""
    if root is not None:
        rel = _relative(job_dir, run_dir)
        return root / rel if rel is not None else root / PurePosixPath(job_dir).name
    return Path(job_dir) if job_dir and Path(job_dir).is_dir() else None


def _relative(path: str, base: str) -> Optional[str]:
    if not path or not base:
        return None
    try:
        rel = PurePosixPath(path).relative_to(PurePosixPath(base))
    except ValueError:
        return None
    return str(rel) if str(rel) != "." else None


def _benchmark_dirs(root: Path) -> list[str]:
    try:
        return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / JOB_SCRIPT).is_file())
    except OSError:
        return []


def _batch_logs(job_dir: Path) -> list[str]:
    try:
        return sorted((m.group(1) for p in job_dir.iterdir() if (m := _BATCH_LOG_RE.match(p.name))), key=job_id_key)
    except OSError:
        return []


def _first_job_seen(job_dir: Path) -> Optional[str]:
    """Without a record: the chain file's first id, else the oldest batch log's."""
    try:
        first = next((ln.strip() for ln in (job_dir / ".gym_job_chain").read_text().splitlines() if ln.strip()), "")
    except OSError:
        first = ""
    if first:
        return first
    logs = _batch_logs(job_dir)
    return logs[0] if logs else None


def job_id_key(job_id: str) -> tuple[int, str]:
    """Slurm job ids in submission order (numeric; anything else after them)."""
    return (int(job_id), "") if job_id.isdigit() else (1 << 62, job_id)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def refusal_line(sub: Submission, bench: Benchmark) -> Optional[Evidence]:
    """The line of the record that holds sbatch's refusal of `bench` (its `"error"`), as evidence:
    the file named relative to the submission dir. None when it was not refused or cannot be read."""
    if not bench.sbatch_error or sub.record is None:
        return None
    try:
        lines = sub.record.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    quoted = json.dumps(bench.sbatch_error)
    try:
        name = str(sub.record.relative_to(sub.root)) if sub.root is not None else str(sub.record)
    except ValueError:
        name = str(sub.record)
    for n, line in enumerate(lines, 1):
        if '"error"' in line and quoted in line:
            return Evidence(name, n, line.strip())
    return Evidence(name, 0, bench.sbatch_error, note="sbatch's refusal, in the record")

"""The recorded `gym eval submit` runs (tests/fixtures/gym-0.7.0-slurm*/<case>/), for the tests that
read them: where each case is, the run dir as it was at any recorded moment (`_meta/files.log`),
and what Slurm answered then (`_meta/squeue_snapshots.log`) or at the end (`scontrol/*-final.txt`
and `sacct.txt`)."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

from gymwatch.core.cluster.slurmcli import SlurmPoll, parse_sacct, parse_scontrol, parse_squeue

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = FIXTURES / "gym-0.7.0-slurm-recorded"     # by scripts/record_submission.py
SHARED = FIXTURES / "gym-0.7.0-slurm"                # recorded by hand, before the recorder
CASES = {p.name: p for root in (RECORDED, SHARED) for p in sorted(root.iterdir()) if (p / "_meta").is_dir()}


def run_dir(case: str) -> Path:
    """The case's submission dir, as copied (`<gym_job_id>/`)."""
    return next(CASES[case].glob("gym-job-*"))


def final_poll(case: str) -> SlurmPoll:
    """Slurm's last word on the case's jobs: scontrol at the end, sacct's merged over it."""
    meta = CASES[case] / "_meta"
    jobs = {}
    for path in sorted((meta / "scontrol").glob("*-final.txt")):
        for job in parse_scontrol(path.read_text()):
            jobs[job.job_id] = job
    if (meta / "sacct.txt").is_file():
        for job in parse_sacct((meta / "sacct.txt").read_text()):
            jobs[job.job_id] = jobs[job.job_id].merged(job) if job.job_id in jobs else job
    return SlurmPoll(jobs=jobs, accounting=(meta / "sacct.txt").is_file())


def snapshots(case: str) -> list[tuple[float, str]]:
    """(seconds since submit, squeue's output with its header) for each recorded squeue call."""
    text = (CASES[case] / "_meta" / "squeue_snapshots.log").read_text()
    out = []
    for chunk in text.split("--- t=")[1:]:
        head, _, body = chunk.partition("\n")
        out.append((float(head), body))
    return out


def squeue_at(case: str, t: float) -> SlurmPoll | None:
    """What squeue said at `t` (its last call by then); None before the first."""
    said = [body for when, body in snapshots(case) if when <= t]
    return SlurmPoll(jobs={j.job_id: j for j in parse_squeue(said[-1])}) if said else None


def growth(case: str) -> list[tuple[float, dict[str, int]]]:
    """(seconds since submit, every file of the run dir with its size then) at each recorded change."""
    lines = [ln.split(maxsplit=3) for ln in (CASES[case] / "_meta" / "files.log").read_text().splitlines()]
    out, sizes = [], {}
    for t in sorted({float(ln[0]) for ln in lines}):
        for when, _, size, rel in lines:
            if float(when) == t:
                sizes[rel] = int(size)
        out.append((t, dict(sizes)))
    return out


def grown(case: str, t: float, dst: Path) -> Path:
    """The case's run dir as it was at `t`, written under `dst` (each file cut to its size then,
    a log to its last whole line); returns the copy's submission dir."""
    src = run_dir(case)
    sizes = next((s for when, s in reversed(growth(case)) if when <= t), {})
    root = dst / src.name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for rel, size in sizes.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = (src / rel).read_bytes()[:size] if (src / rel).is_file() else b""
        if rel.endswith((".out", ".log")):
            data = data[:data.rfind(b"\n") + 1]
        path.write_bytes(data)
    return root


def copy(case: str, dst: Path) -> Path:
    """The case's run dir copied whole under `dst` (a test may change the copy)."""
    src = run_dir(case)
    shutil.copytree(src, dst / src.name)
    return dst / src.name


# --- a submission with one benchmark running and one queued, as the screen shows it ---------------
PENDING_RUNNING = "two_benchmarks_one_waits"
PENDING_RUNNING_AT = 61.0                                  # seconds after the submit
PENDING_RUNNING_ASKED = datetime(2026, 12, 6, 6, 32, 33)   # that moment, in Slurm's local time


def pending_running(dst: Path, fake) -> Path:
    """`two_benchmarks_one_waits` as its files were 61 s after the submit (mcqa collecting,
    mcqa_again not started), and the fake Slurm (tests/fakeslurm.py) answering as Slurm did then:
    job 601 RUNNING on vm for 1:00 of 20:00, job 602 PENDING for Resources, expected to start when
    601's time limit is up. Returns the copy's submission dir."""
    root = grown(PENDING_RUNNING, PENDING_RUNNING_AT, dst)
    jobs = final_poll(PENDING_RUNNING).jobs
    fake.set(no_accounting=False)
    fake.job("601", "RUNNING", work_dir=jobs["601"].work_dir, name=jobs["601"].name)
    fake.job("602", "PENDING", work_dir=jobs["602"].work_dir, name=jobs["602"].name, reason="Resources")
    data = fake.load()
    data["jobs"]["601"].update(elapsed="1:00", nodelist="vm", submit="2026-12-06T06:31:32",
                               start="2026-12-06T06:31:33")
    data["jobs"]["602"].update(elapsed="0:00", nodelist="", nodes="1", submit="2026-12-06T06:31:32",
                               start="2026-12-06T06:51:33")
    fake.save(data)
    return root


def feed_asked_once(root: Path, now: datetime = PENDING_RUNNING_ASKED):
    """A Slurm feed for the submission at `root` that asks once, at the first poll, as at `now`
    (the fake's answers are then fixed: a snapshot's time in queue does not move)."""
    from gymwatch.core.cluster import record
    from gymwatch.core.slurmfeed import SlurmFeed

    return SlurmFeed(record.resolve(root), interval=None, now=lambda: now)

"""`gymwatch run -- eval submit -c FILE ...`: Gym's own `gym eval submit`, then the submission opened.

Gym queues one Slurm job per benchmark and writes its record; with `--json` (added unless the user
gave it) it prints that record on stdout, which says the submission's dir (`run_dir`), its gym
job id and each benchmark's Slurm job id, or sbatch's error when it refused one. Gym's stderr
goes to the user as Gym writes it (its errors whole). `--dry-run` and `--resolve-only` submit
nothing: Gym runs with the user's terminal and its exit code is returned.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TextIO

from .plan import SubmitPlan

# gymwatch's exit codes after a submit (README's table): every benchmark queued, some refused,
# nothing queued (Gym failed before or sbatch refused them all).
SUBMITTED, SOME_REFUSED, NOTHING_QUEUED = 0, 1, 3


class SubmitFailed(Exception):
    """Gym submitted nothing: one line, after Gym's own output."""


@dataclass(frozen=True)
class Submitted:
    record: dict[str, Any]
    stdout: str                  # Gym's stdout as it printed it (the record's JSON)

    @property
    def run_dir(self) -> str:
        return str(self.record.get("run_dir") or "")

    @property
    def gym_job_id(self) -> str:
        return str(self.record.get("gym_job_id") or "")

    @property
    def benchmarks(self) -> list[dict]:
        return [b for b in self.record.get("benchmarks") or [] if isinstance(b, dict)]

    @property
    def queued(self) -> list[dict]:
        return [b for b in self.benchmarks if b.get("job_id")]

    @property
    def exit_code(self) -> int:
        if not self.queued:
            return NOTHING_QUEUED
        return SOME_REFUSED if len(self.queued) < len(self.benchmarks) else SUBMITTED


def pass_through(plan: SubmitPlan) -> int:
    """`--dry-run` / `--resolve-only`: Gym on the user's terminal, its exit code returned."""
    try:
        return subprocess.run(plan.argv(), cwd=plan.cwd, stdin=subprocess.DEVNULL).returncode
    except OSError as exc:
        raise SubmitFailed(f"cannot run {plan.gym[0]}: {exc.strerror or exc}") from None


def submit(plan: SubmitPlan) -> Submitted:
    """Run `gym eval submit ... --json`; Gym's stderr passes through. Raises SubmitFailed when
    there is no record (Gym failed before submitting anything)."""
    try:
        done = subprocess.run(plan.argv(), cwd=plan.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              text=True, errors="replace")
    except OSError as exc:
        raise SubmitFailed(f"cannot run {plan.gym[0]}: {exc.strerror or exc}") from None
    record = _record(done.stdout)
    if record is None:
        if done.stdout.strip():                       # whatever Gym said instead, whole
            sys.stderr.write(done.stdout if done.stdout.endswith("\n") else done.stdout + "\n")
        raise SubmitFailed(f"`gym eval submit` exited {done.returncode} and printed no submission record: "
                           "nothing was submitted")
    return Submitted(record, done.stdout)


def _record(stdout: str) -> Optional[dict]:
    """The submission record Gym printed with --json (the last JSON object on stdout)."""
    text = stdout.strip()
    start = text.find("{")
    while start != -1:
        try:
            value = json.loads(text[start:])
        except ValueError:
            start = text.find("\n{", start + 1)
            start = start + 1 if start != -1 else -1
            continue
        return value if isinstance(value, dict) and "gym_job_id" in value else None
    return None


def describe(sub: Submitted) -> list[str]:
    """Where the submission is and what Gym queued, one benchmark a line (sbatch's error whole)."""
    host = sub.record.get("hostname")
    where = f" (on {host})" if isinstance(host, str) and host else ""
    lines = [f"submitted {sub.gym_job_id}: {sub.run_dir}{where}"]
    for bench in sub.benchmarks:
        name = bench.get("benchmark", "?")
        if bench.get("job_id"):
            lines.append(f"  {name}: Slurm job {bench['job_id']}")
        else:
            lines.append(f"  {name}: not queued: {bench.get('error') or 'Gym gave no job id and no error'}")
    return lines


def print_submitted(sub: Submitted, plan: SubmitPlan, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
    """The submission's path and jobs: on stdout, or on stderr when stdout carries the JSON the
    user asked Gym for."""
    if plan.user_json:
        out.write(sub.stdout if sub.stdout.endswith("\n") else sub.stdout + "\n")
    target = err if plan.user_json else out
    for line in describe(sub):
        target.write(line + "\n")
    target.flush()


def open_submission(run_dir: Path, debug: bool = False) -> Optional[int]:
    """The live screen on the submission dir, as `gymwatch attach DIR` opens it; None when there
    is no terminal to open it on."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("gymwatch: no terminal: not opening the screen", file=sys.stderr)
        return None
    import argparse

    from ..tui.app import run_app  # here: submitting without a screen never loads Textual

    # No manifest of gymwatch's in a submission dir: closing the screen leaves the jobs to Slurm.
    return run_app(argparse.Namespace(path=str(run_dir), logs=None, poll=False, head=None, no_notify=False,
                                      debug=debug))

"""`gymwatch diff A B --format json` on two big finished runs of the same tasks, statistics included.

The runs are benchmarks/gen.py's (100k rows each, 4 rollouts a task, seeds 6 and 7: the same
trials, other rewards, failures and never-ran rows), so diff pairs about 25k tasks: the interval is
the clustered normal one (past stats.BOOTSTRAP_MAX_TASKS); a third figure times the task bootstrap
itself at that limit, in process.

Baseline: `gymwatch report A --format json` then `gymwatch report B --format json`, each its own
process, wall times added (diff reads the same two runs the same way). Measured: the diff, its own
process. Best of three each, interleaved. The diff's JSON must pair trials and give an interval.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

from .common import PY, fmt_s, installed_copy, row, run_measured
from .gen import make_run

FULL_ROWS, SMALL_ROWS = 100_000, 3_000
TARGET = 1.3        # x two reports: the comparison and its statistics cost at most 30% more


def _report(root: Path, out: Path, cwd: Path):
    return run_measured([PY, "-m", "gymwatch", "report", str(root), "--format", "json", "--no-process-check"],
                        stdout_path=out, cwd=cwd)


def bootstrap_at_limit() -> tuple[float, int]:
    """stats.task_bootstrap over BOOTSTRAP_MAX_TASKS tasks of 4 trials: its wall time."""
    from gymwatch import stats

    rng = random.Random(1)
    k = stats.BOOTSTRAP_MAX_TASKS
    sums = [float(sum(rng.choice((-1, 0, 0, 1)) for _ in range(4))) for _ in range(k)]
    t0 = time.perf_counter()
    stats.task_bootstrap(sums, [4] * k)
    return time.perf_counter() - t0, k


def run(small: bool) -> list[dict]:
    n = SMALL_ROWS if small else FULL_ROWS
    with tempfile.TemporaryDirectory(prefix="gymwatch-bench-diff-") as tmp:
        t = Path(tmp)
        a, b = make_run(t / "A", n, seed=6), make_run(t / "B", n, seed=7)
        installed = installed_copy(t / "installed")
        base, gw = [], []
        for _ in range(3):
            ra, rb = _report(a.root, t / "a.json", installed), _report(b.root, t / "b.json", installed)
            base.append(ra.wall + rb.wall)
            d = run_measured([PY, "-m", "gymwatch", "diff", str(a.root), str(b.root), "--format", "json",
                              "--no-process-check"], stdout_path=t / "diff.json", cwd=installed)
            if d.code not in (0, 1):
                raise RuntimeError(f"gymwatch diff exited {d.code}: {d.stderr[-300:]!r}")
            gw.append(d.wall)
        s = json.loads((t / "diff.json").read_bytes())["stats"]
    problem = "" if s["paired_trials"] and s["interval"] else f"no pairs or no interval: {s['verdict']}"
    ratio = min(gw) / min(base)
    boot, k = bootstrap_at_limit()
    size = f"2 x {n // 1000}k rows, {s['paired_tasks']} tasks paired"
    return [
        row(f"diff: diff --format json ({size}), wall", fmt_s(min(gw)), fmt_s(min(base)), round(ratio, 2),
            f"<= {TARGET}x", ratio <= TARGET, problem or f"interval: {s['interval_method']}"),
        row(f"diff: task bootstrap of {k} tasks (the most it resamples)", fmt_s(boot), "", None, "",
            note="2,000 resamples, in process"),
    ]

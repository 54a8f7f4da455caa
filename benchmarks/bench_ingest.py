"""Ingest and memory of `gymwatch report --format json` on a big finished run.

Baseline: a bare Python loop doing `json.loads` per line of the same `rollouts.jsonl`
(text mode, nothing kept), run as its own process right before/after the report.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .common import PY, fmt_mb, fmt_s, installed_copy, row, run_measured
from .gen import make_run

FULL_ROWS = 100_000
SMALL_ROWS = 3_000
BASELINE = ("import json, sys\n"
            "with open(sys.argv[1], encoding='utf-8') as fh:\n"
            "    for line in fh:\n"
            "        json.loads(line)\n")


def measure(root: Path, rollouts: Path, out: Path, repeats: int) -> dict:
    base, gw = [], []
    installed = installed_copy(out.parent / "installed")
    os.sync()   # the generated files' writeback would otherwise take a core from whichever runs first
    for _ in range(repeats):   # interleaved: both see the same machine load
        base.append(run_measured([PY, "-c", BASELINE, str(rollouts)]))
        gw.append(run_measured([PY, "-m", "gymwatch", "report", str(root), "--format", "json"],
                               stdout_path=out, cwd=installed))
        if gw[-1].code not in (0, 1, 2):
            raise RuntimeError(f"gymwatch report exited {gw[-1].code}: {gw[-1].stderr[-300:]!r}")
    return {"base": base, "gw": gw}


def check_report(out: Path, g) -> str:
    """The report must count what was generated (the fast path read every row right)."""
    data = json.loads(out.read_bytes())
    c = data["counts"]
    want = {"completed": g.rows - g.never_ran, "never_ran": g.never_ran, "failed": g.failures,
            "missing": g.expected - g.rows - g.failures}
    bad = {k: (c.get(k), v) for k, v in want.items() if c.get(k) != v}
    return "" if not bad else f"counts differ from generated (got, want): {bad}"


def run(small: bool, g=None) -> list[dict]:
    """`g`: a run made by gen.make_run (the caller shares it with the screen benchmark). Then the
    same on Gym 0.7-shaped rows (bigger: extra keys and a trajectory), half as many."""
    out = _run(small, g, "")
    with tempfile.TemporaryDirectory(prefix="gymwatch-bench-07-") as tmp:
        g07 = make_run(Path(tmp) / "run", (SMALL_ROWS if small else FULL_ROWS) // 2, shape="0.7")
        out += _run(small, g07, ", Gym 0.7 rows")
    return out


def _run(small: bool, g, label: str) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="gymwatch-bench-") as tmp:
        if g is None:
            g = make_run(Path(tmp) / "run", SMALL_ROWS if small else FULL_ROWS)
        rows = g.rows
        out = Path(tmp) / "report.json"
        m = measure(g.root, g.rollouts, out, repeats=3)
        problem = check_report(out, g)
    base_wall = min(p.wall for p in m["base"])
    gw_wall = min(p.wall for p in m["gw"])
    base_cpu = min(p.cpu for p in m["base"])
    gw_cpu = min(p.cpu for p in m["gw"])
    base_rss = max(p.maxrss_mb for p in m["base"])
    gw_rss = max(p.maxrss_mb for p in m["gw"])
    size = f"{rows // 1000}k rows, {g.bytes / 1e6:.0f} MB{label}"
    ratio = gw_wall / base_wall
    cpu_ratio = gw_cpu / base_cpu
    out_rows = [
        row(f"ingest: report --format json ({size}), wall", fmt_s(gw_wall), fmt_s(base_wall),
            round(ratio, 2), "<= 0.8x", ratio <= 0.8, problem),
        row(f"ingest: same, CPU (user+sys){label}", fmt_s(gw_cpu), fmt_s(base_cpu), round(cpu_ratio, 2), "",
            note="the report's process and its helpers on the second core; the target is the wall time"),
        row(f"memory: report peak RSS ({size})", fmt_mb(gw_rss), fmt_mb(base_rss),
            round(gw_rss / base_rss, 2), "<= 150 MB", gw_rss <= 150),
    ]
    return out_rows

"""`python -m benchmarks --small` runs end to end and prints its table (no timing is asserted)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_small_benchmark_prints_a_table():
    readme = REPO / "benchmarks" / "README.md"
    before = readme.stat().st_mtime_ns if readme.exists() else None
    env = {**os.environ, "TEXTUAL_ANIMATIONS": "none"}
    p = subprocess.run([sys.executable, "-m", "benchmarks", "--small"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=280)
    assert p.returncode == 0, p.stderr[-2000:]
    out = p.stdout
    assert "| figure | value | baseline | ratio | target | met | note |" in out
    for name in ("ingest: report --format json", "memory: report peak RSS", "live latency p95, native",
                 "live latency p95, polling", "screen: apply", "diff: diff --format json",
                 "charts: the report's cost section", "screen: a charts page drawn again"):
        assert name in out, name
    rows = [ln for ln in out.splitlines() if ln.startswith("| ") and not ln.startswith("| figure")]
    assert len(rows) >= 7
    # The ingest row is measured (a ratio), not skipped; nothing written into the repo.
    ingest = next(ln for ln in rows if "ingest: report" in ln)
    assert "x |" in ingest and "not measured" not in ingest
    assert (readme.stat().st_mtime_ns if readme.exists() else None) == before

"""`gymwatch browse` over many runs: cold (no cache) and warm (cached summaries).

The runs are copies of the recorded fixture cases (tests/fixtures/gym-0.4.0-cases), laid out
as an experiments tree with some noise a real tree has (a venv, __pycache__, a symlink loop).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path

from gymwatch.browse.cache import SummaryCache
from gymwatch.browse.runs import default_jobs, list_runs
from gymwatch.browse.screen import BrowseApp, BrowseScreen, BrowseState

CASES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gym-0.4.0-cases"
COLD_TARGET, WARM_TARGET = 2.0, 0.5


def make_tree(root: Path, n: int) -> Path:
    """`n` runs under root/exp_<k>/run_<i>, plus directories the walk must skip."""
    cases = sorted(p for p in CASES.iterdir() if p.is_dir())
    for i in range(n):
        dst = root / f"exp_{i // 50:03d}" / f"run_{i:04d}"
        shutil.copytree(cases[i % len(cases)], dst, ignore=shutil.ignore_patterns("timeline.jsonl"))
    venv = root / ".venv" / "lib"
    venv.mkdir(parents=True)
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / "exp_000" / "__pycache__").mkdir()
    os.symlink(root, root / "exp_000" / "loop")
    return root


async def screen_listing(root: Path, n: int) -> float:
    t = time.perf_counter()
    app = BrowseApp(BrowseState([str(root)]))
    async with app.run_test(size=(160, 40)) as pilot:
        while not (isinstance(app.screen, BrowseScreen) and app.screen.st.scanned):
            await pilot.pause(0.01)
        took = time.perf_counter() - t
        assert app.screen.table.row_count == n
    return took


def timed(fn) -> tuple[float, object]:
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    timed.cpu = time.process_time() - c        # CPU seconds of the last call (shared machines)
    return time.perf_counter() - t, out


def run(small: bool) -> list[dict]:
    n = 60 if small else 1000
    with tempfile.TemporaryDirectory(prefix="gymwatch-bench-browse-") as tmp:
        root = make_tree(Path(tmp) / "runs", n)
        cache_file = Path(tmp) / "cache" / "browse.json"
        alone, runs = timed(lambda: list_runs([root], SummaryCache(enabled=False), jobs=1))
        alone_cpu = timed.cpu
        assert len(runs) == n, (len(runs), n)
        cold, runs = timed(lambda: list_runs([root], SummaryCache(cache_file)))   # default jobs
        assert len(runs) == n, (len(runs), n)
        warm, runs = timed(lambda: list_runs([root], SummaryCache(cache_file)))
        warm_cpu = timed.cpu
        assert len(runs) == n
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "screen-cache")     # a cold cache again
        try:
            shown = asyncio.run(screen_listing(root, n))
        finally:
            os.environ.pop("XDG_CACHE_HOME")
        scale = n / 1000   # targets are for 1,000 runs
    cold_t, warm_t = COLD_TARGET * scale, WARM_TARGET * scale
    return [
        {"name": f"browse: {n} runs listed cold (no cache)", "value": round(cold, 3), "baseline": None,
         "ratio": None, "target": f"<= {cold_t:g} s", "ok": cold <= cold_t,
         "note": f"{default_jobs()} worker processes (the default here); copies of the 6 recorded "
                 "cases; rows read whole, logs only when the verdict needs them"},
        {"name": f"browse: {n} runs listed cold, one process (--jobs 1)", "value": round(alone, 3),
         "baseline": None, "ratio": None, "target": "", "note": f"CPU {alone_cpu:.2f} s"},
        {"name": f"browse screen: {n} runs shown cold", "value": round(shown, 3), "baseline": round(cold, 3),
         "ratio": round(shown / cold, 2) if cold else None, "target": "", "note":
         "from the app's start until every run is in the table (headless); baseline: the cold listing"},
        {"name": f"browse: {n} runs listed warm (cached summaries)", "value": round(warm, 3),
         "baseline": round(cold, 3), "ratio": round(warm / cold, 3) if cold else None,
         "target": f"<= {warm_t:g} s", "ok": warm <= warm_t,
         "note": f"CPU {warm_cpu:.2f} s; baseline: the cold listing"},
    ]


if __name__ == "__main__":
    for row in run(small=True):
        print(row)

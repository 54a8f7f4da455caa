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

from .common import REPO

CASES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gym-0.4.0-cases"
COLD_TARGET, WARM_TARGET = 2.0, 0.5          # seconds for 1,000 runs
COLD_VS_WALK, WARM_VS_WALK = 1.5, 0.15         # x the bare walk
# The walk, the cold and the warm listing are each timed this many times, taking turns, and each
# figure is its best: this VM's speed drifts by the minute (the same walk took 0.46-1.0 s back to
# back), and one listing beside the best of two walks read 1.4-2.7x over a day.
ROUNDS = 3
BARE_WALK = ("import json, os, sys, time\n"
             "t = time.perf_counter(); n = 0\n"
             "for d, dirs, files in os.walk(sys.argv[1]):\n"
             "    for f in files:\n"
             "        if f.endswith('.jsonl'):\n"
             "            with open(os.path.join(d, f), encoding='utf-8') as fh:\n"
             "                for line in fh:\n"
             "                    if line.strip():\n"
             "                        json.loads(line); n += 1\n"
             "print(time.perf_counter() - t, n)\n")


# What any warm listing must do to know its cached summaries are still true, in a bare loop: list
# every directory down to the runs, stat each run dir and its logs/ and gym_run/ (their mtimes
# say their names are as they were) and every file of the run's cache key (their sizes and
# mtimes: an append to a file does not change its directory's mtime). Its files' names are
# taken before the clock starts, as a warm listing has them in its cache. Run dirs come on
# stdin, one a line.
KEY_FLOOR = ("import os, sys, time\n"
             "runs = set(sys.stdin.read().splitlines())\n"
             "def listing(d):\n"
             "    with os.scandir(d) as it:\n"
             "        return [(e, e.is_dir(follow_symlinks=False)) for e in it]\n"
             "known = {}\n"
             "for d in runs:\n"
             "    subs = [s for s in ('logs', 'gym_run') if os.path.isdir(os.path.join(d, s))]\n"
             "    names = [e.name for e, isdir in listing(d) if not isdir]\n"
             "    names += [s + '/' + e.name for s in subs for e, isdir in listing(os.path.join(d, s)) if not isdir]\n"
             "    known[d] = ([os.path.join(d, s) for s in subs], [os.path.join(d, n) for n in names])\n"
             "t = time.perf_counter(); n = 0\n"
             "stack = [sys.argv[1]]\n"
             "while stack:\n"
             "    d = stack.pop()\n"
             "    if d in runs:\n"
             "        subs, files = known[d]\n"
             "        for p in [d, *subs, *files]:\n"
             "            os.stat(p); n += 1\n"
             "        continue\n"
             "    stack.extend(e.path for e, isdir in listing(d) if isdir and e.name[0] != '.' and e.name != '__pycache__')\n"
             "print(time.perf_counter() - t, n)\n")


def key_floor(root: Path, runs: list[str]) -> float:
    """KEY_FLOOR's time (its own process) over the runs the listing found."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", KEY_FLOOR, str(root)], input="\n".join(runs),
                         capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def bare_walk(root: Path) -> float:
    """A walk of the tree that json.loads every line of every .jsonl file (its own process, cold
    in the same sense as the listing: nothing cached but the OS's page cache, warm for both)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", BARE_WALK, str(root)], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


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
        while not (isinstance(app.screen, BrowseScreen) and app.screen.listing.scanned):
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
    """The rows, measured in a process of their own, as `gymwatch browse` runs in one. (Measured
    in the table's own process after its other sections, the cold listing read 1.53-1.87x the walk
    against 1.45-1.51x alone: that process had made and freed a big heap, where new objects land
    scattered; ~12% slower, with as many page faults.)"""
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "benchmarks.bench_browse", "--json"] + (["--small"] if small else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(out.stdout)


def measure(small: bool) -> list[dict]:
    n = 60 if small else 1000
    with tempfile.TemporaryDirectory(prefix="gymwatch-bench-browse-") as tmp:
        root = make_tree(Path(tmp) / "runs", n)
        os.sync()       # an experiments tree is there already: no write-back of its copy meanwhile
        cache_file = Path(tmp) / "cache" / "browse.msgpack"
        alone, runs = timed(lambda: list_runs([root], SummaryCache(enabled=False), jobs=1))
        alone_cpu = timed.cpu
        assert len(runs) == n, (len(runs), n)
        walks, colds, warms = [], [], []
        for _ in range(ROUNDS):
            walks.append(bare_walk(root))
            cache_file.unlink(missing_ok=True)
            took, runs = timed(lambda: list_runs([root], SummaryCache(cache_file)))   # default jobs
            colds.append(took)
            assert len(runs) == n, (len(runs), n)
            took, runs = timed(lambda: list_runs([root], SummaryCache(cache_file)))
            warms.append((took, timed.cpu))
            assert len(runs) == n
        walk, cold, (warm, warm_cpu) = min(walks), min(colds), min(warms)
        floor = min(key_floor(root, [r["path"] for r in runs]) for _ in range(3))
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "screen-cache")     # a cold cache again
        try:
            shown = asyncio.run(screen_listing(root, n))
        finally:
            os.environ.pop("XDG_CACHE_HOME")
        scale = n / 1000   # targets are for 1,000 runs
    cold_t, warm_t = COLD_TARGET * scale, WARM_TARGET * scale
    return [
        {"name": f"browse: {n} runs listed cold (no cache)", "value": round(cold, 3), "baseline": round(walk, 3),
         "ratio": round(cold / walk, 2), "target": f"<= {COLD_VS_WALK:g}x (and <= {cold_t:g} s)",
         "ok": cold / walk <= COLD_VS_WALK and cold <= cold_t,
         "note": f"{default_jobs()} worker processes (the default here); copies of the 6 recorded "
                 f"cases; best of {ROUNDS}, taking turns with the baseline: a bare walk that json.loads "
                 f"every .jsonl line (best of {ROUNDS}; {min(walks):.2f}-{max(walks):.2f} s)"},
        {"name": f"browse: {n} runs listed cold, one process (--jobs 1)", "value": round(alone, 3),
         "baseline": round(walk, 3), "ratio": round(alone / walk, 2), "target": "", "note": f"CPU {alone_cpu:.2f} s"},
        {"name": f"browse screen: {n} runs shown cold", "value": round(shown, 3), "baseline": round(cold, 3),
         "ratio": round(shown / cold, 2) if cold else None, "target": "", "note":
         "from the app's start until every run is in the table (headless); baseline: the cold listing"},
        {"name": f"browse: {n} runs listed warm (cached summaries)", "value": round(warm, 3),
         "baseline": round(walk, 3), "ratio": round(warm / walk, 3),
         "target": f"<= {WARM_VS_WALK:g}x (and <= {warm_t:g} s)", "ok": warm / walk <= WARM_VS_WALK and warm <= warm_t,
         "note": f"CPU {warm_cpu:.2f} s; best of {ROUNDS} (each after a cold one); baseline: the bare walk"},
        {"name": f"browse: the warm listing's floor ({n} runs)", "value": round(floor, 3),
         "baseline": round(walk, 3), "ratio": round(floor / walk, 3), "target": "",
         "note": "a bare loop (one process) listing the dirs down to the runs, stat-ing each run's dirs "
                 "and every file of its cache key, nothing else; baseline: the bare walk"},
    ]


if __name__ == "__main__":
    import json
    import sys

    rows = measure(small="--small" in sys.argv or "--json" not in sys.argv)
    if "--json" in sys.argv:
        print(json.dumps(rows))
    else:
        for row in rows:
            print(row)

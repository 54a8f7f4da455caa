"""The live screen: its memory on the big run, start to first paint, and a 200-trial update.

All of it runs headless (`App.run_test`) in child processes. When `gymwatch.tui` is not there
(or its API moved), the figures say "not measured" and why.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from .common import REPO, child_json, fmt_mb, fmt_s, installed_copy, row, skipped
from .gen import make_run

FULL_TRIALS = 50_000
SMALL_TRIALS = 300
CHANGED = 200
SMALL_CHANGED = 50
UPDATE_LIMIT = 300   # seconds for the whole update child; a repaint still running then is "> limit"
FIXTURE = REPO / "tests" / "fixtures" / "gym-0.4.0-cases" / "mixed_ok"
SIZE = (160, 48)


def _maxrss_mb() -> float:
    from ._hwm import vm_hwm_mb  # not ru_maxrss: a child inherits its parent's (see _hwm.py)
    return vm_hwm_mb()


def _gym_app(path: str):
    from gymwatch.tui.app import GymwatchApp
    from gymwatch.tui.live import LiveRun
    from gymwatch.tui.watch import queue_source

    live = LiveRun(path, check_processes=False)
    return GymwatchApp(live, change_source=queue_source(asyncio.Queue()), tick=3600, animations=False)


async def _until(pilot, cond, timeout: float) -> bool:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        if cond():
            return True
        await pilot.pause(0.005)
    return cond()


# --- children -------------------------------------------------------------------------------
async def child_app(path: str, timeout: float) -> dict:
    """Start the real app on `path`; time to its first shown poll; peak RSS after."""
    t0 = time.perf_counter()
    app = _gym_app(path)
    async with app.run_test(headless=True, size=SIZE) as pilot:
        ok = await _until(pilot, lambda: app.run_shown, timeout)
        t = time.perf_counter() - t0
        # A big run is read over several polls after the first paint (each has a time budget):
        # memory is taken once every row is read and in the table.
        table = getattr(app, "trials", None)
        live = getattr(app, "live", None)
        filled = await _until(pilot, lambda: not (live is not None and live.catching_up()), timeout)
        t_full = time.perf_counter() - t0
        rows = table.row_count if table is not None else None
    return {"started": ok, "seconds": t, "filled": filled, "full_seconds": t_full, "rows": rows,
            "maxrss_mb": _maxrss_mb()}


async def child_bare(timeout: float) -> dict:
    """Baseline: a bare Textual App with one empty DataTable, start to first paint."""
    from textual.app import App
    from textual.widgets import DataTable

    painted = {}

    class Bare(App):
        def compose(self):
            yield DataTable()

        def on_mount(self) -> None:
            self.query_one(DataTable).add_columns("Task", "Roll", "Att", "Status", "Reward", "Tokens", "Failure")
            self.call_after_refresh(lambda: painted.setdefault("t", time.perf_counter()))

    t0 = time.perf_counter()
    app = Bare()
    async with app.run_test(headless=True, size=SIZE) as pilot:
        await _until(pilot, lambda: "t" in painted, timeout)
    return {"seconds": painted.get("t", float("nan")) - t0, "maxrss_mb": _maxrss_mb()}


def _state(n: int):
    from gymwatch.core.model import T_COMPLETED, T_NEVER_RAN, RunState, Trial

    st = RunState(root="/bench")
    for i in range(n):
        k = (i // 4, i % 4, None)
        nr = i % 29 == 7
        st.trials[k] = Trial(k[0], k[1], status=T_NEVER_RAN if nr else T_COMPLETED,
                             reward=None if nr else float(i % 2), input_tokens=300 + i % 50,
                             output_tokens=0 if nr else 9, agent="mcqa_simple_agent", expected=True)
    return st


def _emit(out: dict) -> None:
    print(json.dumps(out), flush=True)


async def child_update(n: int, changed: int) -> dict:
    """Apply `changed` changed trials to a table of n: TrialsTable.update vs raw DataTable.update_cell."""
    from textual.app import App
    from textual.widgets import DataTable

    from gymwatch.core.model import T_FAILED
    from gymwatch.tui.trials import COLUMNS, TrialsTable
    st = _state(n)
    keys = list(st.trials)[:: max(1, n // changed)][:changed]

    class Host(App):
        def __init__(self, widget):
            super().__init__()
            self.widget = widget

        def compose(self):
            yield self.widget

    out: dict = {"n": n, "changed": len(keys)}
    # Baseline: a keyed DataTable with the same rows, 3 cells per changed row via update_cell
    # (update_width=False: the cheapest correct use; see README for update_width=True).
    base = DataTable()
    app = Host(base)
    async with app.run_test(headless=True, size=SIZE) as pilot:
        for key, label in COLUMNS:
            base.add_column(label, key=key)
        for k, t in st.trials.items():
            base.add_row(str(k[0]), str(k[1]), "", t.status, str(t.reward), "300/9", "", key=f"{k[0]}:{k[1]}:")
        await pilot.pause()
        t0 = time.perf_counter()
        for k in keys:
            rk = f"{k[0]}:{k[1]}:"
            base.update_cell(rk, "status", "failed")
            base.update_cell(rk, "reward", "-")
            base.update_cell(rk, "why", "judge_failed: judge returned HTTP 500")
        t1 = time.perf_counter()
        await pilot.pause()
        out["base_apply"], out["base_paint"] = t1 - t0, time.perf_counter() - t0
    _emit(out)
    table = TrialsTable()
    app = Host(table)
    async with app.run_test(headless=True, size=SIZE) as pilot:
        await pilot.pause()
        tb = time.perf_counter()
        table.rebuild(st)
        await pilot.pause()
        out["rebuild"] = time.perf_counter() - tb
        for k in keys:
            t = st.trials[k]
            t.status, t.reward, t.failure_class, t.message = T_FAILED, None, "judge_failed", "judge returned HTTP 500"
        t0 = time.perf_counter()
        table.update(st, set(keys), set())
        t1 = time.perf_counter()
        out["apply"], out["paint"] = t1 - t0, None
        _emit(out)
        await pilot.pause()
        out["apply"], out["paint"] = t1 - t0, time.perf_counter() - t0
    return out


# --- parent ---------------------------------------------------------------------------------
def _tui_present() -> str:
    try:
        import gymwatch.tui.app  # noqa: F401
        import gymwatch.tui.live  # noqa: F401
        import gymwatch.tui.watch  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return f"gymwatch.tui not importable yet ({type(exc).__name__}: {exc})"
    return ""


def run(small: bool, big_run: Path | None = None, big_rows: int = 0) -> list[dict]:
    out: list[dict] = []
    missing = _tui_present()
    n = SMALL_TRIALS if small else FULL_TRIALS
    changed = SMALL_CHANGED if small else CHANGED

    # 200 changed trials on a big table.
    name = f"screen: apply {changed} changed trials, {n:,}-row table"
    try:
        r, _ = child_json("bench_screen", "update", str(n), str(changed), timeout=UPDATE_LIMIT)
        if "apply" in r:
            paint = r["paint"]
            out.append(row(name + ": TrialsTable.update()", fmt_s(r["apply"]), fmt_s(r["base_apply"]),
                           round(r["apply"] / r["base_apply"], 2), "<= 100 ms", r["apply"] <= 0.1,
                           f"baseline: raw DataTable.update_cell x3/row; initial fill {fmt_s(r['rebuild'])}"))
            note = "until the repaint is done; baseline: the raw DataTable's repaint after its update_cell calls"
            if paint is None:
                note = "repaint still running when the child was stopped; " + note
            out.append(row(name + ": update + repaint", fmt_s(paint) if paint is not None else "> limit",
                           fmt_s(r["base_paint"]), round(paint / r["base_paint"], 2) if paint is not None else None,
                           "<= 100 ms", paint is not None and paint <= 0.1, note))
        else:
            out.append(skipped(name, "the TrialsTable child stopped before it measured", "<= 100 ms"))
    except Exception as exc:  # noqa: BLE001
        out.append(skipped(name, str(exc)[:200], "<= 100 ms"))

    # Start to first paint (recorded fixture run) vs a bare Textual app.
    name = "screen: app start to first paint (fixture run)"
    if missing:
        out.append(skipped(name, missing, "<= 1 s"))
    else:
        try:   # gymwatch as installed (compiled bytecode), as the bare app's Textual is
            with tempfile.TemporaryDirectory(prefix="gymwatch-screen-installed-") as tmp:
                installed = installed_copy(Path(tmp))
                base, _ = child_json("bench_screen", "bare", timeout=120)
                r, _ = child_json("bench_screen", "app", str(FIXTURE), "60", timeout=120, installed=installed)
            out.append(row(name, fmt_s(r["seconds"]), fmt_s(base["seconds"]), round(r["seconds"] / base["seconds"], 2),
                           "<= 1 s", r["started"] and r["seconds"] <= 1.0,
                           "" if r["started"] else "never showed its first poll"))
        except Exception as exc:  # noqa: BLE001
            out.append(skipped(name, str(exc)[:200], "<= 1 s"))

    # Memory of the live screen on the big ingest run.
    name = "memory: live screen peak RSS"
    if missing:
        out.append(skipped(name, missing, "<= 300 MB"))
        return out
    try:
        with tempfile.TemporaryDirectory(prefix="gymwatch-screen-") as tmp:
            rows = big_rows or (3_000 if small else 100_000)
            g = make_run(Path(tmp) / "run", rows) if big_run is None else None
            path = str(big_run or g.root)
            base, _ = child_json("bench_screen", "bare", timeout=120)
            r, proc = child_json("bench_screen", "app", path, "600", timeout=900)
        rss = max(r["maxrss_mb"], proc.maxrss_mb if proc.maxrss_mb == proc.maxrss_mb else 0)
        note = (f"{rows // 1000}k rows; first poll shown after {fmt_s(r['seconds'])}, "
                f"{r.get('rows')} table rows after {fmt_s(r.get('full_seconds', r['seconds']))}")
        if not r["started"]:
            note += "; did not finish its first poll in 600 s"
        out.append(row(f"{name} ({rows // 1000}k rows)", fmt_mb(rss), fmt_mb(base["maxrss_mb"]),
                       round(rss / base["maxrss_mb"], 2), "<= 300 MB", r["started"] and rss <= 300,
                       note + "; baseline: bare Textual app"))
    except Exception as exc:  # noqa: BLE001
        out.append(skipped(name, str(exc)[:200], "<= 300 MB"))
    return out


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "app":
        res = asyncio.run(child_app(sys.argv[2], float(sys.argv[3])))
    elif what == "bare":
        res = asyncio.run(child_bare(30))
    elif what == "update":
        res = asyncio.run(child_update(int(sys.argv[2]), int(sys.argv[3])))
    else:
        raise SystemExit(f"unknown child {what}")
    print(json.dumps(res))

"""Live latency: a line appended to rollouts.jsonl -> the model shows that trial finished.

The loop is the live screen's: a watchfiles change source over the run's dirs (the screen's own
`gymwatch.tui.watch.watchfiles_source` when it exists, with its debounce and poll delay) and a
`RunSession.poll()` on every hint. Baseline, on the same appends: when watchfiles itself
reported the change (before gymwatch read anything). Appends come 30-80 ms apart, like a busy
collector; each is one `write()` of a whole line.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

from .common import child_json, fmt_s, pct, row, skipped

FULL_APPENDS = 200
SMALL_APPENDS = 25


def _source(force_polling: bool):
    try:
        from gymwatch.tui.watch import watchfiles_source
        return watchfiles_source(force_polling=force_polling), "gymwatch.tui.watch.watchfiles_source"
    except ImportError:
        from watchfiles import awatch

        async def source(paths):
            async for changes in awatch(*paths, force_polling=force_polling, yield_on_timeout=True,
                                        rust_timeout=250):
                yield changes
        return source, "watchfiles.awatch defaults"


async def _measure(root: Path, rollouts: Path, lines: list[str], n: int, force_polling: bool) -> dict:
    from gymwatch.core.model import T_PENDING
    from gymwatch.core.session import RunSession

    session = RunSession.open(str(root), check_processes=False)
    session.poll()
    source, how = _source(force_polling)
    keys = []
    for ln in lines[:n]:
        obj = json.loads(ln)
        keys.append((obj["_ng_task_index"], obj["_ng_rollout_index"]))     # a TrialKey
    index = {k: i for i, k in enumerate(keys)}
    written: dict[int, float] = {}
    evented: dict[int, float] = {}
    seen: dict[int, float] = {}
    done = asyncio.Event()
    ready = asyncio.Event()

    async def watcher() -> None:
        agen = source(session.watch_paths())
        ready.set()
        async for _hint in agen:
            t_event = time.perf_counter()
            for i, tw in written.items():
                if i not in evented and tw <= t_event:
                    evented[i] = t_event
            changes = session.poll()
            t_seen = time.perf_counter()
            trials = session.state.trials
            for k in changes.trials:
                i = index.get(k)
                if i is not None and i not in seen and trials[k].status != T_PENDING:
                    seen[i] = t_seen
            if len(seen) == n:
                done.set()
                return

    async def writer() -> None:
        await ready.wait()
        await asyncio.sleep(0.5)              # let the watcher settle
        rng = random.Random(11)
        fd = os.open(rollouts, os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(n):
                await asyncio.sleep(rng.uniform(0.03, 0.08))
                data = lines[i].encode()
                written[i] = time.perf_counter()
                os.write(fd, data)
        finally:
            os.close(fd)

    task = asyncio.create_task(watcher())
    await writer()
    try:
        await asyncio.wait_for(done.wait(), timeout=10)
    except asyncio.TimeoutError:
        pass
    task.cancel()
    lat = [seen[i] - written[i] for i in seen]
    ev = [evented[i] - written[i] for i in evented]
    return {"n": n, "seen": len(seen), "p50": pct(lat, 50), "p95": pct(lat, 95),
            "ev_p50": pct(ev, 50), "ev_p95": pct(ev, 95), "source": how}


def child(n: int, force_polling: bool) -> dict:
    from .gen import make_live_run

    with tempfile.TemporaryDirectory(prefix="gymwatch-live-") as tmp:
        rollouts, lines = make_live_run(Path(tmp) / "run", expected=max(400, n))
        return asyncio.run(_measure(Path(tmp) / "run", rollouts, lines, n, force_polling))


def run(small: bool) -> list[dict]:
    n = SMALL_APPENDS if small else FULL_APPENDS
    out = []
    for polling, target in ((False, 0.2), (True, 1.5)):
        mode = "polling" if polling else "native"
        name = f"live latency p95, {mode} ({n} appends)"
        try:
            r, _ = child_json("bench_live", str(n), "1" if polling else "0", timeout=300)
        except Exception as exc:  # noqa: BLE001 - a benchmark that cannot run is reported, not fatal
            out.append(skipped(name, str(exc)[:200], f"<= {fmt_s(target)}"))
            continue
        note = f"p50 {fmt_s(r['p50'])} (watchfiles p50 {fmt_s(r['ev_p50'])}); {r['source']}"
        if r["seen"] < n:
            note += f"; only {r['seen']}/{n} appends seen"
        out.append(row(name, fmt_s(r["p95"]), fmt_s(r["ev_p95"]),
                       round(r["p95"] / r["ev_p95"], 2) if r["ev_p95"] > 0 else None,
                       f"<= {fmt_s(target)}", r["p95"] <= target and r["seen"] == n, note))
    return out


if __name__ == "__main__":
    print(json.dumps(child(int(sys.argv[1]), sys.argv[2] == "1")))

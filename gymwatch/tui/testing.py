"""Helpers for tests and screenshots: a settable clock, staged replays, bounded waits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable, Iterable, Optional

from ..replay import Replayer
from .app import GymwatchApp
from .live import LiveRun
from .watch import queue_source

CASES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "gym-0.4.0-cases"
EPOCH = 1_800_000_000.0     # fixed clock origin: no wall time in snapshots


class FakeClock:
    def __init__(self, t: float = EPOCH) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def fixture_app(case: str, clock: Optional[FakeClock] = None, **kw) -> GymwatchApp:
    """A finished recorded run, read at once, driven only by an (idle) queue."""
    clock = clock or FakeClock()
    live = LiveRun(str(CASES / case), clock=clock, check_processes=False)
    return make_app(live, clock, **kw)


def make_app(live: LiveRun, clock: Callable[[], float], queue: Optional[asyncio.Queue] = None,
             **kw) -> GymwatchApp:
    q = queue if queue is not None else asyncio.Queue()
    app = GymwatchApp(live, change_source=queue_source(q), clock=clock, tick=kw.pop("tick", 3600),
                      animations=False, **kw)
    app.hints = q   # type: ignore[attr-defined]
    return app


def staged_live(case: str, dst: Path, times: Iterable[float], clock: FakeClock) -> tuple[LiveRun, Replayer]:
    """Replay `case` into `dst` up to each recorded time, polling at that time on `clock`."""
    rp = Replayer(CASES / case, dst)
    live: Optional[LiveRun] = None
    for t in times:
        rp.step_to(t)
        clock.t = EPOCH + t
        if live is None:
            live = LiveRun(str(dst), clock=clock, check_processes=False)
        live.poll()
    assert live is not None
    return live, rp


async def wait_for(pilot, cond: Callable[[], bool], tries: int = 250) -> bool:
    """Bounded wait: pause in 20 ms steps until `cond()` holds (False if it never does)."""
    for _ in range(tries):
        if cond():
            return True
        await pilot.pause(0.02)
    return cond()


def view_settled(app: GymwatchApp) -> bool:
    """The log view finished indexing its file (and any pending jump)."""
    view = app.pane.view
    logs = view.logs
    return logs is None or (logs.done and view._pending is None)

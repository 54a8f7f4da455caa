"""Helpers for the Pilot tests and the screenshot script: a settable clock, staged replays,
apps driven by an injected queue, bounded waits. (The `clock` fixture is in conftest.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable, Iterable, Optional

from conftest import CASES
from gymwatch.replay import Replayer
from gymwatch.tui.app import GymwatchApp
from gymwatch.tui.live import LiveRun
from gymwatch.tui.watch import queue_source

EPOCH = 1_800_000_000.0     # fixed clock origin: no wall time in snapshots


class FakeClock:
    """A clock the test sets (`clock.t = EPOCH + 60`)."""

    def __init__(self, t: float = EPOCH) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def case_dir(case: str | Path) -> Path:
    """A recorded run: a path, or the name of a 0.4.0 case."""
    return case if isinstance(case, Path) else CASES / case


def fixture_app(case: str | Path, clock: Optional[FakeClock] = None, **kw) -> GymwatchApp:
    """The live screen of a run dir (a recorded case, or a copy the test writes to), read at
    once, without a process check, polled only on the hints put in `app.hints`."""
    clock = clock or FakeClock()
    live = LiveRun(str(case_dir(case)), clock=clock, check_processes=False)
    return make_app(live, clock, **kw)


def make_app(live: LiveRun, clock: Callable[[], float], queue: Optional[asyncio.Queue] = None,
             **kw) -> GymwatchApp:
    """The live screen of `live`, polled on the hints put in `app.hints` (a queue), ticking hourly."""
    q = queue if queue is not None else asyncio.Queue()
    app = GymwatchApp(live, change_source=queue_source(q), clock=clock, tick=kw.pop("tick", 3600),
                      animations=False, **kw)
    app.hints = q   # type: ignore[attr-defined]
    return app


def staged_live(case: str | Path, dst: Path, times: Iterable[float], clock: FakeClock) -> tuple[LiveRun, Replayer]:
    """Replay `case` into `dst` up to each recorded time, polling at that time on `clock`."""
    rp = Replayer(case_dir(case), dst)
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


def toasts(app) -> list[str]:
    """The messages of the toasts the app shows (Textual keeps them only in a private list)."""
    return [str(n.message) for n in app._notifications]


def view_settled(app: GymwatchApp) -> bool:
    """The log view finished indexing its file (and any pending jump)."""
    return app.pane.view.settled


async def settled(pilot) -> None:
    """The screen has shown its first poll, the log pane its file, and a following log its end."""
    app = pilot.app
    view = app.pane.view
    assert await wait_for(pilot, lambda: app.run_shown and view_settled(app)
                          and (not view.follow or view.scroll_y >= view.max_scroll_y))


def screen_lines(app) -> list[str]:
    """The screen as a person sees it, a line of text per row (toasts and maximized panes in)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]

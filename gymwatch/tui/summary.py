"""The summary lines: verdict, elapsed, servers ready, trials with rate and ETA, counts, reward."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.widgets import Static

from ..core.model import RunState
from ..core.sanitize import clean
from ..core.verdict import Verdict, counts, mean_reward
from .fmt import STATUS_LOOK, VERDICT_LOOK, duration, plain

COUNT_ORDER = ("completed", "failed", "never_ran", "missing", "pending")


def summary_text(name: str, state: Optional[RunState], v: Optional[Verdict], elapsed: Optional[float],
                 done_total: tuple[int, int], rate: Optional[float], eta: Optional[float]) -> Text:
    t = Text(no_wrap=True, end="")
    if state is None or v is None:
        t.append(" ◌ WAITING ", style="bold black on grey62")
        t.append("  ")
        t.append_text(plain(name, 60, "bold"))
        t.append("  no Gym files here yet; watching", style="dim")
        return t
    label, style = VERDICT_LOOK.get(v.name, (v.name.upper(), "bold"))
    t.append(f" {label} ", style=style)
    t.append("  ")
    t.append_text(plain(name, 40, "bold"))
    if elapsed is not None:
        t.append(f"  ⏱ {duration(elapsed)}")
    ready = sum(1 for s in state.servers.values() if s.became_ready)
    n = len(state.servers)
    t.append("  servers ")
    t.append(f"{ready}/{n} ready", style="green" if n and ready == n else "yellow")
    done, total = done_total
    t.append(f"  trials {done}/{total or '?'}")
    if rate is not None:
        t.append(f" · {rate:.2f}/s")
    if eta is not None:
        t.append(f" · ETA {duration(eta)}")
    c = counts(state)
    for k in COUNT_ORDER:
        if c[k]:
            label, style, _ = STATUS_LOOK[k]
            t.append("  ")
            t.append(f"{label.split()[0]}{c[k]}", style=style)
    mr = mean_reward(state)
    if mr is not None:
        t.append(f"  mean reward {mr:.3f}")
    return t


def reason_text(state: Optional[RunState], v: Optional[Verdict], waiting: str, mode: str = "") -> Text:
    t = Text(no_wrap=True, end="")
    if mode:
        t.append(f"[{clean(mode)}] ", style="dim")      # file names in it: never markup, no escapes
    if v is None:
        t.append_text(plain(waiting, 300, "dim"))
        return t
    if v.evidence is not None:
        t.append("see ", style="dim")
        t.append_text(plain(v.evidence.where(), 60, "underline"))
        t.append(" (!)  ", style="dim")
    t.append_text(plain(v.reason, 300))
    return t


class Summary(Static):
    def show(self, line1: Text, line2: Text) -> None:
        text = Text("\n").join([line1, line2])
        text.no_wrap, text.overflow = True, "ellipsis"
        self.update(text)

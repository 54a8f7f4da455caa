"""The summary lines: verdict, elapsed, servers ready, trials with rate and ETA, counts, reward;
then the verdict's reason and its evidence `file:line`.

Never cut, on any width: the first line's items move to a next line whole (an item is broken only
when it is wider than the screen), the reason wraps at words, and the widget is as tall as that.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.widget import Widget

from ..core import pace, score
from ..core.health import disagreement
from ..core.model import T_COMPLETED, T_FAILED, T_MISSING, T_NEVER_RAN, T_PENDING, RunState, ongoing_stall
from ..core.sanitize import clean
from ..core.verdict import Verdict, counts
from .fmt import STALLED_LOOK, STATUS_LOOK, VERDICT_LOOK, duration, plain

COUNT_ORDER = (T_COMPLETED, T_FAILED, T_NEVER_RAN, T_MISSING, T_PENDING)
GAP = "  "
REASON_MAX = 4000       # characters: a bound for pathological input, never reached by a real reason


class Items(Text):
    """A Text made of items separated by GAP: `breaks` are where a line may be broken."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.breaks: list[int] = []

    def gap(self) -> None:
        self.breaks.append(len(self))
        self.append(GAP)


def pack(t: Text, width: int) -> Text:
    """`t`'s items on as many lines as `width` needs (items whole, unless one alone is wider)."""
    breaks = getattr(t, "breaks", [])
    if width <= 0 or t.cell_len <= width or not breaks:
        return t
    pieces, start = [], 0
    for b in breaks + [len(t)]:
        pieces.append(t[start:b])
        start = b + len(GAP)
    lines: list[Text] = []
    for piece in pieces:
        if lines and lines[-1].cell_len + len(GAP) + piece.cell_len <= width:
            lines[-1].append(GAP)
            lines[-1].append_text(piece)
        else:
            lines.append(piece.copy())
    out = Text("\n").join(lines)
    out.end = ""
    return out


def summary_text(name: str, state: Optional[RunState], v: Optional[Verdict], elapsed: Optional[float],
                 done_total: tuple[int, int], rate: Optional[float], eta: Optional[float]) -> Text:
    t = Items(no_wrap=True, end="")
    if state is None or v is None:
        t.append(" ◌ WAITING ", style="bold black on grey62")
        t.gap()
        t.append_text(plain(name, 60, "bold"))
        t.gap()
        t.append("no Gym files here yet; watching", style="dim")
        return t
    label, style = STALLED_LOOK if ongoing_stall(state) is not None else VERDICT_LOOK.get(v.name, (v.name.upper(), "bold"))
    t.append(f" {label} ", style=style)
    t.gap()
    t.append_text(plain(name, 40, "bold"))
    if elapsed is not None:
        t.gap()
        t.append(f"⏱ {duration(elapsed)}")
    ready = sum(1 for s in state.servers.values() if s.became_ready)
    n = len(state.servers)
    t.gap()
    t.append("servers ")
    t.append(f"{ready}/{n} ready", style="green" if n and ready == n else "yellow")
    done, total = done_total
    t.gap()
    t.append(f"trials {done}/{total or '?'}")
    if rate is not None:
        t.append(f" · {rate:.2f}/s")
    if eta is not None:
        t.append(f" · ETA {duration(eta)}")
    c = counts(state)
    for k in COUNT_ORDER:
        if c[k]:
            label, style, _ = STATUS_LOOK[k]
            t.gap()
            t.append(f"{label.split()[0]}{c[k]}", style=style)
    d = score.denominator(state)
    if d.mean is not None:      # over how many of how many (core/score.py)
        t.gap()
        t.append(f"mean reward {d.mean:.3f} over {d.scored}/{d.out_of}")
    gym = next((g.key_metrics["mean/reward"] for g in state.gym_scores if "mean/reward" in g.key_metrics), None)
    if gym is not None and (d.mean is None or abs(gym - d.mean) >= 0.0005):
        # Gym's own where it differs (`gymwatch report` has all its key metrics and why they differ)
        t.gap()
        g = state.gym_scores[0]
        over = f" over {g.sample_count}" if len(state.gym_scores) == 1 and g.sample_count is not None else ""
        t.append(f"Gym {gym:.3f}{over}", style="dim")
    past = [st for st in state.stalls if st.how]
    if past:      # the run keeps its stalls: the last one, and how many more
        t.gap()
        more = f" (+{len(past) - 1} more)" if len(past) > 1 else ""
        t.append(pace.note(past[-1]) + more, style="yellow")
    h = state.health_totals
    if h is not None:
        t.gap()
        t.append(f"Gym health {h.healthy}✓ {h.unhealthy}✗ {h.unobserved}?", style="dim")
        odd = sum(1 for tr in state.trials.values() if disagreement(tr.status, state.health.get(tr.key)))
        if odd:
            t.append(f" ≠{odd}", style="bold yellow")
    if state.ray is not None:       # `--ray`: the cluster under the run
        t.gap()
        t.append_text(ray_item(state))
    return t


def ray_item(state: RunState) -> Text:
    """`Ray: 3 nodes, 1 dead`, or why its dashboard could not be read."""
    ray = state.ray
    if ray is None:
        return Text()
    if ray.error:
        return plain(f"Ray: {ray.error}", 120, "yellow")
    n, dead = len(ray.nodes), len(ray.dead_nodes)
    words = f"Ray: {n} node{'' if n == 1 else 's'}" + (f", {dead} dead" if dead else "")
    return Text(words, style="bold red" if dead else "dim")


def reason_text(state: Optional[RunState], v: Optional[Verdict], waiting: str, mode: str = "") -> Text:
    """The verdict's evidence `file:line` and its reason, whole (they wrap; nothing is cut)."""
    t = Text(end="", overflow="fold")
    if mode:
        t.append(f"[{clean(mode)}] ", style="dim")      # file names in it: never markup, no escapes
    if v is None:
        t.append_text(plain(waiting, REASON_MAX, "dim"))
        return t
    if v.evidence is not None:
        t.append("see ", style="dim")
        t.append_text(plain(v.evidence.where(), REASON_MAX, "underline"))
        t.append(" (!)  ", style="dim")
    t.append_text(plain(v.reason, REASON_MAX))
    return t


class Summary(Widget):
    """Two kinds of line: the items of `line1`, packed to the width; `line2`, word-wrapped. As
    tall as they need (`height: auto` measures with the width it is given)."""

    DEFAULT_CSS = "Summary { height: auto; }"

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._line1: Text = Text()
        self._line2: Text = Text()
        self._width = 0            # the width the last layout measured at

    def show(self, line1: Text, line2: Text) -> None:
        """New lines: a repaint, and a layout only when they change how tall it is (a live run's
        clock moves every second; the same lines, the tick of a run where nothing moved: nothing)."""
        if line1 == self._line1 and line2 == self._line2:
            return
        before = self._height(self._width) if self._width else None
        self._line1, self._line2 = line1, line2
        self.refresh(layout=before is None or self._height(self._width) != before)

    def text(self, width: int) -> Text:
        line2 = self._line2.copy()
        line2.no_wrap, line2.overflow = False, "fold"
        out = Text("\n").join([pack(self._line1, width), line2])
        out.no_wrap, out.overflow, out.end = False, "fold", ""
        return out

    def items_height(self) -> int:
        """Lines the first line's items (the verdict, the counts) take at the width shown."""
        width = self.content_region.width or self._width
        return len(pack(self._line1, width).wrap(self.app.console, max(1, width), overflow="fold"))

    def get_content_height(self, container, viewport, width: int) -> int:
        self._width = width
        return self._height(width)

    def _height(self, width: int) -> int:
        return len(self.text(width).wrap(self.app.console, max(1, width), overflow="fold"))

    def render(self) -> Text:
        width = self.content_region.width or self._width
        t = self.text(width)
        if width > 0:      # wrapped here, the way the height was measured: no line is lost
            t = Text("\n").join(t.wrap(self.app.console, width, overflow="fold"))
            t.no_wrap, t.end = True, ""
        return t

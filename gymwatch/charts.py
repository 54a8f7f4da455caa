"""The charts as text: a Mermaid gantt of the startup timeline (CI pages render it), and bars of
block characters for throughput, rewards and tokens, which the Markdown report puts in code blocks
and the screen shows as they are. Drawn from core/timeline.py, core/figures.py and core/costs.py:
nothing here reads the run or decides what a figure means, only how it looks.

Everything a log or a row supplied (server and agent names) goes through `clean()`; the Mermaid
text keeps to the characters its gantt grammar allows in a task or section name.
"""

from __future__ import annotations

import math
import re
from typing import Optional

from .core.costs import ESTIMATED, GYM, SLOW, TOKENS, Cost, Percentiles
from .core.figures import ANSWERED, SEEN, Spread, Throughput
from .core.model import S_FAILED, S_READY, S_STOPPED
from .core.sanitize import clean
from .core.timeline import Lane, Span, Startup

FULL, FAILED_MARK, NEVER_MARK = "█", "×", "░"       # a completed, a failed, a never-ran result
EIGHTHS = " ▏▎▍▌▋▊▉"                                 # a bar's last part, in eighths of a character
BAR = 40           # the longest bar in a report
MOST_ROWS = 30     # throughput rows in a report (minutes merged to fit)
OUTCOME_WORDS = {S_READY: "ready", S_FAILED: "failed", S_STOPPED: "stopped before ready"}


def duration(seconds: Optional[float]) -> str:
    """`0.12s`, `42s`, `3m05s`, `2h10m`."""
    if seconds is None:
        return "?"
    if seconds < 10:
        return "<0.01s" if seconds < 0.01 else f"{seconds:.2f}s" if seconds < 1 else f"{seconds:.1f}s"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def number(x: float) -> str:
    """A count or a figure, short: 12, 1.5k, 2.3M; 0.25."""
    if x != int(x):
        return f"{x:.3g}"
    n = int(x)
    if abs(n) < 10_000:
        return str(n)
    if abs(n) < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def bar(value: float, peak: float, width: int) -> str:
    """A bar `value / peak` of `width` characters long, in eighths (at least a sliver when > 0)."""
    if peak <= 0 or value <= 0:
        return ""
    eighths = max(1, round(value / peak * width * 8))
    return FULL * (eighths // 8) + (EIGHTHS[eighths % 8] if eighths % 8 else "")


# --- startup timeline --------------------------------------------------------------------------
_MERMAID_NAME = re.compile(r"[^A-Za-z0-9 _./()+\-]")


def _mermaid_name(text: str) -> str:
    """Text a gantt task or section name may hold: none of `:` `#` `;` (the grammar's separators)
    nor a line end; anything else outside a plain set becomes `_`."""
    return _MERMAID_NAME.sub("_", clean(text)).strip() or "_"


def mermaid_gantt(st: Startup) -> list[str]:
    """The startup timeline as a Mermaid gantt (in a ```mermaid block): a section a server, a task
    a step with its duration, the critical server's tasks marked `crit`, a step still going
    `active`. [] when no step has a time."""
    if not st.timed:
        return []
    out = ["```mermaid", "gantt", "    title Startup: each server's steps" + (
        f", ready after {duration(st.took)}" if st.took is not None and st.critical else ""),
           "    dateFormat x", "    axisFormat %H:%M:%S"]
    for n, lane in enumerate(st.lanes):
        if not lane.spans:
            continue
        title = lane.name + (" (critical path)" if lane.critical else "")
        out.append(f"    section {_mermaid_name(title)}")
        for i, sp in enumerate(lane.spans):
            end = sp.end if sp.end is not None else st.end
            if end is None:
                continue
            tags = ["crit"] if lane.critical else []
            if sp.end is None:
                tags.append("active")
            last = i == len(lane.spans) - 1
            words = sp.label + (f" then {OUTCOME_WORDS[lane.outcome]}" if last and lane.outcome else "")
            start_ms, end_ms = round(sp.start * 1000), max(round(end * 1000), round(sp.start * 1000) + 1)
            data = ", ".join([*tags, f"s{n}_{i}", str(start_ms), str(end_ms)])
            out.append(f"    {_mermaid_name(f'{words} {duration(end - sp.start)}')} :{data}")
    out.append("```")
    return out


def lane_cells(st: Startup, lane: Lane, width: int) -> list[tuple[int, int, Span]]:
    """Where each of the lane's spans falls on an axis of `width` cells from the first step to
    the end: (first cell, cell after the last, span), at least one cell each."""
    if st.start is None or st.end is None:
        return []
    span = max(st.end - st.start, 1e-9)
    out = []
    for sp in lane.spans:
        end = sp.end if sp.end is not None else st.end
        a = min(width - 1, int((sp.start - st.start) / span * width))
        b = max(a + 1, min(width, int(math.ceil((end - st.start) / span * width))))
        out.append((a, b, sp))
    return out


def lane_tail(st: Startup, lane: Lane) -> str:
    """What a lane's row says after its bar: `ready at +55s`, or the step it is in."""
    took = lane.ended - st.start if lane.ended is not None and st.start is not None else None
    if lane.outcome and took is not None:
        return f"{OUTCOME_WORDS.get(lane.outcome, lane.outcome)} at +{duration(took)}"
    if lane.outcome:
        return OUTCOME_WORDS.get(lane.outcome, lane.outcome)
    return lane.spans[-1].label if lane.spans else ", ".join(lane.untimed) or "no output yet"


def startup_lines(st: Startup, width: int = BAR) -> list[str]:
    """The timeline as text: a row a server, its steps as bars on one axis (█ and ▓ by turns),
    the critical one marked `*`."""
    if not st.timed:
        return []
    name_w = min(max((len(ln.name) for ln in st.lanes), default=4), 40)
    out = []
    for lane in st.lanes:
        line = [" "] * width
        for i, (a, b, _) in enumerate(lane_cells(st, lane, width)):
            line[a:b] = "█▓"[i % 2] * (b - a)
        mark = "*" if lane.critical else " "
        out.append(f"{mark} {clean(lane.name)[:name_w]:<{name_w}} |{''.join(line)}| {clean(lane_tail(st, lane))}")
    return out


def startup_steps(st: Startup) -> list[str]:
    """Each server's steps in words with their durations: `mcqa: venv create 13s, start 29s; ready`."""
    out = []
    for lane in st.lanes:
        parts = [f"{sp.label} {duration(sp.length(st.end or sp.start))}" for sp in lane.spans]
        if not parts and lane.untimed:
            parts = [", ".join(lane.untimed) + " (untimed)"]
        end = OUTCOME_WORDS.get(lane.outcome, "")
        waited = f" (waited for {', '.join(lane.waited_for)}'s venv)" if lane.waited_for else ""
        critical = " (critical path)" if lane.critical else ""
        out.append(f"{clean(lane.name)}{critical}: {', '.join(parts) or 'no step seen'}" + (f"; {end}" if end else "")
                   + clean(waited))
    return out


# --- throughput --------------------------------------------------------------------------------
COMPLETED_PART, FAILED_PART, NEVER_PART = "completed", "failed", "never_ran"
PART_MARK = {COMPLETED_PART: FULL, FAILED_PART: FAILED_MARK, NEVER_PART: NEVER_MARK}


def throughput_rows(tp: Throughput, width: int = BAR, rows: int = MOST_ROWS) -> list[tuple[str, list[tuple[str, int]], str]]:
    """Each bucket (merged to at most `rows`): its label (`+h:mm` from the first result, `+m:ss` for
    buckets under a minute, and its count), its bar's parts (kind, cells: each at least one when there
    is any of it) and a note."""
    shown = tp.merged(rows)
    if not shown.buckets:
        return []
    first, peak = shown.buckets[0].start, shown.peak
    count_w = len(str(peak))
    out = []
    for b in shown.buckets:
        parts = [(kind, max(1, round(n / peak * width))) for kind, n in
                 ((COMPLETED_PART, b.completed), (FAILED_PART, b.failed), (NEVER_PART, b.never_ran)) if n]
        notes = ", ".join(f"{n} {w}" for n, w in ((b.failed, "failed"), (b.never_ran, "never ran")) if n)
        out.append((f"{_offset(b.start - first, shown.width)} {b.total:>{count_w}}", parts, notes))
    return out


def _offset(seconds: float, width: float) -> str:
    """A bucket's start from the first result's: `+h:mm`, or `+m:ss` when buckets are under a minute."""
    s = int(seconds)
    if width < 60:
        return f"+{s // 60}:{s % 60:02d}"
    return f"+{s // 3600}:{s // 60 % 60:02d}"


def per_words(width: float) -> str:
    """A bucket's width in words: `10 s`, `minute`, `5 minutes`, `hour`, `6 hours`."""
    w = int(width)
    if w < 60:
        return f"{w} s"
    if w < 3600:
        return "minute" if w == 60 else f"{w // 60} minutes"
    return "hour" if w == 3600 else f"{w // 3600} hours"


def throughput_lines(tp: Throughput, width: int = BAR, rows: int = MOST_ROWS) -> list[str]:
    """Results per bucket as bars from the first result (`+h:mm`, or `+m:ss`): completed █, failed ×, never ran ░."""
    return [(f"{label} {''.join(PART_MARK[k] * n for k, n in parts)}".rstrip() + (f"  {notes}" if notes else ""))
            for label, parts, notes in throughput_rows(tp, width, rows)]


def throughput_caption(tp: Throughput, rows: int = MOST_ROWS) -> str:
    """What the bars of `throughput_rows(tp, rows=rows)` count, and by which clock."""
    basis = {SEEN: "when gymwatch saw each result arrive" + (
                 " (those already there: when the model answered them)" if tp.mixed else ""),
             ANSWERED: "when the model answered each (response.created_at: the run was read after the fact)"}
    per = per_words(tp.merged(rows).width)
    untimed = sum(tp.untimed.values())
    left = f"; {untimed} result(s) with no time left out" if untimed and tp.buckets else ""
    return (f"Results per {per}, by {basis.get(tp.basis, 'time')}: {FULL} completed, {FAILED_MARK} failed, "
            f"{NEVER_MARK} never ran{left}.")


# --- distributions -----------------------------------------------------------------------------
def spread_rows(sp: Spread, width: int = BAR, fmt=None) -> list[tuple[str, str]]:
    """A histogram: per bin, its label (`lo` for a bin of one value, `lo-hi` else, and its count)
    and its bar."""
    if not sp.bins:
        return []
    fmt = fmt or number
    labels = [fmt(b.lo) if b.lo == b.hi else f"{fmt(b.lo)}-{fmt(b.hi)}" for b in sp.bins]
    lw = max(len(x) for x in labels)
    cw = len(str(sp.peak))
    return [(f"{lab:>{lw}} {b.count:>{cw}}", bar(b.count, sp.peak, width)) for lab, b in zip(labels, sp.bins, strict=True)]


def spread_lines(sp: Spread, width: int = BAR, fmt=None) -> list[str]:
    return [f"{label} {b}" for label, b in spread_rows(sp, width, fmt)]


def reward(x: float) -> str:
    return f"{x:.3g}"


# --- cost and speed ----------------------------------------------------------------------------
def pct(p: Optional[Percentiles], fmt=number) -> str:
    return f"{fmt(p.p50)} / {fmt(p.p90)} / {fmt(p.max)}" if p is not None else "-"


def duration_words(c: Cost) -> str:
    if c.duration is None:
        return "not recorded"
    d = c.duration
    src = {GYM: "Gym's ng_perf", ESTIMATED: "estimated from arrivals"}.get(c.duration_from, "")
    return f"{duration(d.p50)} / {duration(d.p90)} ({src})"


def outlier_words(c: Cost) -> list[str]:
    """`task 3 rollout 1: 9.1k output tokens (typical 210)`, the most extreme first."""
    out = []
    for o in c.outliers:
        what = (f"{number(o.value)} output tokens (typical {number(o.typical)})" if o.kind == TOKENS
                else f"took {duration(o.value)} (typical {duration(o.typical)})" if o.kind == SLOW else o.kind)
        out.append(f"task {o.key[0]} rollout {o.key[1]}: {what}")
    more = sum(c.outlier_counts.values()) - len(c.outliers)
    if more > 0:
        out.append(f"... {more} more")
    return out


def cost_lines(costs: list[Cost]) -> list[str]:
    """The text report's cost section."""
    if not costs:
        return []
    out = ["cost and speed per agent (per trial: p50 / p90 / max; duration p50 / p90):"]
    for c in costs:
        out.append(f"  {clean(c.agent)}: {c.trials} trial(s); input tokens {number(c.input_tokens)} "
                   f"({pct(c.input)}), output tokens {number(c.output_tokens)} ({pct(c.output)}); "
                   f"duration {duration_words(c)}")
        for w in outlier_words(c):
            out.append(f"    far off: {w}")
    return out

"""Columns of the runs list, shared by the text output and the TUI table (no Textual here)."""

from __future__ import annotations

import os
import time
from typing import Any, Optional

from ..core.model import (
    V_COLLECTING,
    V_COLLECTION_ABORTED,
    V_INCOMPLETE,
    V_NO_AGENT_RAN,
    V_OK,
    V_QUEUED,
    V_SOME_FAILED,
    V_SOME_NEVER_RAN,
    V_STARTING,
    V_STARTUP_FAILED,
    V_UNREADABLE,
)
from ..core.sanitize import clean

# (key, header): the list's columns, left to right: the run and its verdict first. A header is
# the word the rest of gymwatch uses (`completed`, as the live screen and the report count trials).
COLUMNS = (
    ("run", "run"), ("verdict", "verdict"), ("started", "started"), ("completed", "completed"), ("failed", "failed"),
    ("never_ran", "never ran"), ("missing", "missing"), ("reward", "reward"), ("duration", "duration"),
    ("servers", "servers"), ("name", "environment / agent"),
)
# What a narrow screen keeps, first kept first (run and verdict always stay): the trials that went
# wrong before those that went right, then what the run was.
KEEP_ORDER = ("failed", "never_ran", "missing", "completed", "reward", "started", "duration", "servers", "name")
# ... when submissions are listed: their benchmarks' states (the name column) before the counts.
SUBMISSIONS_KEEP_ORDER = ("name", "failed", "never_ran", "missing", "completed", "started", "reward", "duration",
                          "servers")
PROBLEM = "problem"     # the verdict filter for every verdict but ok
ERROR = "error"         # a run the summary could not read (listed, never hidden)
# Worst first: the verdict filter's cycle and the verdict sort.
VERDICT_ORDER = (V_STARTUP_FAILED, V_NO_AGENT_RAN, V_COLLECTION_ABORTED, V_INCOMPLETE, V_SOME_NEVER_RAN,
                 V_SOME_FAILED, V_UNREADABLE, ERROR, V_QUEUED, V_STARTING, V_COLLECTING, V_OK)


def started(ts: Optional[float]) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "?"    # ?: the run records none


def duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def name(run: dict[str, Any]) -> str:
    if run.get("kind") == "submission":
        return benchmarks_text(run)
    parts = [clean(str(run[k])) for k in ("environment", "agent") if run.get(k)]
    return " / ".join(parts) or "-"


def benchmarks_text(row: dict[str, Any]) -> str:
    """The list's words for a submission's benchmarks: `mcqa: running, collecting, mean 0.620 · aime: queued`."""
    parts = []
    for b in row.get("benchmarks") or []:
        words = [w for w in (b.get("state"), (b.get("verdict") or "").replace("_", " ")) if w]
        words = list(dict.fromkeys(words))          # queued, queued: once
        if b.get("mean_reward") is not None:
            words.append(f"mean {b['mean_reward']:.3f}")
        parts.append(f"{b['name']}: {', '.join(words)}" if words else b["name"])
    return clean(" · ".join(parts))


def rel(path: str, roots: list[str]) -> str:
    for root in roots:
        r = os.path.abspath(root)
        if path == r:
            return "."
        if path.startswith(r.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, r)
    return path


def cells(run: dict[str, Any], roots: list[str]) -> dict[str, str]:
    t = run.get("trials") or {}
    failed = run.get("servers_failed")
    known = run.get("servers")
    servers = ("?" if known is None else str(known)) + (f" ({failed} failed)" if failed else "")
    reward = run.get("mean_reward")
    return {
        "started": started(run.get("started")), "name": name(run), "servers": servers,
        "completed": str(t.get("completed", 0)), "failed": str(t.get("failed", 0)),
        "never_ran": str(t.get("never_ran", 0)), "missing": str(t.get("missing", 0)),
        "reward": "-" if reward is None else f"{reward:.3f}",
        "verdict": run.get("verdict", "?") + ("~" if run.get("sampled") else ""),
        "duration": duration(run.get("duration")), "run": run_name(run["path"], roots),
    }


def run_name(path: str, roots: list[str]) -> str:
    """A run as the list names it: its path under the root it was found in."""
    return clean(rel(path, roots))


def sort_key(run: dict[str, Any]) -> tuple:
    """Newest first; runs without a time last; then by path."""
    return (-(run.get("started") or 0), run["path"])


def text_table(runs: list[dict[str, Any]], roots: list[str]) -> str:
    rows = [[h for _, h in COLUMNS]] + [[c[k] for k, _ in COLUMNS] for c in (cells(r, roots) for r in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    subs = sum(1 for r in runs if r.get("kind") == "submission")
    n = len(runs) - subs
    lines.append(f"{n} run{'s' if n != 1 else ''}"
                 + (f", {subs} submission{'s' if subs != 1 else ''} (gym eval submit: read from their files, "
                    "Slurm not asked)" if subs else "")
                 + ("  (~ = a log too big to read whole was sampled)" if any(r.get("sampled") for r in runs) else ""))
    return "\n".join(lines) + "\n"


RUN_MIN = 22        # the run column is cut down to this for any other column to fit


def fit(widths: dict[str, int], room: int, order: tuple[str, ...] = KEEP_ORDER) -> tuple[list[str], int]:
    """The columns that fit in `room` cells (each takes its width plus 2 of padding) and the run
    column's width. Columns are taken by KEEP_ORDER while the run keeps RUN_MIN cells (a long run
    path is cut, `shorten`): one that does not fit is left out and the next ones are still tried,
    so no room stays empty that a column left out would fit in; the run takes what is left, whole
    when it can. Run and verdict always stay, the run cut to what is left; at 80 columns the failed,
    never ran and missing counts always fit beside the longest verdict."""
    natural = widths["run"]
    run_min = min(natural, RUN_MIN)
    keep = {"run", "verdict"}
    left = room - 2 - (widths["verdict"] + 2)          # for the run and the other columns
    for key in order:
        need = widths[key] + 2
        if left - need >= run_min:
            keep.add(key)
            left -= need
    return [k for k, _ in COLUMNS if k in keep], max(min(natural, left), min(natural, 8))


def shorten(text: str, width: int) -> str:
    """`text` cut in the middle to `width` characters: a run's path keeps its start and, longer,
    its end (the run's own directory)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    head = (width - 1) // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]

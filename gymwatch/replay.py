"""`gymwatch replay SRC DST`: re-write a recorded run's files into DST over time, the way Gym wrote them.

With SRC/timeline.jsonl ({t, file, size} lines) each file gets `final_bytes[:size]` at time t.
Without one, a plausible timeline is synthesized: logs first, the materialized inputs at once,
rollout rows appended one by one (each written in two halves: a partial line, then the rest),
end-of-run files last.

DST is the replay's own output, so it says what it is in a marker file (`.gymwatch-replay`: the
source and the speed): the screen then looks for no processes, and its clock runs at the replay's
speed, so a duration on screen is the run's own and agrees with what Gym says (`core.layout.replay_speed()`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .core.layout import REPLAY_MARKER
from .errors import UsageError, UserError

TIMELINE = "timeline.jsonl"
RECORDER_FILES = {"README.md", "truth.json", TIMELINE, "commands.txt"}
RECORDER_DIRS = {"_driver", "_stub"}
END_NAMES = {"summary.json", "report.html", "scores.jsonl", "trials.jsonl", "tasks.jsonl"}
SYNTH_SECONDS = 20.0


@dataclass(frozen=True, slots=True)
class Step:
    t: float
    file: str      # relative to SRC / DST
    size: int


class ReplayError(Exception):
    """A replay that cannot start (bad SRC, non-empty DST)."""


def load_timeline(src: Path) -> list[Step]:
    path = src / TIMELINE
    if not path.is_file():
        return synthesize(src)
    steps = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.strip():
            d = json.loads(raw)
            steps.append(Step(float(d["t"]), str(d["file"]), int(d["size"])))
    steps.sort(key=lambda s: s.t)
    return steps


# --- synthesis (runs recorded without a timeline) -----------------------------------------
def run_files(src: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in RECORDER_DIRS)
        for name in sorted(filenames):
            rel = os.path.relpath(os.path.join(dirpath, name), src)
            if rel not in RECORDER_FILES:
                out.append(rel)
    return out


def synthesize(src: Path, total: float = SYNTH_SECONDS) -> list[Step]:
    steps: list[Step] = []
    for rel in run_files(src):
        data = (src / rel).read_bytes()
        steps.extend(_file_steps(rel, data, total))
    steps.sort(key=lambda s: s.t)
    return steps


def _file_steps(rel: str, data: bytes, total: float) -> list[Step]:
    name = os.path.basename(rel)
    if name.endswith("_aggregate_metrics.json") or name in END_NAMES:
        return [Step(total, rel, len(data))]
    if name.endswith("_materialized_inputs.jsonl"):
        return [Step(0.40 * total, rel, len(data))]
    if name.endswith(".jsonl") and "input" not in name:
        return _rows(rel, data, 0.45 * total, 0.95 * total, halves=True)
    if name.endswith((".log", ".txt")):
        start = 0.40 * total if "eval" in name else 0.0
        return _rows(rel, data, start, 0.9 * total, halves=False, chunks=12)
    return [Step(0.0, rel, len(data))]


def _rows(rel: str, data: bytes, t0: float, t1: float, halves: bool, chunks: int = 0) -> list[Step]:
    """Append `data` line by line between t0 and t1 (or in `chunks` line groups)."""
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    if not ends or ends[-1] != len(data):
        ends.append(len(data))
    if chunks and len(ends) > chunks:
        ends = [ends[min(len(ends) - 1, (k + 1) * len(ends) // chunks - 1)] for k in range(chunks)]
    steps, prev = [Step(t0, rel, 0)], 0
    span = (t1 - t0) / max(1, len(ends))
    for i, end in enumerate(ends):
        t = t0 + (i + 1) * span
        if halves and end - prev > 2:
            steps.append(Step(t - span / 2, rel, prev + (end - prev) // 2))   # a partial line
        steps.append(Step(t, rel, end))
        prev = end
    return steps


# --- writing ---------------------------------------------------------------------------------
class Replayer:
    """Applies timeline steps to DST; `step_to(t)` writes everything due by recorded time t."""

    def __init__(self, src: Path | str, dst: Path | str, steps: Optional[list[Step]] = None, speed: float = 1.0):
        self.src, self.dst, self.speed = Path(src), Path(dst), float(speed)
        if not self.src.is_dir():
            raise ReplayError(f"{src}: {'not a directory' if self.src.exists() else 'no such file or directory'}")
        if not self.speed > 0:
            raise ReplayError("--speed must be > 0")
        check_empty(self.dst)
        self.steps = steps if steps is not None else load_timeline(self.src)
        self.pos = 0
        self.sizes: dict[str, int] = {}
        self._final: dict[str, bytes] = {}
        self.dst.mkdir(parents=True, exist_ok=True)
        marker = {"src": str(self.src), "speed": self.speed}
        (self.dst / REPLAY_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")

    @property
    def end(self) -> float:
        return self.steps[-1].t if self.steps else 0.0

    @property
    def done(self) -> bool:
        return self.pos >= len(self.steps)

    def step_to(self, t: float) -> int:
        """Write every step with time <= t; returns how many were applied."""
        n = 0
        while self.pos < len(self.steps) and self.steps[self.pos].t <= t:
            self._apply(self.steps[self.pos])
            self.pos += 1
            n += 1
        return n

    def _apply(self, step: Step) -> None:
        data = self._final.get(step.file)
        if data is None:
            data = self._final[step.file] = (self.src / step.file).read_bytes()
        path = self.dst / step.file
        path.parent.mkdir(parents=True, exist_ok=True)
        have = self.sizes.get(step.file, 0)
        size = min(step.size, len(data))
        if size < have or not path.exists():
            have = 0
            path.write_bytes(b"")
        with open(path, "ab") as fh:
            fh.write(data[have:size])
        self.sizes[step.file] = size

    def run(self, sleep: Callable[[float], None] = time.sleep, until: Optional[float] = None) -> None:
        """Write the steps as they fall due at the replay's speed (the one its marker says)."""
        speed = self.speed
        start = time.monotonic()
        stop = self.end if until is None else min(until, self.end)
        while not self.done and self.steps[self.pos].t <= stop:
            due = self.steps[self.pos].t / speed - (time.monotonic() - start)
            if due > 0:
                sleep(min(due, 0.5))
                continue
            self.step_to((time.monotonic() - start) * speed)


def check_empty(dst: Path) -> None:
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise ReplayError(f"{dst}: already exists and is not an empty directory; refusing to write into it")


# --- command line ----------------------------------------------------------------------------
def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="re-write a recorded run into DST over time, as Gym wrote it")
    p.add_argument("src", help="a recorded run dir (uses its timeline.jsonl when present)")
    p.add_argument("dst", help="an empty or new directory to write into")
    p.add_argument("--speed", type=float, default=1.0, help="time factor, e.g. 5 = five times faster")
    p.add_argument("--until", type=float, default=None, help="stop at this recorded time (seconds)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    if not args.speed > 0:
        raise UsageError(f"replay: --speed must be > 0 (got {args.speed:g})")
    try:
        rp = Replayer(args.src, args.dst, speed=args.speed)
    except (ReplayError, OSError, ValueError, KeyError) as exc:
        raise UserError(str(exc)) from None
    print(f"replaying {args.src} into {args.dst}: {len(rp.steps)} steps over "
          f"{rp.end / args.speed:.1f}s", file=sys.stderr)
    rp.run(until=args.until)
    return 0

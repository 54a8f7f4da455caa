"""What a rerun can fix: the trials that did not complete, and which of them Gym would run again.

A trial that failed, never ran or is missing can be collected again from its materialized input
row, unless Gym marked one of its failure rows terminal (`_ng_failure_terminal`: Gym's own resume
never retries it). Gym also counts a trial's failure rows as its attempts and its resume stops at
`NEMO_GYM_MAX_ROLLOUT_ATTEMPTS` (default 3); a fresh collection from the retry file is not a
resume, so such a trial is still rerun, with the count said. The failure rows are read from the
run's files on demand, as the card reads a trial's request: the reducer keeps no terminal flag.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

from . import attempts, records
from .model import (
    SRC_FAILURE_ROW,
    T_COMPLETED,
    T_FAILED,
    T_MISSING,
    T_NEVER_RAN,
    T_PENDING,
    TRIAL_STATUSES,
    Evidence,
    RunState,
    Trial,
)

DID_NOT_COMPLETE = (T_FAILED, T_NEVER_RAN, T_MISSING)
assert set(TRIAL_STATUSES) == {T_PENDING, T_COMPLETED, *DID_NOT_COMPLETE}
MAX_ATTEMPTS_VAR = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"
DEFAULT_MAX_ATTEMPTS = 3          # Gym's default when the variable is unset or unusable


@dataclass(slots=True)
class RerunTrial:
    """One trial that did not complete, and whether a rerun can fix it."""

    task_index: int
    rollout_index: int
    status: str
    input_line: Optional[int]            # its row in the materialized inputs (1-based)
    attempts_used: int = 0               # failure-sidecar rows Gym wrote for it (Gym's attempt count)
    terminal: Optional[Evidence] = None  # a failure row Gym marked terminal

    @property
    def rerunnable(self) -> bool:
        return self.terminal is None and self.input_line is not None

    def why_not(self) -> str:
        if self.terminal is not None:
            return "Gym marked its failure terminal (_ng_failure_terminal): its own resume never retries it"
        if self.input_line is None:
            return "it has no row in the materialized inputs"
        return ""

    def key(self) -> tuple:
        return (self.task_index, self.rollout_index)


def max_attempts(environ: Optional[dict] = None) -> int:
    """Gym's cap on a resumed trial's attempts, read as Gym reads it (this process's environment)."""
    raw = (os.environ if environ is None else environ).get(MAX_ATTEMPTS_VAR, "")
    try:
        n = int(raw)
    except ValueError:
        return DEFAULT_MAX_ATTEMPTS
    return n if n >= 1 else DEFAULT_MAX_ATTEMPTS


def plan(state: RunState) -> list[RerunTrial]:
    """Every trial that did not complete, by (task, rollout). Pending trials are left out: a
    running collection may still complete them."""
    # by values: a pass over the items touches every key tuple too, far slower on a big run
    done = (T_COMPLETED, T_PENDING)
    trials = sorted((t for t in state.trials.values() if t.status not in done),
                    key=lambda t: (t.task_index, t.rollout_index))
    out: list[RerunTrial] = []
    rows: dict[str, dict[int, RerunTrial]] = {}      # failure rows to read: file -> line -> trial
    for t in trials:
        p = RerunTrial(t.task_index, t.rollout_index, t.status, t.input_line if t.expected else None)
        if t.source == SRC_FAILURE_ROW or t.earlier:
            for ev in _failure_evidence(t):
                p.attempts_used += 1
                rows.setdefault(ev.file, {})[ev.line] = p
        out.append(p)
    _mark_terminal(state.root, rows)
    return out


def _failure_evidence(t: Trial) -> Iterator[Evidence]:
    seen = attempts.attempts(t) or [t.current()]
    for a in seen:
        if a.source == SRC_FAILURE_ROW and a.evidence is not None:
            yield a.evidence


def _mark_terminal(root: str, rows: dict[str, dict[int, RerunTrial]]) -> None:
    """Each trial's first failure row Gym marked terminal, read from the run's files (a file that
    never names the key is not read line by line: its rows hold whole requests)."""
    needle = records.FAILURE_TERMINAL_KEY.encode()
    for file, lines in rows.items():
        path = file if os.path.isabs(file) else os.path.join(root, file)
        if not _mentions(path, needle):
            continue
        for n, raw in lines_at(path, lines):
            p = lines[n]
            if p.terminal is None and needle in raw and _terminal(raw):
                p.terminal = Evidence(file, n, raw.decode("utf-8", "replace"))


def _terminal(raw: bytes) -> bool:
    try:
        return records.failure_terminal(records.load_object(raw))
    except records.BadLine:
        return False


def _mentions(path: str, needle: bytes) -> bool:
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return False
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return m.find(needle) >= 0
    except (OSError, ValueError):
        return False


def summary_json(plan: list[RerunTrial], retry_input: Optional[dict] = None) -> dict:
    """The report's `rerun` object: counts, and the trials a rerun has something to say about
    (those it cannot fix; those Gym already tried more than once)."""
    cap = max_attempts()
    return {"rerunnable": sum(p.rerunnable for p in plan), "max_attempts": cap,
            "not_rerunnable": [{"task_index": p.task_index, "rollout_index": p.rollout_index, "status": p.status,
                                "why": p.why_not(), "attempts_used": p.attempts_used,
                                "terminal": p.terminal.to_json() if p.terminal else None}
                               for p in plan if not p.rerunnable],
            "tried_before": [{"task_index": p.task_index, "rollout_index": p.rollout_index, "status": p.status,
                              "attempts_used": p.attempts_used, "resume_would_stop": p.attempts_used >= cap}
                             for p in plan if p.rerunnable and p.attempts_used > 1],
            "retry_input": retry_input}


def summary_lines(plan: list[RerunTrial], limit: int) -> list[str]:
    """The text report's lines on what a rerun can fix ([] when every trial completed)."""
    if not plan:
        return []
    cap, fixable = max_attempts(), sum(p.rerunnable for p in plan)
    out = [f"rerun: {fixable} of {len(plan)} trial(s) that did not complete can be collected again"
           + (" (gymwatch report RUN --retry-input FILE writes them)" if fixable else "")]
    said = [p for p in plan if not p.rerunnable or p.attempts_used >= cap]
    for p in said[:limit]:
        where = f" at {p.terminal.where()}" if p.terminal else ""
        what = (f"cannot be rerun: {p.why_not()}" if not p.rerunnable else
                f"{p.attempts_used} attempts used; Gym's own resume stops at {cap} ({MAX_ATTEMPTS_VAR}), "
                "the retry file runs it again")
        out.append(f"  task {p.task_index} rollout {p.rollout_index}: {what}{where}")
    if len(said) > limit:
        out.append(f"  ... {len(said) - limit} more")
    return out


def lines_at(path: str, wanted: Iterable[int]) -> Iterator[tuple[int, bytes]]:
    """(n, line n's bytes without its `\\n`) for each wanted 1-based line of a file, in one pass
    that stops at the last one wanted; lines past the end, and an unreadable file, give nothing."""
    want = set(wanted)
    if not want:
        return
    last = max(want)
    try:
        fh = open(path, "rb")
    except OSError:
        return
    with fh:
        for n, line in enumerate(fh, 1):
            if n in want:
                yield n, line[:-1] if line.endswith(b"\n") else line
            if n >= last:
                return

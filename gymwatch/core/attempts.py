"""A trial's attempts: which row (or collector line) its status comes from. Used by the reducer only.

A trial is a (task, rollout) pair. Its rows compete: the latest attempt (`_ng_attempt_index`) wins,
and within one attempt a success row beats a failure-sidecar row (a resumed run's success after
an earlier failure; Gym 0.4-0.5 also leave an earlier run's failure rows behind). Collector lines
that name a failed trial (`/run failed ... row={...}`, `rollout dropped from the score ...`) carry
no attempt index: they make the trial failed only while no row is known, and otherwise fill in
what the current failure row lacks (its HTTP status). Every choice is by rank or by file position,
never by arrival, so the model does not depend on the order the files are read in.
"""

from __future__ import annotations

from typing import Optional

from . import records
from .model import SRC_FAILURE_ROW, SRC_LINE, T_COMPLETED, T_FAILED, T_NEVER_RAN, Attempt, Evidence, Trial


def first_row(t: Trial, status: str, facts: records.RowFacts, ev: Evidence, source: int) -> None:
    """The first row of a trial known only as expected (its input): what `observe_row` makes of
    a trial no row and no collector line has named yet."""
    never = status == T_NEVER_RAN
    t.attempt_index, t.status, t.source, t.evidence, t.row_own = facts.attempt, status, source, ev, None
    t.reward = facts.reward if status == T_COMPLETED else None
    t.withheld_reward = facts.reward if never else None
    t.failure_class, t.message, t.http_status = facts.failure_class, facts.message, facts.http_status
    t.agent = facts.agent or t.agent
    t.input_tokens, t.output_tokens = facts.input_tokens, facts.output_tokens
    t.masked = facts.masked
    t.latency, t.answered_at = facts.latency, facts.answered_at


def observe_row(t: Trial, new: Attempt, facts: records.RowFacts) -> None:
    if t.source < SRC_FAILURE_ROW:
        _show(t, new, facts)
    elif _rank(new) > _rank(t.current()):
        _keep_earlier(t, _own(t))
        _show(t, new, facts)
    else:
        _keep_earlier(t, new)
    _fill_from_line(t)


def observe_line(t: Trial, new: Attempt) -> None:
    t.line = new if t.line is None else _merged_lines(t.line, new)
    t.named_at = t.line.evidence
    if t.source < SRC_FAILURE_ROW:
        _show(t, t.line, None)
    else:
        _fill_from_line(t)


def attempts(t: Trial) -> list[Attempt]:
    """Every attempt seen, oldest first; [] for a trial with at most one."""
    rows = list(t.earlier or [])
    if t.source >= SRC_FAILURE_ROW:
        rows.append(t.current())
    if t.line is not None and not _failure(t) and rows:
        failures = [a for a in rows if a.status != T_COMPLETED]
        if failures:
            target = max(failures, key=_rank)
            rows[rows.index(target)] = _filled(target, t.line)
        else:
            rows.append(t.line)
    if len(rows) < 2:
        return []
    return sorted(rows, key=lambda a: (a.attempt_index or 0, a.source))


def _rank(a: Attempt) -> tuple:
    return (a.attempt_index or 0, a.source, _pos(a.evidence))


def _pos(ev: Optional[Evidence]) -> tuple:
    return (ev.file, ev.line) if ev is not None else ("", 0)


def _own(t: Trial) -> Attempt:
    """The current row as it was read, without what a collector line filled in."""
    a = t.current()
    if t.row_own is not None:
        a.failure_class, a.message, a.http_status = t.row_own
        a.named_at = None
    return a


def _show(t: Trial, a: Attempt, facts: Optional[records.RowFacts]) -> None:
    """Make `a` the attempt the trial's status comes from."""
    t.attempt_index, t.status, t.source = a.attempt_index, a.status, a.source
    t.failure_class, t.message, t.http_status, t.evidence = a.failure_class, a.message, a.http_status, a.evidence
    t.row_own = None
    if a.status == T_NEVER_RAN:
        t.reward, t.withheld_reward = None, facts.reward if facts is not None else a.reward
    else:
        t.reward = a.reward if a.status == T_COMPLETED else None
        t.withheld_reward = None
    t.masked = facts.masked if facts is not None else False
    if facts is not None:
        t.agent = facts.agent or t.agent
        t.input_tokens, t.output_tokens = facts.input_tokens, facts.output_tokens
        t.latency, t.answered_at = facts.latency, facts.answered_at


def _failure(t: Trial) -> bool:
    return t.source >= SRC_FAILURE_ROW and t.status in (T_FAILED, T_NEVER_RAN)


def _fill_from_line(t: Trial) -> None:
    """A failure row that lacks its class, message or HTTP status takes them from the lines."""
    if t.line is None or not _failure(t):
        return
    if t.row_own is None:
        t.row_own = (t.failure_class, t.message, t.http_status)
    t.failure_class = t.failure_class or t.line.failure_class
    t.message = t.message or t.line.message
    t.http_status = t.http_status or t.line.http_status


def _filled(a: Attempt, line: Attempt) -> Attempt:
    return Attempt(a.attempt_index, a.status, a.reward, a.failure_class or line.failure_class,
                   a.message or line.message, a.http_status or line.http_status, a.evidence, a.source,
                   line.evidence)


def _merged_lines(a: Attempt, b: Attempt) -> Attempt:
    """Two lines naming one failure (Gym 0.7 prints `/run failed` and `rollout dropped`): the
    earliest line is the evidence; each fact from the earliest line that has it."""
    first, second = sorted((a, b), key=lambda x: _pos(x.evidence))
    return Attempt(None, T_FAILED, None, first.failure_class or second.failure_class,
                   first.message or second.message, first.http_status or second.http_status,
                   first.evidence, SRC_LINE, first.evidence)


def _keep_earlier(t: Trial, a: Attempt) -> None:
    if t.earlier is None:
        t.earlier = []
    t.earlier.append(a)

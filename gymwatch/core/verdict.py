"""Conclusions drawn from the whole state: server failures Gym reported, missing trials, the verdict.

`settle()` is idempotent: it runs after every poll, so the live screen and the
report reach the same conclusions from the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import attribution
from .model import (
    FAILED, READY, EXITED, T_COMPLETED, T_FAILED, T_MISSING, T_NEVER_RAN, T_PENDING, TRIAL_STATUSES,
    V_COLLECTING, V_COLLECTION_ABORTED, V_INCOMPLETE, V_NO_AGENT_RAN, V_OK, V_SOME_NEVER_RAN,
    V_STARTING, V_STARTUP_FAILED, Evidence, RunState,
)
from .servers import fail, set_state

EXIT_OK, EXIT_TRIALS, EXIT_RUN, EXIT_INPUT = 0, 1, 2, 3


@dataclass(slots=True)
class Verdict:
    name: str
    reason: str
    evidence: Optional[Evidence] = None
    related: list[Evidence] = field(default_factory=list)
    exit_code: int = EXIT_OK


def settle(state: RunState, trackers: dict, now: Optional[float] = None) -> set:
    """Apply what Gym's parent and the processes say about servers, and mark missing trials.
    Returns the keys of the trials whose status it changed (views redraw those)."""
    p = state.parent
    env = state.servers.get(state.info.environment)
    if env is not None and env.kind == "unknown":
        env.kind = "resources"
    if p.died_server and p.died_server in state.servers:
        s = state.servers[p.died_server]
        fail(s, trackers[s.name], now, f"Gym: {p.died.text.strip() if p.died else 'process died'}")
    if p.timeout is not None:
        for s in state.servers.values():
            if not s.became_ready and s.state != FAILED:
                fail(s, trackers[s.name], now, f"not ready when Gym gave up: {p.timeout.text.strip()}")
    if parent_gave_up(state):
        for s in state.servers.values():
            if s.became_ready or s.state == FAILED:
                continue
            if s.failure is not None or s.last_line.strip().startswith("Installed "):
                fail(s, trackers[s.name], now, "died during startup")
    if p.finished is not None:
        for s in state.servers.values():
            if s.state == READY:
                set_state(s, EXITED, now, "stopped by Gym")
    ended = collector_ended(state)
    moved = set()
    for t in state.trials.values():
        if t.status == T_PENDING and ended and t.expected:
            t.status = T_MISSING
            moved.add(t.key)
        elif t.status == T_MISSING and not ended:
            t.status = T_PENDING
            moved.add(t.key)
    return moved


def parent_gave_up(state: RunState) -> bool:
    """gym env start ended (or gave up) before every server was ready."""
    return state.parent.all_ready is None and parent_ended(state)


def parent_ended(state: RunState) -> bool:
    p = state.parent
    return bool(p.finished or p.died or p.timeout or p.traceback or (p.started and p.alive is False))


def collector_ended(state: RunState) -> bool:
    """The collector is done: what has no row now never will. Not while rows are still being
    read (a screen catching up with a big run): every pending trial would look missing."""
    c = state.collector
    if state.reading:
        return False
    if c.finished or state.aggregate_written:
        return True
    if not c.started:
        return False
    if c.alive is False:
        return True
    return c.alive is None and c.error is not None


def counts(state: RunState) -> dict[str, int]:
    out = dict.fromkeys(TRIAL_STATUSES, 0)
    for t in state.trials.values():
        out[t.status] += 1
    return out


def mean_reward(state: RunState) -> Optional[float]:
    """Mean over completed trials only: never-ran rewards are withheld, failed ones have none."""
    rewards = [t.reward for t in state.trials.values() if t.status == T_COMPLETED and t.reward is not None]
    return sum(rewards) / len(rewards) if rewards else None


def verdict(state: RunState) -> Verdict:
    c = counts(state)
    records = c[T_COMPLETED] + c[T_FAILED] + c[T_NEVER_RAN]
    if records and c[T_NEVER_RAN] == records and state.unattributed_records == 0 and collector_ended(state):
        return _no_agent_ran(state)
    if not state.collector.started and records == 0:
        if parent_gave_up(state) or any(s.state == FAILED for s in state.servers.values()):
            return _startup_failed(state)
        if state.parent.all_ready and parent_ended(state):
            return Verdict(V_INCOMPLETE, "every server was ready, but gym env start ended before any "
                           "collection ran", state.parent.finished or state.parent.last_line, [], EXIT_TRIALS)
        return Verdict(V_STARTING, _starting_reason(state), state.parent.wait_line or state.parent.all_ready)
    if not collector_ended(state):
        return Verdict(V_COLLECTING, f"{records} of {_total(state)} trials recorded", None)
    c_ = state.collector
    if not c_.finished and not state.aggregate_written:
        if c_.traceback is not None:
            return _aborted(state)
        return _incomplete(state)
    missing = c[T_MISSING]
    if missing:
        return _incomplete(state)
    if c[T_NEVER_RAN]:
        first = _first(state, T_NEVER_RAN)
        v = Verdict(V_SOME_NEVER_RAN, f"{c[T_NEVER_RAN]} of {records} trials never ran: the model was "
                    "never called, their 0.0 rewards are withheld",
                    first.evidence if first else None, exit_code=EXIT_TRIALS)
        cause = attribution.never_ran_cause(state, first)
        if cause:
            v.related.append(cause)
        return v
    code = EXIT_TRIALS if c[T_FAILED] else EXIT_OK
    reason = f"{c[T_COMPLETED]} trials completed" + (f", {c[T_FAILED]} failed" if c[T_FAILED] else "")
    return Verdict(V_OK, reason, None, exit_code=code)


def _exit_words(code: Optional[int]) -> str:
    if code is None:
        return ""
    return f" (killed by signal {-code})" if code < 0 else f" (exit code {code})"


def _total(state: RunState) -> str:
    return str(state.expected_total) if state.expected_total is not None else "?"


def _first(state: RunState, status: str):
    found = [t for t in state.trials.values() if t.status == status]
    found.sort(key=lambda t: (t.evidence.line if t.evidence else 0, t.key[0], t.key[1]))
    return found[0] if found else None


def _starting_reason(state: RunState) -> str:
    p = state.parent
    if p.all_ready:
        return f"all {len(state.servers)} servers ready; no collection started yet"
    waiting = [s.name for s in state.servers.values() if not s.became_ready] or p.pending
    if waiting:
        return f"waiting for {', '.join(waiting)}"
    return "servers starting"


def _no_agent_ran(state: RunState) -> Verdict:
    ev = attribution.agent_log_evidence(state)
    first = _first(state, T_NEVER_RAN)
    related = [first.evidence] if first and first.evidence else []
    return Verdict(V_NO_AGENT_RAN, "no agent ran: every trial shows the model was never called; the "
                   "environment most likely failed to start its agent - read the agent server's log",
                   ev or (first.evidence if first else None), related, EXIT_RUN)


def _startup_failed(state: RunState) -> Verdict:
    failed = [s for s in state.servers.values() if s.state == FAILED]
    p = state.parent
    if failed:
        first = next((s for s in failed if s.name == p.died_server), failed[0])
        related = [e for e in (p.died, p.timeout) if e]
        return Verdict(V_STARTUP_FAILED, f"server {first.name} failed: {first.failure_reason}",
                       first.failure or p.died or p.timeout, related, EXIT_RUN)
    ev = p.timeout or p.error or p.traceback or p.finished or p.last_line
    why = "gym env start ended before all servers were ready"
    if p.pending:
        why += f" (still waiting for {', '.join(p.pending)})"
    if ev is p.error and p.error is not None:
        why += f": {p.error.text.strip()}"
    related = [p.traceback] if p.traceback is not None and ev is not p.traceback else []
    return Verdict(V_STARTUP_FAILED, why, ev, related, EXIT_RUN)


def _aborted(state: RunState) -> Verdict:
    c = state.collector
    ev, related, why = attribution.abort_cause(state)
    return Verdict(V_COLLECTION_ABORTED, why, ev or c.error or c.traceback,
                   [e for e in related if e is not None], EXIT_RUN)


def _incomplete(state: RunState) -> Verdict:
    c = state.collector
    n = sum(1 for t in state.trials.values() if t.status == T_MISSING)
    why = (f"the collector ended without `Finished rollout collection!`{_exit_words(c.exit_code)}; "
           f"{n} trials missing" if not c.finished else f"collection finished but {n} expected trials have no row")
    related = [e for e in (attribution.agent_log_evidence(state),) if e]
    return Verdict(V_INCOMPLETE, why, c.last_line or c.error, related, EXIT_TRIALS)

"""Conclusions drawn from the whole state: the verdict, with its reason and evidence. Read-only:
what a finished or dead run means for its servers and trials is written by the reducer
(`Reducer.settle`); the predicates both use (`parent_ended()`, `collector_ended()`, ...) are the
model's (core/model.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Sequence

from . import attribution, gymlines as gl, pace
from .model import (
    FAILED,
    K_SERVICE,
    T_COMPLETED,
    T_FAILED,
    T_MISSING,
    T_NEVER_RAN,
    TRIAL_STATUSES,
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
    Evidence,
    RunState,
    Server,
    Stall,
    Unreadable,
    collector_ended,
    exited_with_run,
    ongoing_stall,
    parent_ended,
    parent_gave_up,
)

if TYPE_CHECKING:      # (read only for a submitted run: imported when one is)
    from .cluster.model import Conclusion, Link, ServiceStep

EXIT_OK, EXIT_TRIALS, EXIT_RUN, EXIT_INPUT = 0, 1, 2, 3


@dataclass(slots=True)
class Verdict:
    name: str
    reason: str
    evidence: Optional[Evidence] = None
    related: list[Evidence] = field(default_factory=list)
    exit_code: int = EXIT_OK


def stopped_not_dead(state: RunState) -> Optional[Server]:
    """The server Gym called dead when it had exited with the run (exited_with_run), if any."""
    p = state.parent
    s = state.servers.get(p.died_server) if p.died_server else None
    return s if s is not None and exited_with_run(state, s) else None


def _own_traceback(state: RunState) -> Optional[Evidence]:
    """gym env start's traceback, unless it is only Gym's report of a server that exited with the
    run (the traceback ends with that `Process X finished unexpectedly!`)."""
    p = state.parent
    tb, died = p.traceback, p.died
    if tb is not None and died is not None and tb.file == died.file and tb.line < died.line \
            and stopped_not_dead(state) is not None:
        return None
    return tb


def counts(state: RunState) -> dict[str, int]:
    out = dict.fromkeys(TRIAL_STATUSES, 0)
    for t in state.trials.values():
        out[t.status] += 1
    return out


def mean_reward(state: RunState) -> Optional[float]:
    """Mean over the scored trials only (`model.scored`): never-ran rewards are withheld, failed
    ones have none, masked ones measure nothing (core/score.py says over how many of how many)."""
    rewards = [t.reward for t in state.trials.values()      # scored(t), written out: every trial
               if t.status == T_COMPLETED and t.reward is not None and not t.masked]
    return sum(rewards) / len(rewards) if rewards else None


def verdict(state: RunState) -> Verdict:
    """The run's verdict; its related lines each once, none the evidence itself (by file and line:
    the same line can be reached as two Evidence objects)."""
    v = _verdict(state)
    if state.job is not None and state.job_conclusion is not None and v.name != V_UNREADABLE:
        v = _job_verdict(state, v)
    cut = attribution.cut_row(state) if v.name in (V_INCOMPLETE, V_COLLECTION_ABORTED) else None
    v.related = _related([*v.related, cut], v.evidence)
    unread = [u for u in state.unreadable.values() if not u.rows]
    if unread and v.name != V_UNREADABLE:     # what the conclusion was drawn without
        v.reason += "; not read: " + "; ".join(u.words() for u in unread)
    return v


def _verdict(state: RunState) -> Verdict:
    rows = [u for u in state.unreadable.values() if u.rows]
    if rows:
        return _rows_unreadable(state, rows)
    c = counts(state)
    records = c[T_COMPLETED] + c[T_FAILED] + c[T_NEVER_RAN]
    if records and c[T_NEVER_RAN] == records and state.unattributed_records == 0 and collector_ended(state):
        return _no_agent_ran(state)
    if not state.collector.started and records == 0:
        if state.parent.endpoints.gave_up is not None:
            return _endpoints_failed(state)
        if state.parent.head_failed is not None and state.parent.all_ready is None:
            return _head_failed(state)
        failed = any(s.state == FAILED for s in state.servers.values())
        if (state.parent.interrupt is not None or stopped_not_dead(state) is not None) and not failed:
            return _interrupted_start(state)
        if parent_gave_up(state) or failed:
            return _startup_failed(state)
        if state.parent.all_ready and parent_ended(state):
            return Verdict(V_INCOMPLETE, "every server was ready, but gym env start ended before any "
                           "collection ran", state.parent.finished or state.parent.last_line, [], EXIT_TRIALS)
        return Verdict(V_STARTING, _starting_reason(state) + _live_basis(state), starting_evidence(state))
    if not collector_ended(state):
        return _collecting(state, records)
    c_ = state.collector
    if not c_.finished and not state.aggregate_written:
        if (c_.traceback is not None or c_.error is not None) and not c_.interrupted:
            return _aborted(state)
        return _incomplete(state)
    missing = c[T_MISSING]
    if missing:
        return _incomplete(state)
    if records == 0:
        # A collection that ended without one row (nor a list of inputs) measured nothing.
        return Verdict(V_INCOMPLETE, "the collection ended but no rollouts were found: nothing was recorded",
                       c_.last_line or c_.error, [], EXIT_TRIALS)
    if c[T_NEVER_RAN]:
        first = _first(state, T_NEVER_RAN)
        v = Verdict(V_SOME_NEVER_RAN, f"{c[T_NEVER_RAN]} of {records} trials never ran: the model was "
                    "never called, their 0.0 rewards are withheld",
                    attribution.never_ran_row(first) if first else None, exit_code=EXIT_TRIALS)
        cause = attribution.never_ran_cause(state, first)
        if cause:
            v.related.append(cause)
        return v
    if c[T_FAILED]:
        return _some_failed(state, c)
    return Verdict(V_OK, f"{c[T_COMPLETED]} trials completed", None, exit_code=EXIT_OK)


def _rows_unreadable(state: RunState, rows: list[Unreadable]) -> Verdict:
    """A file of the run's rows could not be read: its trials are neither completed nor missing,
    they are unknown; the report says so with the unreadable-input exit code."""
    why = "; ".join(u.words() for u in rows) + ": what the run's trials did is unknown"
    if state.expected_total is not None:
        why += f" ({state.expected_total} expected)"
    others = [u for u in state.unreadable.values() if not u.rows]
    if others:
        why += "; not read either: " + "; ".join(u.words() for u in others)
    return Verdict(V_UNREADABLE, why, None, [], EXIT_INPUT)


def _collecting(state: RunState, records: int) -> Verdict:
    why = f"{records} of {_total(state)} trials recorded{_live_basis(state)}"
    stall = ongoing_stall(state)
    if stall is not None:
        return _stalled(state, stall, why)
    trouble = attribution.connection_trouble(state)
    if trouble is None:
        return Verdict(V_COLLECTING, why, None)
    return Verdict(V_COLLECTING, f"{why}; {attribution.retry_words(state, *trouble)}", trouble[1].last)


def _stalled(state: RunState, stall: Stall, records: str) -> Verdict:
    """Results stopped coming (core/pace.py): since when, what is in flight, where it waits; at
    the model server's last line, the nearest place a trial waits."""
    why = pace.stall_words(stall, records)
    trouble = attribution.connection_trouble(state)
    if trouble is not None:
        why += f"; {attribution.retry_words(state, *trouble)}"
    lines = [w.line for w in stall.waits if w.line is not None]
    evidence = trouble[1].last if trouble is not None else (lines[0] if lines else state.collector.last_line)
    return Verdict(V_COLLECTING, why, evidence, _related(lines, evidence))


def _live_basis(state: RunState) -> str:
    """Why a run whose processes are not seen still counts as live: its files still change."""
    a = state.activity
    if a.processes_seen or a.quiet_for is None or state.parent.alive is not None:
        return ""
    seen = "no gym process visible on this machine; " if a.processes_checked else ""
    return f" ({seen}live by its files)"


def quiet_words(state: RunState) -> str:
    """Why a run without an end line counts as ended: its files went quiet."""
    a = state.activity
    if not a.quiet:
        return ""
    seen = " and no gym process visible on this machine" if a.processes_checked else ""
    return f"no output for {_ago(a.quiet_for)}{seen}"


def _ago(seconds: Optional[float]) -> str:
    s = int(seconds or 0)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60} min"
    return f"{s // 3600} h" if s < 2 * 86400 else f"{s // 86400} days"


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
    e = p.endpoints
    if p.all_ready and e.pending:
        limit = f" of Gym's {e.limit:.0f}s limit" if e.limit else ""
        took = f" ({e.elapsed:.0f}s{limit} so far)" if e.elapsed is not None else (f" (limit {e.limit:.0f}s)" if e.limit else "")
        return (f"all {len(state.servers)} servers ready; Gym is waiting for the model endpoint(s) to answer: "
                f"{', '.join(e.urls) or '?'}{took}")
    if p.all_ready:
        return f"all {len(state.servers)} servers ready; no collection started yet"
    if p.head_down_count >= 2 and p.head_down is not None:   # 30 s and more: Gym has not even started waiting
        status = gl.HEAD_DOWN_RE.search(p.head_down.text)
        return (f"Gym cannot reach its own head server (status {status.group(1) if status else '?'}, "
                f"{p.head_down_count} checks); it waits for it before any server counts as ready")
    waiting = still_waiting(state)
    if waiting:
        return f"waiting for {', '.join(waiting)}"
    if state.servers:
        return (f"all {len(state.servers)} servers are up by their own output; Gym has not said so yet "
                "(it checks every few seconds)")
    return "servers starting"


def still_waiting(state: RunState) -> list[str]:
    """The servers not up yet: Gym's last list of the ones it waits for, less those whose own
    output shows them up since (Gym prints its list every 30 s); else every server not up."""
    servers = state.servers
    pending = state.parent.pending
    if pending:
        return [n for n in pending if n not in servers or not servers[n].became_ready]
    return [s.name for s in servers.values() if not s.became_ready and s.state != FAILED]


def starting_evidence(state: RunState) -> Optional[Evidence]:
    """The line that says where a start stands now: Gym's endpoint wait, its `All N / N servers
    ready`, else its last list of the servers it waits for."""
    p = state.parent
    if p.all_ready is not None:
        return (p.endpoints.waiting if p.endpoints.pending else None) or p.all_ready
    return p.wait_line


def _interrupted_start(state: RunState) -> Verdict:
    """gym env start was stopped by Ctrl-C (SIGINT) before any collection: the user's stop, not a
    failure. Servers it was still waiting for were stopped wherever they were (installing, starting).
    Without its bare `KeyboardInterrupt`, a server that exited with the run shows the stop."""
    p = state.parent
    how = "(Ctrl-C, or SIGINT)" if p.interrupt is not None else "(Ctrl-C, or a signal)"
    if p.all_ready is not None:
        why = f"gym env start was interrupted {how} after every server was ready, before any collection"
    else:
        waiting = still_waiting(state)
        why = f"gym env start was interrupted {how} before every server was ready"
        if waiting:
            why += f" (still waiting for {', '.join(waiting)})"
    if p.stopping is not None:
        why += "; it stopped its servers"
    stopped = stopped_not_dead(state)
    evidence = p.interrupt or p.stopping or (stopped.shut_down if stopped is not None else None)
    related = _related([p.wait_line, p.stopping, p.died if stopped is not None else None], evidence)
    return Verdict(V_INCOMPLETE, why, evidence, related, EXIT_TRIALS)


def _no_agent_ran(state: RunState) -> Verdict:
    """The evidence is what shows it: the agent's own failure or an error it printed while
    serving /run, else the rows themselves (empty output, zero usage) beside its /run lines."""
    first = _first(state, T_NEVER_RAN)
    row = attribution.never_ran_row(first) if first else None
    cause = attribution.never_ran_cause(state, first)
    agent = attribution.agent_server(state, first.agent if first else "")
    own_error = agent is not None and cause is not None and (cause is agent.failure or cause in agent.errors)
    ev, related = (cause, [row]) if own_error else (row, [cause])
    return Verdict(V_NO_AGENT_RAN, "no agent ran: every trial shows the model was never called; the "
                   "environment most likely failed to start its agent - read the agent server's log",
                   ev, [e for e in related if e is not None], EXIT_RUN)


def _startup_failed(state: RunState) -> Verdict:
    failed = [s for s in state.servers.values() if s.state == FAILED]
    p = state.parent
    if p.timeout is not None and failed:
        m = gl.TIMEOUT_RE.search(p.timeout.text)
        limit = f"{m.group(1)}s " if m else ""
        names = [s.name for s in failed]
        first = failed[0]
        doing = "; ".join(f"{s.name}: {s.failure_reason.split('; it was ', 1)[-1]}" for s in failed[:3])
        return Verdict(V_STARTUP_FAILED, f"Gym's {limit}spin-up limit ran out waiting for {', '.join(names)} "
                       f"({doing})", first.failure or p.timeout, [p.timeout], EXIT_RUN)
    if failed:
        first = next((s for s in failed if s.name == p.died_server), failed[0])
        related = [e for e in (p.died, p.timeout) if e]
        return Verdict(V_STARTUP_FAILED, f"server {first.name} failed: {first.failure_reason}",
                       first.failure or p.died or p.timeout, related, EXIT_RUN)
    waiting = still_waiting(state)
    quiet = quiet_words(state) if p.alive is None and not (p.finished or p.died or p.timeout or p.traceback) else ""
    # Ended by silence: Gym's own last line says nothing (often its head server's banner); the
    # line to read is where the first server it still waited for stopped.
    stuck = next((state.servers[n].last_line_at for n in waiting
                  if n in state.servers and state.servers[n].last_line_at is not None), None) if quiet else None
    ev = p.timeout or p.error or p.traceback or p.finished or stuck or p.wait_line or p.last_line
    why = "gym env start ended before all servers were ready"
    if quiet:
        why += f" ({quiet})"
    if waiting:
        why += f" (still waiting for {', '.join(waiting)})"
    if ev is p.error and p.error is not None:
        why += f": {p.error.text.strip()}"
    related = [p.traceback] if p.traceback is not None and ev is not p.traceback else []
    if stuck is not None and p.wait_line is not None:
        related.append(p.wait_line)
    return Verdict(V_STARTUP_FAILED, why, ev, related, EXIT_RUN)


def _head_failed(state: RunState) -> Verdict:
    """Gym's own head server could not bind its port. Gym does not notice: it polls the port,
    printing `Head server is not up yet`, and never starts waiting for the servers. Shown at once:
    the run cannot recover."""
    p = state.parent
    assert p.head_failed is not None   # the caller checked
    port = gl.BIND_PORT_RE.search(p.head_failed.text)
    where = f"port {port.group(1)}" if port else "its port"
    text = p.head_failed.text.strip()
    error = text[text.find("[Errno"):] if "[Errno" in text else text
    if parent_ended(state):
        why = f"gym env start ended: its head server could not bind {where}: {error}"
    else:
        why = (f"Gym's head server could not bind {where} and Gym waits for it forever: stop the run, then "
               f"free that port or pick another ++head_server.port ({error})")
    related = [e for e in (p.head_down, p.traceback) if e is not None]
    return Verdict(V_STARTUP_FAILED, why, p.head_failed, related, EXIT_RUN)


def _endpoints_failed(state: RunState) -> Verdict:
    """Gym 0.5+ gave up on the model endpoints after every server was ready."""
    e = state.parent.endpoints
    urls = ", ".join(e.urls) or "the configured model endpoint"
    limit = f" within {e.limit:.0f}s" if e.limit else ""
    why = (f"Gym gave up: model endpoint {urls} never answered{limit}, although every server was ready; "
           "the inference server was not running there, or the URL in the config is wrong")
    related = [x for x in (e.waiting, *e.unresolved) if x is not None]
    return Verdict(V_STARTUP_FAILED, why, e.gave_up, related, EXIT_RUN)


def _some_failed(state: RunState, c: dict[str, int]) -> Verdict:
    """The collection finished, but some trials have a failure (a sidecar row, or a collector line
    that named them) instead of a rollout."""
    what, cause, own = _failures(state)
    why = f"{c[T_FAILED]} of {c[T_FAILED] + c[T_COMPLETED]} trials failed{what}; {c[T_COMPLETED]} completed"
    if cause is not None and cause not in own:
        why += f"; the first failure traces to {cause.where()}: {attribution.said(state, cause)}"
    return Verdict(V_SOME_FAILED, why, cause or (own[0] if own else None), _related(own, cause), EXIT_TRIALS)


def _failures(state: RunState) -> tuple[str, Optional[Evidence], list[Evidence]]:
    """The failed trials' classes and HTTP statuses (" (agent_run_error, HTTP 500)"), where the
    first failure's cause is read, and that trial's own lines."""
    failed = [t for t in state.trials.values() if t.status == T_FAILED]
    first = _first(state, T_FAILED)
    kinds = sorted({t.failure_class for t in failed if t.failure_class})
    kinds += sorted({f"HTTP {t.http_status}" for t in failed if t.http_status})
    what = f" ({', '.join(kinds)})" if kinds else ""
    cause = attribution.trial_cause(state, first) if first else None
    own = [e for e in ((first.named_at, first.evidence) if first else ()) if e is not None]
    return what, cause, [_described(e, first) for e in own]


def _described(e: Evidence, t) -> Evidence:
    """A row as a verdict's line: a row's evidence has no text (rows are long); its note says what it is."""
    if e.text or e.note:
        return e
    what = ", ".join(x for x in (t.failure_class, f"HTTP {t.http_status}" if t.http_status else "") if x)
    return Evidence(e.file, e.line, "", f"the row of task {t.task_index} rollout {t.rollout_index}"
                    + (f" ({what})" if what else ""))


def _aborted(state: RunState) -> Verdict:
    c = state.collector
    ev, related, why = attribution.abort_cause(state)
    dead = attribution.died_serving(state)
    if dead is not None:
        return _aborted_after_a_death(state, dead, ev, related, why)
    if ev is c.error and related == [c.error] and _stopped_while_collecting(state):
        return Verdict(V_INCOMPLETE, "gym env start shut its servers down while trials ran (it was stopped: "
                       f"Ctrl-C, or a signal); then {why}", state.parent.stopping, related, EXIT_TRIALS)
    if ev in (c.error, c.traceback) and _all_failed(state):
        return _aborted_after_every_trial_failed(state, why)
    return Verdict(V_COLLECTION_ABORTED, why, ev or c.error or c.traceback,
                   [e for e in related if e is not None], EXIT_RUN)


def _stopped_while_collecting(state: RunState) -> bool:
    """gym env start began stopping its servers (`Sending interrupt signals to servers...`) with no
    death named and no traceback of its own: it was stopped (Ctrl-C, a signal). Their open /runs
    then answer 500: an abort that nothing upstream explains (abort_cause) follows from the stop."""
    p = state.parent
    return p.stopping is not None and (p.died is None or stopped_not_dead(state) is not None) \
        and _own_traceback(state) is None


def _aborted_after_a_death(state: RunState, dead: Server, ev: Optional[Evidence], related: list,
                           why: str) -> Verdict:
    """A server died while trials ran, then the collector aborted: the death is the story (the
    errors after it, a 500 from a server that could not reach the dead one, follow from it)."""
    c = state.collector
    silent = dead.failure is not None and dead.failure is state.parent.died
    words = f"{dead.name} died while trials ran" + (
        ", without an error of its own (killed? out of memory?)" if silent else f": {dead.failure_reason}")
    lines = [*attribution.retries_to(state, dead), ev, *related, c.error, c.traceback]
    return Verdict(V_COLLECTION_ABORTED, f"{words}; then {why}", dead.failure or state.parent.died,
                   _related(lines, dead.failure), EXIT_RUN)


def _related(lines: Sequence[Optional[Evidence]], evidence: Optional[Evidence] = None) -> list[Evidence]:
    """The lines beside a verdict's evidence: each once (by file and line), in order, without the
    evidence itself."""
    seen = {(evidence.file, evidence.line)} if evidence is not None else set()
    out = []
    for e in lines:
        if e is not None and (e.file, e.line) not in seen:
            seen.add((e.file, e.line))
            out.append(e)
    return out


def _all_failed(state: RunState) -> bool:
    statuses = {t.status for t in state.trials.values()}
    return statuses == {T_FAILED}


def _aborted_after_every_trial_failed(state: RunState, died: str) -> Verdict:
    """The collector died on an error that names no server after every trial had failed (Gym 0.6+
    raises `None of the N dispatched rollouts produced a result`): the failures are the story, so
    the reason leads with them and the first one's cause is the evidence."""
    c = state.collector
    what, cause, own = _failures(state)
    why = f"every one of the {len(state.trials)} trials failed{what}"
    if cause is not None and cause not in own:
        why += f"; the first failure traces to {cause.where()}: {attribution.said(state, cause)}"
    why += f"; then {died}"
    return Verdict(V_COLLECTION_ABORTED, why, cause or (own[0] if own else c.error or c.traceback),
                   _related([*own, c.error, c.traceback], cause), EXIT_RUN)


def _incomplete(state: RunState) -> Verdict:
    c = state.collector
    n = sum(1 for t in state.trials.values() if t.status == T_MISSING)
    quiet = quiet_words(state) if c.alive is None and c.error is None else ""
    shut = attribution.cut_short_by(state)
    if c.interrupted:
        ended = " (it was interrupted: Ctrl-C, or SIGINT)"
    elif shut is not None:
        ended = " (gym env start shut its servers down before the collection finished)"
    else:
        ended = f" ({quiet})" if quiet else _exit_words(c.exit_code)
    why = (f"the collector ended without `Finished rollout collection!`{ended}; "
           f"{n} trials missing" if not c.finished else f"collection finished but {n} expected trials have no row")
    cut = attribution.cut_row(state)
    if cut is not None and not c.interrupted:
        why += f"; its last row ({cut.where()}) is cut mid-line: the collector died while writing it"
    related = [e for e in (c.last_line if shut and cut is None else None, attribution.agent_log_evidence(state)) if e]
    evidence = (c.error if c.interrupted else None) or cut or shut or c.last_line or c.error
    trouble = attribution.connection_trouble(state) if not c.finished else None
    if trouble is not None:      # what stalled it: the collection waited on a connection that never came
        why += f"; before that, {attribution.retry_words(state, *trouble)}"
        related = _related([evidence, *related])
        evidence = trouble[1].last
    return Verdict(V_INCOMPLETE, why, evidence, related, EXIT_TRIALS)


# --- a submitted run: what its Slurm job decides where Gym's own lines cannot ---------------------
FINISHED = (V_OK, V_SOME_FAILED, V_SOME_NEVER_RAN, V_NO_AGENT_RAN)     # the collection's own end


def _job_verdict(state: RunState, base: Verdict) -> Verdict:
    """The run's verdict with its job's in mind (core/cluster/conclusion.py): queued while it waits;
    startup_failed when Slurm will never start it, sbatch refused it or a service step died (or
    never became healthy) before Gym ran; incomplete when the job ended (its time limit, cancelled,
    failed, out of memory, a node lost) before the collection did and Gym said nothing of its own.
    The job's normal end is never a failure; a resume chain is one run (its last link decides)."""
    from .cluster.conclusion import deciding_link
    from .cluster.model import P_ENDED, P_NOT_SUBMITTED, P_QUEUED, P_RUNNING
    from .cluster.words import reason as pending_reason

    job, c = state.job, state.job_conclusion
    assert job is not None and c is not None
    inferred = " (Slurm state inferred from files)" if c.inferred and job.links else ""
    if c.phase == P_NOT_SUBMITTED:
        return Verdict(V_STARTUP_FAILED, f"sbatch refused the job: {job.sbatch_error}", job.refused_at, [], EXIT_RUN)
    if not job.links:
        return _noted(base, c.headline)
    link = deciding_link(job)
    if c.phase == P_QUEUED and c.never_starts:
        why = pending_reason(link.reason)
        return Verdict(V_STARTUP_FAILED, f"Slurm will never start job {link.job_id}: {why.words} ({link.reason})"
                       f"{inferred}", None, [], EXIT_RUN)
    if c.phase == P_QUEUED:
        return Verdict(V_QUEUED, _queued_words(state, job.links, link, c) + inferred, None, [], EXIT_OK)
    dead = _dead_service(job.links, link)
    if dead is not None and base.name not in FINISHED:
        return _service_failed(state, dead[0], dead[1], c, inferred)
    if c.phase == P_RUNNING:
        if base.name in (V_STARTING, V_COLLECTING):
            base.reason += f"; job {link.job_id} {c.headline}{inferred}"
        return base
    if c.phase != P_ENDED:
        return _noted(base, c.headline + inferred)
    return _ended_job(state, base, link, c, inferred)


def _ended_job(state: RunState, base: Verdict, link: Link, c: Conclusion, inferred: str) -> Verdict:
    """The chain's last link ended: how, against what Gym's own lines say."""
    finished = base.name in FINISHED
    if link.state == "COMPLETED" and not c.failed:
        return base                                     # the job's normal end
    if finished:
        return _noted(base, f"then job {link.job_id} {c.headline}{inferred}")
    if _gym_said_why(state, base, link):               # Gym's own abort: its words first
        return _noted(base, f"job {link.job_id} {c.headline}{inferred}")
    written = _written(state, none=link.started)
    evidence = c.evidence[0] if c.evidence else None
    if link.state == "TIMEOUT":
        limit = link.time_limit or (state.job.time_limit if state.job else None)
        why = f"the job hit its {_limit_words(limit)} time limit (job {link.job_id}){': ' if written else ''}{written}"
    elif link.state == "CANCELLED":
        when = " before it started" if not link.started else ""
        why = f"job {link.job_id} was cancelled{when}{': ' + written if written else ''}"
    else:
        why = f"job {link.job_id} {c.headline}{'; ' + written if written else ''}"
    related = [e for e in c.evidence[1:]] + [x for x in (base.evidence,) if x is not None]
    return Verdict(V_INCOMPLETE, why + inferred, evidence, related, EXIT_TRIALS)


def _noted(v: Verdict, note: str) -> Verdict:
    v.reason += f"; {note}"
    return v


def _gym_said_why(state: RunState, base: Verdict, link: Link) -> bool:
    """Gym's own lines say why the run stopped: an abort of its own (a traceback, a server's
    death, its spin-up limit), or it was interrupted (Ctrl-C, SIGINT: gymwatch stop) in a job that
    then failed. Not Gym's stop when Slurm ended the job (its time limit, a cancel): Slurm's
    signal is what Gym stopped on."""
    p = state.parent
    if base.name in (V_COLLECTION_ABORTED, V_NO_AGENT_RAN):
        return True
    if base.name == V_STARTUP_FAILED:        # not merely ended before every server was ready
        return any(s.state == FAILED and s.kind != K_SERVICE for s in state.servers.values()) or any(
            e is not None for e in (p.died, p.timeout, p.traceback, p.error, p.head_failed, p.endpoints.gave_up))
    return base.name == V_INCOMPLETE and link.state == "FAILED" and (
        state.collector.interrupted or p.interrupt is not None or p.stopping is not None)


def _dead_service(links: list["Link"], link: "Link") -> Optional[tuple["Link", "ServiceStep"]]:
    """(link, service) of a service step that died during startup or never became healthy, in the
    deciding link or the one it speaks for (a chain stopped in a prologue)."""
    from .cluster.model import SV_DIED, SV_NEVER_HEALTHY

    before = [ln for ln in links[:links.index(link)] if ln.started and not ln.prologue_only]
    for ln in (link, *([before[-1]] if link.prologue_only and before else [])):
        svc = next((s for s in ln.services if s.state in (SV_DIED, SV_NEVER_HEALTHY)), None)
        if svc is not None:
            return ln, svc
    return None


def _service_failed(state: RunState, link: Link, svc: ServiceStep, c: Conclusion, inferred: str) -> Verdict:
    cause = svc.cause if svc.cause is not None else svc.evidence
    words = f"service {svc.name} (job {link.job_id}) {svc.detail}"
    if svc.cause is not None and svc.cause != svc.evidence and svc.cause.text.strip():
        words += f": {svc.cause.text.strip()}"
    from .cluster.conclusion import deciding_link

    decider = deciding_link(state.job) if state.job else link
    if decider is not link and decider.action:
        words += f"; then {decider.action}"
    written = _written(state)
    if written:
        words += f"; {written} by earlier links"
    related = [e for e in (svc.evidence, *c.evidence) if e is not None]
    return Verdict(V_STARTUP_FAILED, words + inferred, cause, _related(related, cause), EXIT_RUN)


def _queued_words(state: RunState, links: list[Link], link: Link, c: Conclusion) -> str:
    words = f"job {link.job_id} {c.headline}" if link.state else c.headline
    before = links[links.index(link) - 1] if links.index(link) else None
    if before is not None and before.state:
        words += f"; it resumes job {before.job_id}, which {_ended_words(before)}"
    written = _written(state)
    return words + (f"; {written} so far" if written else "")


def _ended_words(link: "Link") -> str:
    from .cluster.words import ENDED_STATES, ended_words, state_words

    return ended_words(link.state, link.exit_code, link.signal) if link.state in ENDED_STATES \
        else state_words(link.state)


def _written(state: RunState, none: bool = False) -> str:
    """`6 of 10 trials written` ('' when none was, unless `none`: then it says so)."""
    c = counts(state)
    records = c[T_COMPLETED] + c[T_FAILED] + c[T_NEVER_RAN]
    if records:
        return f"{records} of {_total(state)} trials written"
    if not none:
        return ""
    return f"none of {state.expected_total} trials written" if state.expected_total else "no trial written"


def _limit_words(seconds: Optional[int]) -> str:
    """A time limit in words: `45 min`, `2 h 30 min`, `90s`."""
    if not seconds:
        return "?"
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    if not h and not m:
        return f"{s}s"
    if not h:
        return f"{m} min" + (f" {s}s" if s else "")
    return f"{h} h" + (f" {m} min" if m else "")

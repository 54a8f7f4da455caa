"""`gymwatch report`: the run model as JSON, a triage note in text, or Markdown."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any, Iterator, Optional, TextIO

from pydantic_core import to_json as to_json_bytes

from . import __version__, charts
from .core import attempts, attribution, costs, figures, gymversion, health, pace, rerun, score, timeline
from .core.fast import fork
from .core.model import (
    EXITED,
    FAILED,
    INSTALLING,
    PENDING,
    STALL_ON,
    STARTING,
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
    EndpointWait,
    Evidence,
    GymHealth,
    Retrying,
    RunState,
    Server,
    Stall,
    Trial,
)
from .core.sanitize import clean
from .core.verdict import Verdict, counts, verdict

if TYPE_CHECKING:
    from .core.cluster.record import Submission

SHOW_TRIALS = 50   # text/markdown list at most this many problem trials; JSON lists all
JSON_CHUNK = 2000  # trials serialised per piece


def _ev(e: Optional[Evidence]) -> Optional[dict]:
    return e.to_json() if e is not None else None


def retrying_json(state: RunState, records: dict[str, Retrying]) -> list[dict]:
    return [{"url": r.url, "error": r.error, "retry": r.retry, "elapsed_s": r.elapsed, "failures": r.failures,
             "still_retrying": attribution.still_retrying(state, r),
             "first": r.first.to_json(), "last": r.last.to_json()} for r in records.values()]


def time_to_ready(s: Server) -> Optional[float]:
    if s.ready_at is None or s.first_seen is None:
        return None
    return round(s.ready_at - s.first_seen, 3)


def server_json(state: RunState, s: Server) -> dict:
    return {
        "name": s.name, "kind": s.kind, "state": s.state, "phase": s.phase, "venv": s.venv,
        "became_ready": s.became_ready, "reported_ready_by_gym": s.reported_ready_by_gym,
        "time_to_ready": time_to_ready(s), "host": s.host, "port": s.port, "url": s.url, "pid": s.pid,
        "packages": s.packages, "last_line": s.last_line, "error_count": s.error_count,
        "failure_reason": s.failure_reason or None, "silent_death": s.silent_death,
        "evidence": _ev(s.failure or s.ready_evidence or s.last_line_at),
        "ready_evidence": _ev(s.ready_evidence), "errors": [e.to_json() for e in s.errors],
        "http_ok": s.http_ok, "process": s.process, "orphaned": s.orphaned, "retrying": retrying_json(state, s.retrying),
        "ray": s.ray or None,
    }


def trial_json(state: RunState, t: Trial, memo: attribution.Memo = None) -> dict:
    """One trial in the JSON report. `memo`: a dict kept over the trials of one report."""
    cause = attribution.trial_cause(state, t, memo)
    gym = state.health.get(t.key)
    return {
        "task_index": t.task_index, "rollout_index": t.rollout_index, "attempt_index": t.attempt_index,
        "status": t.status, "reward": t.reward, "withheld_reward": t.withheld_reward, "masked": t.masked,
        "input_tokens": t.input_tokens, "output_tokens": t.output_tokens,
        "failure_class": t.failure_class or None, "message": t.message or None, "http_status": t.http_status,
        "agent": t.agent or None,
        # a missing trial has no row: the line that ended its collector stands in
        "evidence": _ev(t.evidence or (cause if t.status == T_MISSING else None)),
        "named_at": _ev(t.named_at) if t.named_at is not t.evidence else None,
        "cause": _ev(cause),
        # every line that explains a problem trial, in reading order (empty for the others)
        "cause_chain": [e.to_json() for e in attribution.cause_chain(state, t, memo)] if t.status in (T_FAILED, T_NEVER_RAN, T_MISSING) else [],
        "attempts": [a.to_json() for a in attempts.attempts(t)],
        "gym_health": gym_health_json(t, gym),
    }


def gym_health_json(t: Trial, gym: Optional[GymHealth]) -> Optional[dict]:
    if gym is None:
        return None
    return {"verdict": gym.verdict, "checks": list(gym.checks), "detail": gym.detail or None,
            "evidence": _ev(gym.evidence), "disagrees": health.disagreement(t.status, gym) or None}


def endpoints_json(e: EndpointWait) -> Optional[dict]:
    if e.waiting is None and e.gave_up is None:
        return None
    return {"urls": e.urls, "limit": e.limit, "elapsed": e.elapsed, "waiting": _ev(e.waiting),
            "answered": _ev(e.answered), "gave_up": _ev(e.gave_up), "unresolved": [x.to_json() for x in e.unresolved]}


def score_json(state: RunState) -> dict:
    """What the score is worth: its denominator, Gym's own score beside it, what Gym's score leaves
    out and whether Gym's health verdict vouches for anything."""
    d = score.denominator(state)
    return {"mean_reward": d.mean, "expected": d.expected, "scored": d.scored, "not_scored": d.not_scored,
            "failed": d.failed, "never_ran": d.never_ran, "missing": d.missing, "masked": d.masked,
            "without_reward": d.unrewarded, "pending": d.pending, "words": score.words(d),
            "gym": [{"agent": g.agent or None, "key_metrics": g.key_metrics, "sample_count": g.sample_count,
                     "missing_count": g.missing_count, "masked": g.masked, "evidence": _ev(g.evidence)}
                    for g in state.gym_scores],
            "gym_leaves_out": {"trials": d.routed, "file": d.routed_file, "words": score.left_out_words(state, d)}
            if d.routed else None,
            "gym_counts_never_ran": score.withheld_words(state, d) or None,
            "gym_health_vouches": score.health_vouches(state), "gym_health_note": score.health_words(state) or None}


def score_notes(state: RunState, d: score.Denominator) -> list[str]:
    """What Gym's own numbers leave out or count that gymwatch's do not, and what they vouch for."""
    return [n for n in (score.left_out_words(state, d), score.withheld_words(state, d), score.health_words(state)) if n]


def stall_json(s: Stall) -> dict:
    """One stall: when results stopped (`start`) and came again (`end`, null when they did not),
    on the clock it was seen by (epoch seconds)."""
    return {"start": s.since, "end": s.end, "seconds": round(s.seconds, 3),
            "outcome": s.how or "ongoing", "ongoing": s.how == STALL_ON,
            "limit_seconds": round(s.limit, 3), "usual_wait_seconds": None if s.scale is None else round(s.scale, 3),
            "judged_by": "files" if s.files else "arrivals", "trials_in_flight": s.in_flight,
            "servers": [{"name": w.name, "kind": w.kind, "last_line": w.text or None, "evidence": _ev(w.line),
                         "age_seconds": None if w.age is None else round(w.age, 3)} for w in s.waits]}


def health_totals_json(state: RunState) -> Optional[dict]:
    h = state.health_totals
    if h is None:
        return None
    disagree = sum(1 for t in state.trials.values() if health.disagreement(t.status, state.health.get(t.key)))
    return {"checked": h.checked, "healthy": h.healthy, "unhealthy": h.unhealthy, "unobserved": h.unobserved,
            "evidence": _ev(h.evidence), "disagreements": disagree}


def sorted_trials(state: RunState) -> list[Trial]:
    """The trials by (task, rollout). Sorted by one int each (task * (largest rollout + 1) +
    rollout, the same order): comparing the tuple keys, scattered over the heap as the rows
    came, took about twice as long."""
    trials = state.trials
    keys = list(trials)
    rolls = [r for _, r in keys]
    if not keys or {type(k) for k in rolls} != {int} or min(rolls) < 0:
        return [trials[k] for k in sorted(keys)]
    m = max(rolls) + 1
    ik = [t * m + r if type(t) is int and t >= 0 else -1 for t, r in keys]
    if min(ik) < 0:
        return [trials[k] for k in sorted(keys)]
    vals = list(trials.values())
    return [vals[i] for i in sorted(range(len(ik)), key=ik.__getitem__)]


def to_json(state: RunState, v: Optional[Verdict] = None, trials: bool = True,
            retry_input: Optional[dict] = None) -> dict[str, Any]:
    v = v or verdict(state)
    c, p, info = state.collector, state.parent, state.info
    version, basis = gymversion.version(state)
    worth = score_json(state)
    return {
        "gymwatch_version": __version__, "root": state.root, "kind": state.kind,
        "verdict": v.name, "reason": v.reason, "evidence": _ev(v.evidence),
        "related": [e.to_json() for e in v.related], "exit_code": v.exit_code,
        "counts": counts(state), "total": len(state.trials), "expected": state.expected_total,
        "mean_reward": worth["mean_reward"], "score": worth,
        "info": {"environment": info.environment or None, "agent": info.agent or None,
                 "model": info.model or None, "num_repeats": info.num_repeats,
                 "concurrency": info.concurrency, "commands": info.commands, "run_id": info.run_id or None,
                 "gym_version": version or None, "gym_version_basis": basis, "settings": info.settings},
        "parent": {"started": p.started, "alive": p.alive, "exit_code": p.exit_code, "pending": p.pending,
                   "all_ready": _ev(p.all_ready), "died": _ev(p.died), "timeout": _ev(p.timeout),
                   "spinup_limit": gymversion.spinup_limit(state), "spinup_started": _ev(p.spinup),
                   "model_endpoints": endpoints_json(p.endpoints),
                   "traceback": _ev(p.traceback), "error": _ev(p.error), "head_url": p.head_url,
                   "stopping": _ev(p.stopping), "interrupt": _ev(p.interrupt)},
        "collector": {"started": c.started, "finished": c.finished, "alive": c.alive, "exit_code": c.exit_code,
                      "progress": list(c.progress) if c.progress else None,
                      "traceback": _ev(c.traceback), "error": _ev(c.error), "last_line": _ev(c.last_line),
                      "cut_row": _ev(c.cut_row),
                      "retrying": retrying_json(state, c.retrying)},
        "stalls": [stall_json(s) for s in state.stalls],
        "aggregate_metrics_written": state.aggregate_written,
        "gym_health": health_totals_json(state),
        "servers": [server_json(state, s) for s in state.servers.values()],
        "trials": [trial_json(state, t) for t in sorted_trials(state)] if trials else [],
        "malformed": {"count": state.malformed_count,
                      "lines": [{"file": m.file, "line": m.line, "reason": m.reason} for m in state.malformed]},
        "unattributed_records": state.unattributed_records,
        "notes": notes(state),
        "unreadable": [{"file": u.file, "reason": u.reason, "rows": u.rows} for u in state.unreadable.values()],
        "rerun": rerun.summary_json(rerun.plan(state), retry_input),
        "job": _job_part("job_json", state),
        "costs": [c.to_json() for c in costs.costs(state)],
    }


def _job_part(name: str, state: RunState) -> Any:
    """A submitted run's job in the report (jobreport.py, imported only for one); None otherwise."""
    if state.job is None:
        return None
    from . import jobreport

    return getattr(jobreport, name)(state)


def notes(state: RunState) -> list[str]:
    """What gymwatch did not read, and why: files it left out, files it could not read."""
    return [*state.notes, *(u.words() for u in state.unreadable.values())]


# --- text -------------------------------------------------------------------------------
HEADLINES = {
    V_OK: "OK", V_SOME_FAILED: "SOME TRIALS FAILED", V_SOME_NEVER_RAN: "SOME TRIALS NEVER RAN", V_NO_AGENT_RAN: "NO AGENT RAN",
    V_COLLECTION_ABORTED: "COLLECTION ABORTED", V_STARTUP_FAILED: "STARTUP FAILED",
    V_INCOMPLETE: "INCOMPLETE", V_QUEUED: "QUEUED", V_STARTING: "STARTING", V_COLLECTING: "COLLECTING", V_UNREADABLE: "UNREADABLE",
}


def _cut(text: str, limit: int) -> str:
    """A log line shortened for a one-line listing, saying so (`…`); the file:line has it whole."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fmt_reward(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}"


def said(e: Evidence) -> str:
    """What an evidence line shows: its text, else its note (a row has no text: the note says what
    it is)."""
    return e.text.strip() or e.note


def _line(e: Optional[Evidence]) -> str:
    if e is None:
        return ""
    text = clean(said(e))
    return f"{e.where()}" + (f"  {_cut(text, 160)}" if text else "")


def to_text(state: RunState, v: Optional[Verdict] = None, ray: bool = True) -> str:
    """`ray`: with the Ray cluster's section, when the run has one (`--ray`)."""
    v = v or verdict(state)
    out = []
    info = state.info
    title = " / ".join(x for x in (info.environment, info.agent, info.model) if x)
    out.append(f"{HEADLINES.get(v.name, v.name.upper())}: {clean(v.reason)}")
    out.append(f"run: {state.root}" + (f"  ({title})" if title else ""))
    settings = _settings_line(state)
    if settings:
        out.append(f"settings: {settings}")
    if v.evidence:
        out.append(f"  see {_line(v.evidence)}")
    for e in v.related[:6]:
        out.append(f"  also {_line(e)}")
    for note in notes(state):
        out.append(f"  note: {clean(note)}")
    job = _job_part("job_lines", state)
    out.extend(["", *job] if job else [])
    out.append("")
    out.extend(_servers_text(state))
    st = timeline.startup(state)
    if st.timed:
        out += ["", "startup (each server's steps on one time axis; * the server everything waited for):",
                *charts.startup_lines(st)]
    out.append("")
    out.extend(_trials_text(state))
    stall_lines = _stalls_text(state)
    out.extend(["", *stall_lines] if stall_lines else [])
    rerun_lines = rerun.summary_lines(rerun.plan(state), SHOW_TRIALS)
    out.extend(["", *rerun_lines] if rerun_lines else [])
    cost_lines = charts.cost_lines(costs.costs(state))
    out.extend(["", *cost_lines] if cost_lines else [])
    if state.malformed_count:
        out.append("")
        out.append(f"{state.malformed_count} unusable line(s):")
        for m in state.malformed[:10]:
            out.append(f"  {m.file}:{m.line}  {clean(m.reason)}")
        if state.malformed_count > 10:
            out.append(f"  ... {state.malformed_count - 10} more")
    if ray and state.ray is not None:
        out += ["", *ray_lines(state)]
    return "\n".join(out) + "\n"


def ray_lines(state: RunState) -> list[str]:
    """The Ray cluster under the run (`--ray`): its nodes, the actors not alive, the placement
    groups not created (core/cluster/ray.py), as its dashboard last answered."""
    from .core.cluster.ray import summary

    return [clean(line) for line in summary(state.ray)] if state.ray is not None else []


def ray_markdown(state: RunState, heading: str = "##") -> list[str]:
    lines = ray_lines(state)
    return ["", f"{heading} Ray cluster", "", *(f"- {_md(line.strip())}" for line in lines)] if lines else []


def _settings_line(state: RunState) -> str:
    info = state.info
    parts = [f"num_repeats={info.num_repeats}" if info.num_repeats else "",
             f"concurrency={info.concurrency}" if info.concurrency else "",
             f"policy model={info.model}" if info.model else "",
             f"expected trials={state.expected_total}" if state.expected_total is not None else ""]
    return ", ".join(p for p in parts if p)


def malformed_summary(state: RunState) -> str:
    """One line for stderr when some input could not be used."""
    if not state.malformed_count:
        return ""
    m = state.malformed[0]
    return (f"{state.malformed_count} unusable line(s) skipped; first at {m.file}:{m.line}: "
            f"{clean(m.reason)} (all listed in the report)")


def unreadable_lines(state: RunState) -> list[str]:
    """One line for stderr per file or directory of the run that could not be read."""
    return [clean(u.words()) for u in state.unreadable.values()]


def _servers_text(state: RunState) -> list[str]:
    if not state.servers:
        return ["servers: none seen yet"]
    ready = sum(1 for s in state.servers.values() if s.became_ready)
    out = [f"servers ({ready}/{len(state.servers)} became ready):"]
    width = max(len(s.name) for s in state.servers.values())
    for s in state.servers.values():
        ttr = time_to_ready(s)
        extra = f" in {ttr:.1f}s" if ttr is not None else ""
        port = f" :{s.port}" if s.port else ""
        errs = f", {s.error_count} error line(s)" if s.error_count else ""
        unready = s.state in (PENDING, INSTALLING, STARTING) or s.state == EXITED and not s.became_ready
        phase = f" ({clean(s.phase)})" if s.phase and unready else ""
        out.append(f"  {s.name:<{width}}  {s.state:<10} {s.kind}{port}{extra}{errs}{phase}")
        if s.state == FAILED:
            out.append(f"  {'':<{width}}  why: {clean(s.failure_reason)}")
            if s.failure:
                out.append(f"  {'':<{width}}  see {_line(s.failure)}")
        for r in s.retrying.values():
            out.append(f"  {'':<{width}}  {clean(attribution.retry_words(state, s.name, r, named=False))}")
            out.append(f"  {'':<{width}}  see {_line(r.last)}")
    return out


def _trials_text(state: RunState) -> list[str]:
    c = counts(state)
    total = len(state.trials)
    parts = ", ".join(f"{c[k]} {k.replace('_', '-')}" for k in TRIAL_STATUSES if c[k])
    d = score.denominator(state)
    unread = [u.file for u in state.unreadable.values() if u.rows]
    out = [f"trials: {total}" + (f" ({parts})" if parts else "") +
           (f"; mean reward {score.words(d)}" if d.mean is not None else "") +
           (f"; unknown: {', '.join(unread)} could not be read" if unread else "")]
    for g in state.gym_scores:
        out.append(f"  Gym's own score ({g.evidence.file if g.evidence else 'aggregate metrics'}): "
                   f"{clean(score.gym_score_words(g))}")
    for note in score_notes(state, d):
        out.append(f"  note: {clean(note)}")
    problems = [t for t in sorted_trials(state) if t.status in (T_FAILED, T_NEVER_RAN, T_MISSING)]
    for t in problems[:SHOW_TRIALS]:
        key = f"task {t.task_index} rollout {t.rollout_index}" + (
            f" attempt {t.attempt_index}" if t.attempt_index is not None else "")
        what = t.status.replace("_", "-")
        if t.status == T_FAILED:
            what += failure_words(t)
        if t.status == T_NEVER_RAN and t.withheld_reward is not None:
            what += f" (recorded reward {t.withheld_reward} withheld)"
        ev = t.evidence or attribution.trial_cause(state, t)
        out.append(f"  {key}: {what}" + (f"  at {ev.where()}" if ev else ""))
    if len(problems) > SHOW_TRIALS:
        out.append(f"  ... {len(problems) - SHOW_TRIALS} more")
    return out


def _stalls_text(state: RunState) -> list[str]:
    """Each stall: how long, when, how it ended; what was in flight and where it waited."""
    if not state.stalls:
        return []
    out = ["stalls:"]
    for s in state.stalls:
        flying = f"; {s.in_flight} trial{'s' if s.in_flight != 1 else ''} in flight" if s.in_flight is not None else ""
        out.append(f"  {clean(pace.note(s))}{flying}")
        for w in s.waits:
            out.append(f"    {clean(pace.wait_words(w, 160))}" + (f"  at {w.line.where()}" if w.line else ""))
    return out


def failure_words(t: Trial) -> str:
    """` (class, HTTP status: message)` of a failed trial, as much as it has; '' for none. The
    message whole (what went wrong is often at its end; a row's is kept to a few hundred characters)."""
    head = ", ".join(x for x in (clean(t.failure_class), f"HTTP {t.http_status}" if t.http_status else "") if x)
    message = clean(t.message) if t.message else ""
    words = head + (": " if head and message else "") + message
    return f" ({words})" if words else ""


def to_markdown(state: RunState, v: Optional[Verdict] = None, title: str = "# gymwatch report",
                ray: bool = True) -> str:
    """`title`: the heading the verdict's headline follows (a submission's benchmark: `## mcqa`);
    `ray`: with the Ray cluster's section, when the run has one."""
    v = v or verdict(state)
    md = [f"{title}: {HEADLINES.get(v.name, v.name)}", "", f"**{_md(v.reason)}**", ""]
    if v.evidence:
        md.append(f"- evidence: `{v.evidence.where()}` {_md(_cut(said(v.evidence), 160))}".rstrip())
    for e in v.related[:6]:
        md.append(f"- related: `{e.where()}` {_md(_cut(said(e), 160))}".rstrip())
    job = _job_part("job_markdown", state)
    if job:
        md += [*([""] if md[-1] else []),
               *(("#" + line) if title.startswith("##") and line.startswith("#") else line for line in job)]
    md += ["", "| server | kind | state | port | errors | evidence |", "|---|---|---|---|---|---|"]
    for s in state.servers.values():
        ev = s.failure or s.ready_evidence
        md.append(f"| {_md(s.name)} | {s.kind} | {s.state} | {s.port or ''} | {s.error_count} | "
                  f"{'`' + ev.where() + '`' if ev else ''} |")
    c = counts(state)
    md += ["", "| status | trials |", "|---|---|"] + [f"| {k} | {c[k]} |" for k in TRIAL_STATUSES]
    d = score.denominator(state)
    md += ["", f"Mean reward: {_md(score.words(d))}", ""]
    if state.gym_scores:
        md += ["| Gym's own score | over |", "|---|---|"]
        for g in state.gym_scores:
            over = "" if g.sample_count is None else f"{g.sample_count} rows" + (
                f", {g.missing_count} missing from a repeat" if g.missing_count else "")
            metrics = ", ".join(f"{k} {v:g}" for k, v in g.key_metrics.items())
            md.append(f"| {_md((g.agent + ': ') if g.agent else '')}{_md(metrics)} | {over} |")
        md.append("")
    for note in score_notes(state, d):
        md += [f"> {_md(note)}", ""]
    if state.stalls:
        md += ["| stall | in flight | waiting on |", "|---|---|---|"]
        for st in state.stalls:
            where = "<br>".join(f"{_md(pace.wait_words(w, 160))}" + (f" `{w.line.where()}`" if w.line else "")
                                for w in st.waits)
            md.append(f"| {_md(pace.note(st))} | {'' if st.in_flight is None else st.in_flight} | {where} |")
        md.append("")
    problems = [t for t in sorted_trials(state) if t.status in (T_FAILED, T_NEVER_RAN, T_MISSING)]
    if problems:
        md += ["| task | rollout | status | evidence |", "|---|---|---|---|"]
        for t in problems[:SHOW_TRIALS]:
            ev = t.evidence or attribution.trial_cause(state, t)
            md.append(f"| {t.task_index} | {t.rollout_index} | {t.status} | {'`' + ev.where() + '`' if ev else ''} |")
    md += _md_charts(state)
    if ray:
        md += ray_markdown(state)
    return "\n".join(md) + "\n"


def _md_charts(state: RunState) -> list[str]:
    """The Markdown report's pictures: the startup timeline (a Mermaid gantt), throughput, rewards
    and tokens (text bars in code blocks), and the cost per agent (a table)."""
    md = ["", "## Startup timeline", ""]
    st = timeline.startup(state)
    gantt = charts.mermaid_gantt(st)
    if gantt:
        md += gantt + [""] + [f"- {_md(line)}" for line in charts.startup_steps(st)]
    elif state.servers:
        md += ["No times: gymwatch times each server's steps while it watches the run start (`gymwatch run`, "
               "`gymwatch attach`); read after the fact, Gym's lines say what happened, not when.", ""]
        md += [f"- {_md(line)}" for line in charts.startup_steps(st)]
    else:
        md.append("No server seen.")
    tp = figures.throughput(state)
    md += ["", "## Throughput", ""]
    rows = charts.throughput_lines(tp)
    md += [_md(charts.throughput_caption(tp)), "", "```text", *rows, "```"] if rows else ["No result has a time."]
    md += ["", "## Rewards", ""]
    spreads = [*figures.rewards_by_agent(state), figures.task_means(state)]
    for sp in spreads:
        if sp.bins:
            md += [f"{_md(sp.title)} ({sp.n}):", "", "```text", *charts.spread_lines(sp, fmt=charts.reward), "```", ""]
    if not any(sp.bins for sp in spreads):
        md.append("No completed trial has a reward yet.")
    md += ["", "## Tokens per trial", ""]
    tokens = figures.tokens_per_trial(state)
    for sp in tokens:
        if sp.bins:
            md += [f"{_md(sp.title)} ({sp.n} trials that ran):", "", "```text", *charts.spread_lines(sp), "```", ""]
    if not any(sp.bins for sp in tokens):
        md.append("No trial has token counts.")
    md += ["", "## Cost and speed per agent", ""] + _md_costs(costs.costs(state))
    return [line for i, line in enumerate(md) if line or i == 0 or md[i - 1]]     # one blank line between parts


def _md_costs(agents: list[costs.Cost]) -> list[str]:
    if not agents:
        return ["No trial has a result yet."]
    md = ["Per trial: p50 / p90 / max; durations p50 / p90. Far off: README's \"Cost and speed\" rule.", "",
          "| agent | trials | input tokens | per trial | output tokens | per trial | duration | far off |",
          "|---|---|---|---|---|---|---|---|"]
    for c in agents:
        far = sum(c.outlier_counts.values())
        md.append(f"| {_md(c.agent)} | {c.trials} | {charts.number(c.input_tokens)} | {charts.pct(c.input)} | "
                  f"{charts.number(c.output_tokens)} | {charts.pct(c.output)} | {_md(charts.duration_words(c))} | "
                  f"{far or ''} |")
    for c in agents:
        words = charts.outlier_words(c)
        if words:
            md += ["", f"Far off their peers ({_md(c.agent)}):", ""] + [f"- {_md(w)}" for w in words]
    return md


def _md(text: str) -> str:
    return clean(text).replace("|", "\\|").replace("`", "'")


def iter_json(state: RunState, v: Optional[Verdict] = None, retry_input: Optional[dict] = None) -> Iterator[str]:
    """The JSON report in pieces, one trial per line: a 100k-trial run is serialised a chunk at
    a time (pydantic-core's encoder), never held whole in memory."""
    trials = sorted_trials(state)
    yield _json_head(state, v, retry_input)
    yield from _json_trials(state, trials, 0, len(trials))
    yield json_tail(state)


JSON_TAIL = "\n  ]\n}\n"


def _json_head(state: RunState, v: Optional[Verdict], retry_input: Optional[dict] = None) -> str:
    head = to_json(state, v, trials=False, retry_input=retry_input)
    del head["trials"]
    text = to_json_bytes(head, indent=2).decode()
    return text[: text.rindex("}")].rstrip() + ',\n  "trials": ['


def _json_trials(state: RunState, trials: list[Trial], lo: int, hi: int) -> Iterator[str]:
    """The report's text of trials[lo:hi] (each after the one before it: cut anywhere, the
    pieces join into the same text)."""
    plain, memo = _PlainTrials(state), {}
    for i in range(lo, hi, JSON_CHUNK):
        rows = (plain.json(t) or to_json_bytes(trial_json(state, t, memo)).decode()
                for t in trials[i:min(i + JSON_CHUNK, hi)])
        yield ("," if i else "") + "\n    " + ",\n    ".join(rows)


def json_tail(state: RunState) -> str:
    """The JSON report's end: the keys after `trials` (`ray`, for a run read with `--ray`)."""
    if state.ray is None:
        return JSON_TAIL
    from .core.cluster.ray import to_json as ray_json

    text = to_json_bytes({"ray": ray_json(state.ray)}, indent=2).decode()
    return "\n  ],\n  " + text.strip()[1:-1].strip() + "\n}\n"     # its keys, indented as the report's


SPLIT_MIN = 20_000   # trials worth a second process for the JSON report (core/fast/fork.py)
SPLIT_SHARE = 15 / 32  # of the trials the child writes: its share costs more (it faults on their pages first)


def write_json(state: RunState, v: Verdict, out: TextIO, retry_input: Optional[dict] = None) -> None:
    """The JSON report written to `out` (the CLI's stdout): `iter_json`'s text. With many trials, a process that may fork (`gymwatch report`: no threads,
    the model frozen) and `out` a real file, a forked child writes the back part of the trials
    while this process writes the rest (core/fast/fork.py); if it fails, its part is written here."""
    trials = sorted_trials(state)
    head = _json_head(state, v, retry_input)    # before the fork: after it, a pass over every trial faults on
    n = len(trials)                # each page of them (copy-on-write of the reference counts)
    cut = n - int(n * SPLIT_SHARE)
    child = _writer(state, trials, cut, n, out) if n >= SPLIT_MIN else None
    try:
        out.write(head)
        for piece in _json_trials(state, trials, 0, cut if child else n):
            out.write(piece)
        if child is not None and not child.pour(out):
            for piece in _json_trials(state, trials, cut, n):
                out.write(piece)
        out.write(json_tail(state))
    finally:
        if child is not None:
            child.close()


def _writer(state: RunState, trials: list[Trial], lo: int, hi: int, out: TextIO) -> Optional[fork.Child]:
    """A forked child writing trials[lo:hi]'s text, encoded as `out` encodes it; None where that
    cannot be."""
    if not fork.can_fork("fork:json"):
        return None
    try:
        out.fileno()
    except (AttributeError, OSError, ValueError):     # io.UnsupportedOperation is both
        return None
    out.flush()

    def work(raw) -> None:
        text = io.TextIOWrapper(raw, encoding=out.encoding, errors=out.errors)
        for piece in _json_trials(state, trials, lo, hi):
            text.write(piece)
        text.flush()
        text.detach()
    try:
        return fork.Child(work)
    except OSError:
        return None


class _PlainTrials:
    """`trial_json` of a completed trial with one attempt and nothing else to say (most of a big
    run), written from a template: the same text as the encoder makes of `trial_json`'s dict
    (values encoded by it, and cached: a run has few distinct rewards, agents and files), at a
    fraction of the cost. tests/test_report_json.py compares the two."""

    TEMPLATE = ('{"task_index":%d,"rollout_index":%d,"attempt_index":%s,"status":"completed","reward":%s,'
                '"withheld_reward":null,"masked":false,"input_tokens":%s,"output_tokens":%s,"failure_class":null,"message":null,'
                '"http_status":null,"agent":%s,"evidence":{"file":%s,"line":%d,"text":%s},"named_at":null,'
                '"cause":null,"cause_chain":[],"attempts":[],"gym_health":null}')

    def __init__(self, state: RunState):
        self.health = state.health
        self._floats: dict = {}
        self._strs: dict = {}

    def json(self, t: Trial) -> Optional[str]:
        ev = t.evidence
        if (t.status != T_COMPLETED or ev is None or t.earlier is not None or t.line is not None
                or t.named_at is not None or t.failure_class or t.message or t.http_status is not None
                or t.withheld_reward is not None or t.masked or ev.note or (self.health and t.key in self.health)):
            return None
        inp, out, att, reward = t.input_tokens, t.output_tokens, t.attempt_index, t.reward
        if type(reward) is not float and reward is not None:
            return None
        # the caches looked up here, `_encoded` only on a miss: a call a field was a good part of writing a trial
        floats, strs, agent, file, text = self._floats, self._strs, t.agent or None, ev.file, ev.text
        return self.TEMPLATE % (
            t.task_index, t.rollout_index, "null" if att is None else att,
            floats.get(reward) or _encoded(floats, reward),
            "null" if inp is None else inp, "null" if out is None else out,
            strs.get(agent) or _encoded(strs, agent), strs.get(file) or _encoded(strs, file), ev.line,
            strs.get(text) or _encoded(strs, text))


# --- a submission (`gym eval submit`): one report per benchmark, and a verdict for the whole ------
LIVE = (V_QUEUED, V_STARTING, V_COLLECTING)
Benchmark = tuple[str, RunState, Verdict]      # (benchmark name, its run's state, its verdict)


def whole(benchmarks: list[Benchmark]) -> tuple[str, Verdict]:
    """The submission's verdict and the benchmark it comes from: the worst by exit code; among
    those that exit 0, one still queued, starting or collecting before one done."""
    name, _, v = max(benchmarks, key=lambda b: (b[2].exit_code, b[2].name in LIVE))
    if len(benchmarks) == 1:
        return name, v
    return name, Verdict(v.name, f"{name}: {v.reason}", v.evidence, list(v.related), v.exit_code)


def submission_info(sub: "Submission") -> dict[str, Any]:
    return {"gym_job_id": sub.gym_job_id, "gym_version": sub.version or None, "submitted_at": sub.submitted_at or None,
            "submitted_by": sub.submitted_by or None, "cluster": sub.cluster or None, "hostname": sub.hostname,
            "run_dir": sub.run_dir or None, "root": str(sub.root) if sub.root else None,
            "benchmarks": [b.name for b in sub.benchmarks], "notes": list(sub.notes)}


def iter_submission_json(sub: "Submission", benchmarks: list[Benchmark]) -> Iterator[str]:
    """The JSON report of a submission: `submission`, the whole's `verdict` (`name`, `reason`,
    `exit_code`, `benchmark`), `exit_code`, and `benchmarks[]`: each benchmark's report, as
    `report` gives it for that benchmark alone."""
    name, v = whole(benchmarks)
    head = {"gymwatch_version": __version__, "submission": submission_info(sub),
            "verdict": {"name": v.name, "reason": v.reason, "exit_code": v.exit_code, "benchmark": name},
            "exit_code": v.exit_code}
    text = to_json_bytes(head, indent=2).decode()
    yield text[: text.rindex("}")].rstrip() + ',\n  "benchmarks": [\n'
    for i, (_, state, bv) in enumerate(benchmarks):
        if i:
            yield ",\n"
        for piece in iter_json(state, bv):
            yield piece.rstrip("\n") if piece.endswith("}\n") else piece
    yield "\n  ]\n}\n"


def submission_text(sub: "Submission", benchmarks: list[Benchmark]) -> str:
    name, v = whole(benchmarks)
    out = [f"{HEADLINES.get(v.name, v.name.upper())}: {clean(v.reason)}",
           f"submission: {clean(sub.gym_job_id)}  ({_submitted(sub)})" if _submitted(sub) else
           f"submission: {clean(sub.gym_job_id)}"]
    if sub.root is not None:
        out.append(f"run dir: {sub.root}")
    width = max(len(b[0]) for b in benchmarks)
    for bname, _, bv in benchmarks:
        out.append(f"  {clean(bname):<{width}}  {HEADLINES.get(bv.name, bv.name.upper())}: {clean(bv.reason)}")
    for note in sub.notes:
        out.append(f"  note: {clean(note)}")
    for bname, state, bv in benchmarks:
        out += ["", f"=== {clean(bname)} ===", to_text(state, bv, ray=False).rstrip("\n")]
    ray = ray_lines(benchmarks[0][1])       # one cluster under every benchmark: said once
    out += ["", *ray] if ray else []
    return "\n".join(out) + "\n"


def submission_markdown(sub: "Submission", benchmarks: list[Benchmark]) -> str:
    _, v = whole(benchmarks)
    md = [f"# gymwatch report: submission {_md(sub.gym_job_id)}: {HEADLINES.get(v.name, v.name)}", "",
          f"**{_md(v.reason)}**", ""]
    if _submitted(sub):
        md += [_md(_submitted(sub)), ""]
    md += ["| benchmark | verdict | reason |", "|---|---|---|"]
    md += [f"| {_md(b)} | {bv.name} | {_md(bv.reason)} |" for b, _, bv in benchmarks]
    for bname, state, bv in benchmarks:
        md += ["", to_markdown(state, bv, title=f"## {_md(bname)}", ray=False).rstrip("\n")]
    md += ray_markdown(benchmarks[0][1])
    return "\n".join(md) + "\n"


def _submitted(sub: "Submission") -> str:
    parts = [f"submitted {sub.submitted_at}" if sub.submitted_at else "",
             f"by {sub.submitted_by}" if sub.submitted_by else "",
             f"from {sub.hostname}" if sub.hostname else "",
             f"to cluster {sub.cluster}" if sub.cluster else ""]
    words = " ".join(p for p in parts if p)
    return clean(", ".join(p for p in (words, f"Gym {sub.version}" if sub.version else "") if p))


def render_submission(sub: "Submission", benchmarks: list[Benchmark], fmt: str) -> tuple[str, int]:
    """A submission's report in `fmt` (text, json, md) and its exit code: its worst benchmark's."""
    code = whole(benchmarks)[1].exit_code
    if fmt == "json":
        return "".join(iter_submission_json(sub, benchmarks)), code
    if fmt == "md":
        return submission_markdown(sub, benchmarks), code
    return submission_text(sub, benchmarks), code


def render(state: RunState, fmt: str) -> tuple[str, int]:
    v = verdict(state)
    if fmt == "json":
        return "".join(iter_json(state, v)), v.exit_code
    if fmt == "md":
        return to_markdown(state, v), v.exit_code
    return to_text(state, v), v.exit_code


def _encoded(cache: dict, v: Any) -> str:
    """The encoder's text of a value a report repeats (rewards, agents, file names), kept."""
    out = cache.get(v)
    if out is None:
        if len(cache) > 4096:
            cache.clear()
        out = cache[v] = to_json_bytes(v).decode()
    return out

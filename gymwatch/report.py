"""`gymwatch report`: the run model as JSON, a triage note in text, or Markdown."""

from __future__ import annotations

from typing import Any, Iterator, Optional

from pydantic_core import to_json as to_json_bytes

from . import __version__
from .core import attribution
from .core.model import (
    FAILED, T_FAILED, T_MISSING, T_NEVER_RAN, TRIAL_STATUSES, Evidence, RunState, Server, Trial,
)
from .core.sanitize import clean
from .core.verdict import Verdict, counts, mean_reward, verdict

SHOW_TRIALS = 50   # text/markdown list at most this many problem trials; JSON lists all
JSON_CHUNK = 2000  # trials serialised per piece


def _ev(e: Optional[Evidence]) -> Optional[dict]:
    return e.to_json() if e is not None else None


def time_to_ready(s: Server) -> Optional[float]:
    if s.ready_at is None or s.first_seen is None:
        return None
    return round(s.ready_at - s.first_seen, 3)


def server_json(s: Server) -> dict:
    return {
        "name": s.name, "kind": s.kind, "state": s.state, "phase": s.phase,
        "became_ready": s.became_ready, "reported_ready_by_gym": s.reported_ready_by_gym,
        "time_to_ready": time_to_ready(s), "host": s.host, "port": s.port, "url": s.url, "pid": s.pid,
        "packages": s.packages, "last_line": s.last_line, "error_count": s.error_count,
        "failure_reason": s.failure_reason or None, "silent_death": s.silent_death,
        "evidence": _ev(s.failure or s.ready_evidence or s.last_line_at),
        "ready_evidence": _ev(s.ready_evidence), "errors": [e.to_json() for e in s.errors],
        "http_ok": s.http_ok, "process": s.process,
    }


def trial_json(state: RunState, t: Trial) -> dict:
    cause = attribution.trial_cause(state, t)
    return {
        "task_index": t.task_index, "rollout_index": t.rollout_index, "attempt_index": t.attempt_index,
        "status": t.status, "reward": t.reward, "withheld_reward": t.withheld_reward,
        "input_tokens": t.input_tokens, "output_tokens": t.output_tokens,
        "failure_class": t.failure_class or None, "message": t.message or None, "agent": t.agent or None,
        # a missing trial has no row: the line that ended its collector stands in
        "evidence": _ev(t.evidence or (cause if t.status == T_MISSING else None)),
        "cause": _ev(cause),
    }


def sorted_trials(state: RunState) -> list[Trial]:
    return sorted(state.trials.values(), key=lambda t: (t.task_index, t.rollout_index, t.attempt_index or -1))


def to_json(state: RunState, v: Optional[Verdict] = None, trials: bool = True) -> dict[str, Any]:
    v = v or verdict(state)
    c, p, info = state.collector, state.parent, state.info
    return {
        "gymwatch_version": __version__, "root": state.root, "kind": state.kind,
        "verdict": v.name, "reason": v.reason, "evidence": _ev(v.evidence),
        "related": [e.to_json() for e in v.related], "exit_code": v.exit_code,
        "counts": counts(state), "total": len(state.trials), "expected": state.expected_total,
        "mean_reward": mean_reward(state),
        "info": {"environment": info.environment or None, "agent": info.agent or None,
                 "model": info.model or None, "num_repeats": info.num_repeats,
                 "concurrency": info.concurrency, "commands": info.commands, "run_id": info.run_id or None,
                 "gym_version": info.gym_version or None, "settings": info.settings},
        "parent": {"started": p.started, "alive": p.alive, "exit_code": p.exit_code, "pending": p.pending,
                   "all_ready": _ev(p.all_ready), "died": _ev(p.died), "timeout": _ev(p.timeout),
                   "traceback": _ev(p.traceback), "error": _ev(p.error), "head_url": p.head_url},
        "collector": {"started": c.started, "finished": c.finished, "alive": c.alive, "exit_code": c.exit_code,
                      "progress": list(c.progress) if c.progress else None,
                      "traceback": _ev(c.traceback), "error": _ev(c.error), "last_line": _ev(c.last_line)},
        "aggregate_metrics_written": state.aggregate_written,
        "servers": [server_json(s) for s in state.servers.values()],
        "trials": [trial_json(state, t) for t in sorted_trials(state)] if trials else [],
        "malformed": {"count": state.malformed_count,
                      "lines": [{"file": m.file, "line": m.line, "reason": m.reason} for m in state.malformed]},
        "unattributed_records": state.unattributed_records,
    }


# --- text -------------------------------------------------------------------------------
HEADLINES = {
    "ok": "OK", "some_never_ran": "SOME TRIALS NEVER RAN", "no_agent_ran": "NO AGENT RAN",
    "collection_aborted": "COLLECTION ABORTED", "startup_failed": "STARTUP FAILED",
    "incomplete": "INCOMPLETE", "starting": "STARTING", "collecting": "COLLECTING",
}


def _fmt_reward(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}"


def _line(e: Optional[Evidence]) -> str:
    if e is None:
        return ""
    text = clean(e.text.strip())
    return f"{e.where()}" + (f"  {text[:160]}" if text else "")


def to_text(state: RunState, v: Optional[Verdict] = None) -> str:
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
    out.append("")
    out.extend(_servers_text(state))
    out.append("")
    out.extend(_trials_text(state))
    if state.malformed_count:
        out.append("")
        out.append(f"{state.malformed_count} unusable line(s):")
        for m in state.malformed[:10]:
            out.append(f"  {m.file}:{m.line}  {clean(m.reason)}")
        if state.malformed_count > 10:
            out.append(f"  ... {state.malformed_count - 10} more")
    return "\n".join(out) + "\n"


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
        out.append(f"  {s.name:<{width}}  {s.state:<10} {s.kind}{port}{extra}{errs}")
        if s.state == FAILED:
            out.append(f"  {'':<{width}}  why: {clean(s.failure_reason)[:200]}")
            if s.failure:
                out.append(f"  {'':<{width}}  see {_line(s.failure)}")
    return out


def _trials_text(state: RunState) -> list[str]:
    c = counts(state)
    total = len(state.trials)
    parts = ", ".join(f"{c[k]} {k.replace('_', '-')}" for k in TRIAL_STATUSES if c[k])
    mr = mean_reward(state)
    out = [f"trials: {total}" + (f" ({parts})" if parts else "") +
           (f"; mean reward {mr:.3f} over {c['completed']} completed" if mr is not None else "")]
    problems = [t for t in sorted_trials(state) if t.status in (T_FAILED, T_NEVER_RAN, T_MISSING)]
    for t in problems[:SHOW_TRIALS]:
        key = f"task {t.task_index} rollout {t.rollout_index}" + (
            f" attempt {t.attempt_index}" if t.attempt_index is not None else "")
        what = t.status.replace("_", "-")
        if t.status == T_FAILED:
            what += f" ({clean(t.failure_class)}{': ' + clean(t.message)[:80] if t.message else ''})"
        if t.status == T_NEVER_RAN and t.withheld_reward is not None:
            what += f" (recorded reward {t.withheld_reward} withheld)"
        ev = t.evidence or attribution.trial_cause(state, t)
        out.append(f"  {key}: {what}" + (f"  at {ev.where()}" if ev else ""))
    if len(problems) > SHOW_TRIALS:
        out.append(f"  ... {len(problems) - SHOW_TRIALS} more")
    return out


def to_markdown(state: RunState, v: Optional[Verdict] = None) -> str:
    v = v or verdict(state)
    md = [f"# gymwatch report: {HEADLINES.get(v.name, v.name)}", "", f"**{_md(v.reason)}**", ""]
    if v.evidence:
        md.append(f"- evidence: `{v.evidence.where()}` {_md(v.evidence.text.strip()[:160])}")
    for e in v.related[:6]:
        md.append(f"- related: `{e.where()}` {_md(e.text.strip()[:160])}")
    md += ["", "| server | kind | state | port | errors | evidence |", "|---|---|---|---|---|---|"]
    for s in state.servers.values():
        ev = s.failure or s.ready_evidence
        md.append(f"| {_md(s.name)} | {s.kind} | {s.state} | {s.port or ''} | {s.error_count} | "
                  f"{'`' + ev.where() + '`' if ev else ''} |")
    c = counts(state)
    md += ["", "| status | trials |", "|---|---|"] + [f"| {k} | {c[k]} |" for k in TRIAL_STATUSES]
    mr = mean_reward(state)
    md += ["", f"Mean reward over completed trials: {_fmt_reward(mr)}", ""]
    problems = [t for t in sorted_trials(state) if t.status in (T_FAILED, T_NEVER_RAN, T_MISSING)]
    if problems:
        md += ["| task | rollout | status | evidence |", "|---|---|---|---|"]
        for t in problems[:SHOW_TRIALS]:
            ev = t.evidence or attribution.trial_cause(state, t)
            md.append(f"| {t.task_index} | {t.rollout_index} | {t.status} | {'`' + ev.where() + '`' if ev else ''} |")
    return "\n".join(md) + "\n"


def _md(text: str) -> str:
    return clean(text).replace("|", "\\|").replace("`", "'")


def iter_json(state: RunState, v: Optional[Verdict] = None) -> Iterator[str]:
    """The JSON report in pieces, one trial per line: a 100k-trial run is serialised a chunk at
    a time (pydantic-core's encoder), never held whole in memory."""
    head = to_json(state, v, trials=False)
    del head["trials"]
    text = to_json_bytes(head, indent=2).decode()
    yield text[: text.rindex("}")].rstrip() + ',\n  "trials": ['
    trials = sorted_trials(state)
    for i in range(0, len(trials), JSON_CHUNK):
        rows = (to_json_bytes(trial_json(state, t)).decode() for t in trials[i:i + JSON_CHUNK])
        yield ("," if i else "") + "\n    " + ",\n    ".join(rows)
    yield "\n  ]\n}\n"


def render(state: RunState, fmt: str) -> tuple[str, int]:
    v = verdict(state)
    if fmt == "json":
        return "".join(iter_json(state, v)), v.exit_code
    if fmt == "md":
        return to_markdown(state, v), v.exit_code
    return to_text(state, v), v.exit_code

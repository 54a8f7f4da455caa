"""A submitted run's Slurm job in the report (`RunState.job`, read from core/cluster): the `job`
object of the JSON report, and its lines in text and Markdown. Only the core is imported."""

from __future__ import annotations

from typing import Any, Optional

from .core.cluster import slurmtime
from .core.cluster.model import Conclusion, Job, Link, ServiceStep
from .core.cluster.words import QUEUED_STATES
from .core.model import Evidence, RunState
from .core.reducer.jobs import shown_link
from .core.sanitize import clean


def _ev(e: Optional[Evidence]) -> Optional[dict]:
    return e.to_json() if e is not None else None


def service_json(s: ServiceStep) -> dict[str, Any]:
    return {"name": s.name, "state": s.state, "detail": s.detail or None, "port": s.port, "url": s.url or None,
            "listening": s.listening or None, "attempts": s.attempts, "interval": s.interval, "log": s.log or None,
            "exit_code": s.exit_code, "out_of_memory": s.out_of_memory, "evidence": _ev(s.evidence),
            "healthy": _ev(s.healthy), "cause": _ev(s.cause)}


def link_json(ln: Link) -> dict[str, Any]:
    return {"job_id": ln.job_id, "previous": ln.previous, "state": ln.state or None, "source": ln.source or None,
            "reason": ln.reason or None, "exit_code": ln.exit_code, "signal": ln.signal, "nodes": ln.nodes or None,
            "elapsed": ln.elapsed, "time_limit": ln.time_limit, "submit_time": ln.submit_time or None,
            "start_time": ln.start_time or None, "end_time": ln.end_time or None,
            "dependency": ln.dependency or None, "started": ln.started, "forgotten": ln.forgotten,
            "rows_done_before": ln.rows_done_before, "rows_written": ln.rows_written, "action": ln.action or None,
            "followup": ln.followup, "not_needed": ln.not_needed, "normal_end": ln.normal_end,
            "driver_log": ln.driver_log or None, "cause": _ev(ln.cause), "cause_words": ln.cause_words or None,
            "evidence": [e.to_json() for e in ln.evidence], "services": [service_json(s) for s in ln.services]}


def conclusion_json(c: Conclusion) -> dict[str, Any]:
    return {"phase": c.phase, "state": c.state or None, "job_id": c.job_id or None, "headline": c.headline,
            "details": list(c.details), "failed": c.failed, "never_starts": c.never_starts,
            "near_limit": c.near_limit, "inferred": c.inferred, "evidence": [e.to_json() for e in c.evidence]}


def job_json(state: RunState) -> Optional[dict[str, Any]]:
    """The `job` object of a submitted run's JSON report (None for any other run)."""
    job, c = state.job, state.job_conclusion
    if job is None or c is None:
        return None
    shown = _shown(job)
    return {"benchmark": job.benchmark, "job_dir": job.job_dir, "time_limit": job.time_limit,
            "resumable": job.resumable, "max_retries": job.max_retries, "rollouts": job.rollouts or None,
            "sbatch_error": job.sbatch_error, "refused_at": _ev(job.refused_at),
            "slurm": {"asked": job.slurm_asked, "error": job.slurm_error or None, "accounting": job.accounting},
            "links": [link_json(ln) for ln in job.links],
            "services": [service_json(s) for s in shown.services] if shown is not None else [],
            "conclusion": conclusion_json(c), "notes": list(job.notes)}


def _shown(job: Job) -> Optional[Link]:
    return shown_link(job) if job.links else None


def job_lines(state: RunState) -> list[str]:
    """The job in text: what Slurm (or its files) says, each link of a chain, its service steps."""
    job, c = state.job, state.job_conclusion
    if job is None or c is None:
        return []
    where = f", job {c.job_id}" if c.job_id else ""
    out = [f"job ({clean(job.benchmark)}{where}): {clean(c.headline)}"]
    facts = [f"time limit {slurmtime.show_duration(job.time_limit)}" if job.time_limit else "",
             ("resumable" + (f", up to {job.max_retries} infra retries" if job.max_retries else ""))
             if job.resumable else "", f"job dir {clean(job.job_dir)}"]
    out.append("  " + "; ".join(f for f in facts if f))
    for line in c.details:
        out.append(f"  {clean(line)}")
    for e in c.evidence:
        out.append(f"  see {_line(e)}")
    shown = _shown(job)
    for s in shown.services if shown is not None else ():
        words = s.detail or s.state.replace("_", " ")
        out.append(f"  service {clean(s.name)}: {clean(words)}" + (f"  ({clean(s.log)})" if s.log else ""))
    for note in job.notes:
        out.append(f"  note: {clean(note)}")
    return out


def job_markdown(state: RunState) -> list[str]:
    job, c = state.job, state.job_conclusion
    if job is None or c is None:
        return []
    md = ["## Slurm job", "", f"**{_md(c.headline)}**" + (" (inferred from files)" if c.inferred else ""), ""]
    if job.links:
        md += ["| job | state | reason | nodes | elapsed | rows written | what it did |", "|---|---|---|---|---|---|---|"]
        for ln in job.links:
            rows = "" if ln.rows_written is None else str(ln.rows_written)
            reason = ln.reason if ln.state in QUEUED_STATES or ln.state == "CANCELLED" else ""   # (an ended
            # job's reason is only its last pending one)
            md.append(f"| {ln.job_id} | {ln.state or '?'} | {_md(reason)} | {_md(ln.nodes)} | "
                      f"{slurmtime.show_duration(ln.elapsed) if ln.elapsed is not None else ''} | {rows} | "
                      f"{_md(ln.action or ln.cause_words)} |")
        md.append("")
    for line in c.details:
        md.append(f"- {_md(line)}")
    for e in c.evidence:
        md.append(f"- evidence: `{e.where()}` {_md(e.text.strip())}".rstrip())
    return md


def _line(e: Evidence) -> str:
    text = clean(e.text.strip() or e.note)
    return e.where() + (f"  {text if len(text) <= 160 else text[:159] + '…'}" if text else "")


def _md(text: str) -> str:
    return clean(text).replace("|", "\\|").replace("`", "'")

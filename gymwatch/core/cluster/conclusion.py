"""A benchmark's job in one phase and one line: queued (and why), running (and how long of its
limit), or ended (and how), with the line that explains it and whether the state was told by
Slurm or inferred from the job's files. Read-only over the `Job` model.

A resume chain is one run: the link that decides is the latest that did something. A successor
Slurm cancelled because its predecessor succeeded was never needed, and a successor waiting for
a running link only waits in case that link fails: neither is the run's state.
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from ..model import Evidence
from . import slurmtime
from .model import (
    FROM_FILES,
    FROM_SLURM,
    P_ENDED,
    P_NOT_SUBMITTED,
    P_QUEUED,
    P_RUNNING,
    P_UNKNOWN,
    SV_DIED,
    SV_ENDED,
    SV_HEALTHY,
    SV_NEVER_HEALTHY,
    Conclusion,
    Job,
    Link,
)
from .words import ENDED_STATES, QUEUED_STATES, RUNNING_STATES, ended_words, reason, state_words

NEAR_LIMIT_SECONDS = 300        # flag a running job this close to its time limit ...
NEAR_LIMIT_SHARE = 0.1          # ... or within this share of it, whichever is longer


def conclude(job: Job, now: Optional[datetime] = None) -> Conclusion:
    """The benchmark's job-level conclusion. `now` (naive local time, like Slurm's) gives the
    time spent in the queue; without it that is left out."""
    if not job.links:
        if job.sbatch_error:
            return Conclusion(P_NOT_SUBMITTED, "", "", f"sbatch refused it: {job.sbatch_error}", failed=True)
        return Conclusion(P_UNKNOWN, "", "", "no Slurm job is known for it")
    link = deciding_link(job)
    details = list(_chain_lines(job)) + _source_lines(job, link)
    if link.state in QUEUED_STATES or (not link.state and not link.started):
        return _queued(job, link, now, details)
    if link.state in RUNNING_STATES:
        return _running(job, link, details)
    if link.state in ENDED_STATES:
        return _ended(job, link, details)
    return Conclusion(P_UNKNOWN, link.state, link.job_id, f"job {link.job_id}: {state_words(link.state)}",
                      details=tuple(details), inferred=link.source != FROM_SLURM)


def deciding_link(job: Job) -> Link:
    """The link whose state is the run's: the last that is neither unneeded nor a standby."""
    links = [ln for ln in job.links if not ln.not_needed] or job.links
    last = links[-1]
    if len(links) > 1 and last.state in QUEUED_STATES and links[-2].state in RUNNING_STATES:
        return links[-2]            # queued only in case the running link fails
    return last


def _queued(job: Job, link: Link, now: Optional[datetime], details: list[str]) -> Conclusion:
    inferred = link.source != FROM_SLURM
    if inferred and not link.state:
        head = f"job {link.job_id} has not started: no output from it yet (still queued, or it never ran)"
        return Conclusion(P_QUEUED, "", link.job_id, head, tuple(details), inferred=True)
    # Slurm's PENDING with reason None: nothing holds it back, the scheduler has not placed it yet.
    why = reason(link.reason or "None") if link.state == "PENDING" else (reason(link.reason) if link.reason else None)
    waited = _since(link.submit_time, now)
    head = f"queued{f' {slurmtime.show_duration(waited)}' if waited is not None else ''}"
    if link.state != "PENDING":
        head += f" ({state_words(link.state)})"
    if why is not None:
        head += f": {why.words}"
        if link.reason == "Dependency" and link.dependency:
            head += f" ({link.dependency})"
    if why is not None and why.never:
        head += f" ({link.reason}): it will never start as it is"
    elif link.start_time and link.state == "PENDING":
        head += f"; Slurm expects it to start at {link.start_time}"
    return Conclusion(P_QUEUED, link.state, link.job_id, head, tuple(details),
                      failed=bool(why and why.never), never_starts=bool(why and why.never), inferred=inferred)


def _running(job: Job, link: Link, details: list[str]) -> Conclusion:
    limit = link.time_limit if link.time_limit is not None else job.time_limit
    head = state_words(link.state)
    if link.nodes:
        head += f" on {link.nodes}"
    near = False
    if link.elapsed is not None:
        head += f" for {slurmtime.show_duration(link.elapsed)}"
        if limit:
            head += f" of {slurmtime.show_duration(limit)}"
            left = limit - link.elapsed
            near = left <= max(NEAR_LIMIT_SECONDS, limit * NEAR_LIMIT_SHARE)
            if near:
                head += f": near its time limit, {slurmtime.show_duration(left)} left"
    starting = [s for s in link.services if s.state not in (SV_HEALTHY, SV_ENDED)]
    if starting:
        head += "; " + ", ".join(f"{s.name} {s.state.replace('_', ' ')}" for s in starting)
    if link.source == FROM_FILES:
        head += " (no end in its files yet)"
    evidence = (link.cause,) if link.cause else ()
    return Conclusion(P_RUNNING, link.state, link.job_id, head, tuple(details), evidence,
                      failed=any(s.state in (SV_DIED, SV_NEVER_HEALTHY) for s in link.services),
                      near_limit=near, inferred=link.source != FROM_SLURM)


def _ended(job: Job, link: Link, details: list[str]) -> Conclusion:
    """How the run ended: the deciding link's state. A link whose prologue ended it before any work
    speaks for the link before it; one that stopped the chain (a limit, a cancelled predecessor)
    ended the run without its work done."""
    worker = _worker(job, link)
    head = ended_words(link.state, link.exit_code, link.signal)
    if link.stopped_chain and link.state == "COMPLETED":
        head = "ended"                         # the prologue exits 0, yet the work was not done
    if link.state == "CANCELLED" and not link.started:
        head += " before it started"
    if link.state == "TIMEOUT" and (link.time_limit or job.time_limit):
        head += f" ({slurmtime.show_duration(link.time_limit or job.time_limit)})"
    if link.stopped_chain:
        cause = link.action + (f"; job {worker.job_id}: {worker.cause_words}"
                               if worker is not link and worker.cause_words else "")
    else:
        cause = link.cause_words or (worker.cause_words if worker is not link else "")
    if cause and (link.state != "COMPLETED" or link.stopped_chain):
        head += f": {cause}"
    evidence = tuple(e for e in (link.cause, worker.cause if worker is not link else None) if e is not None)
    return Conclusion(P_ENDED, link.state, link.job_id, head, tuple(details), _unique(evidence),
                      failed=link.state != "COMPLETED" or link.stopped_chain, inferred=link.source != FROM_SLURM)


def _worker(job: Job, link: Link) -> Link:
    """The link that did the work `link` speaks for (itself, unless its prologue ended it first)."""
    if not link.prologue_only:
        return link
    before = [ln for ln in job.links[:job.links.index(link)] if ln.started and not ln.prologue_only]
    return before[-1] if before else link


def _chain_lines(job: Job) -> list[str]:
    """Every link of a chain in one line each: id, state, reason, what it did, which rows it wrote."""
    if len(job.links) < 2:
        return []
    out = []
    for n, ln in enumerate(job.links, 1):
        words = ended_words(ln.state, ln.exit_code, ln.signal) if ln.state in ENDED_STATES else state_words(ln.state)
        line = f"link {n}: job {ln.job_id} {ln.state or '?'}"
        if ln.reason and (ln.state in QUEUED_STATES or ln.state == "CANCELLED"):
            line += f" ({ln.reason})"   # an ended job's reason is only its last pending one
        line += f", {words}"
        if ln.not_needed:
            line += ": not needed, the link before it ended the chain"
        elif ln.action:
            line += f"; {ln.action}"
        if ln.cause_words and not ln.prologue_only:
            line += f"; {ln.cause_words}"
        if ln.rows_written is not None and ln.rows_done_before is not None:
            line += f"; wrote rows {ln.rows_done_before + 1}-{ln.rows_done_before + ln.rows_written}" \
                if ln.rows_written else "; wrote no rows"
        out.append(line)
    return out


def _source_lines(job: Job, link: Link) -> list[str]:
    if link.source == FROM_SLURM:
        return []
    if link.forgotten:
        why = f"Slurm no longer knows job {link.job_id} (older than it remembers)"
    elif job.slurm_error:
        why = f"Slurm could not be asked: {job.slurm_error}"
    elif not job.slurm_asked:
        why = "Slurm was not asked"
    else:
        why = f"Slurm does not list job {link.job_id}"
    return [f"state inferred from files: {why}"]


def _since(stamp: str, now: Optional[datetime]) -> Optional[int]:
    when = slurmtime.timestamp(stamp)
    if when is None or now is None:
        return None
    return max(0, int((now - when).total_seconds()))


def _unique(evidence: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
    return tuple(dict.fromkeys(evidence))

"""A run that is still starting: which servers are pending, in what phase, their last lines; and
whether the collector can start (every server ready, and from Gym 0.5 the model endpoints too)."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Optional

from ..core import gymversion
from ..core.model import FAILED, T_PENDING, RunState
from ..core.sanitize import clean


def pending_servers(state: RunState) -> list[str]:
    """Servers not up yet: Gym's last pending list (printed every 30 s) minus those whose own
    output shows them up since; else every server that has not become ready."""
    servers = state.servers
    if state.parent.pending:
        return [n for n in state.parent.pending if n not in servers or not servers[n].became_ready]
    return [s.name for s in servers.values() if not s.became_ready and s.state != FAILED]


def progress_line(state: RunState) -> str:
    """One line for a headless launcher: `servers 1/3 ready; waiting: mcqa (installing venv: 161 packages)`."""
    servers = state.servers
    if not servers:
        return "gym starting: no servers seen yet"
    ready = sum(1 for s in servers.values() if s.became_ready)
    waiting = [f"{n} ({servers[n].phase or servers[n].state})" if n in servers else n
               for n in pending_servers(state)]
    line = f"servers {ready}/{len(servers)} ready"
    if state.parent.all_ready:
        line = f"all {len(servers)} servers ready"
        ew = state.parent.endpoints
        if ew.pending:
            limit = f" of {ew.limit:g}s" if ew.limit else ""
            line += f"; gym is waiting for model endpoint(s) {', '.join(ew.urls)}" + (
                f": {ew.elapsed:g}s{limit}" if ew.elapsed is not None else "")
    elif waiting:
        line += "; waiting: " + ", ".join(waiting)
    c = state.collector
    if c.started:
        done = sum(1 for t in state.trials.values() if t.status != T_PENDING)
        line += f"; trials {done}/{state.expected_total if state.expected_total is not None else '?'}"
    return line


def timeout_summary(state: RunState, seconds: float, stage: str = "") -> str:
    if state.parent.all_ready is not None:
        return (f"startup timeout: all servers ready, but not ready to collect after {seconds:.0f}s: "
                f"{stage or 'gym has not said why'}")
    pend = pending_servers(state)
    out = [f"startup timeout: not all servers ready after {seconds:.0f}s; pending: "
           + (", ".join(pend) if pend else "unknown (no readiness line from gym yet)")]
    for name in pend:
        s = state.servers.get(name)
        if s is None:
            out.append(f"  {name}: no output yet")
            continue
        out.append(f"  {name}: {s.state}" + (f", {s.phase}" if s.phase else ""))
        if s.last_line_at is not None:
            out.append(f"    last line {s.last_line_at.where()}: {clean(s.last_line.strip())[:160]}")
    p = state.parent
    if p.last_line is not None:
        out.append(f"  gym's last line {p.last_line.where()}: {clean(p.last_line.text.strip())[:160]}")
    return "\n".join(out)


# --- ready to collect ----------------------------------------------------------------------
ENDPOINT_WAIT_FROM = (0, 5)   # Gym 0.5+ waits for the model endpoints after all servers are ready
ENDPOINT_GRACE = 20.0         # seconds: Gym probes each endpoint once (5 s at most) before it says it waits
CAN_COLLECT, NOT_YET, NEVER = "ready", "not yet", "never"   # can `gym eval run` start?


def readyz(head: str, timeout: float = 2.0) -> Optional[int]:
    """HTTP status of the head server's `/readyz` (Gym 0.7: 503 until the servers and the model
    endpoints answer), or None when nothing answers there."""
    try:
        with urllib.request.urlopen(f"http://{head}/readyz", timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def collect_stage(state: RunState, head: str, ready_for: float) -> tuple[str, str]:
    """Can `gym eval run --no-serve` start? (CAN_COLLECT / NOT_YET / NEVER, why). "All N servers ready"
    is not enough from Gym 0.5 on: Gym then waits for the model endpoints, and prints nothing
    when they all answer at once. `ready_for`: seconds since all servers were ready."""
    p = state.parent
    if p.all_ready is None:
        return NOT_YET, "servers starting"
    ew = p.endpoints
    if ew.gave_up is not None:
        return NEVER, f"gym gave up on the model endpoint(s): {clean(ew.gave_up.text.strip())[:160]}"
    if ew.pending:
        return NOT_YET, "gym is waiting for the model endpoint(s) " + ", ".join(ew.urls)
    if ew.answered is not None:
        return CAN_COLLECT, "every model endpoint answers"
    status = readyz(head)
    if status == 200:
        return CAN_COLLECT, "the head server is ready (/readyz)"
    if status == 503:
        return NOT_YET, "the head server is not ready yet (/readyz)"
    if gymversion.at_least(state, ENDPOINT_WAIT_FROM) is False or state.info.endpoint_limit == 0:
        return CAN_COLLECT, "all servers ready"
    if ready_for >= ENDPOINT_GRACE:
        return CAN_COLLECT, f"all servers ready and no model-endpoint wait after {ENDPOINT_GRACE:.0f}s"
    return NOT_YET, "all servers ready; gym may be checking the model endpoints"

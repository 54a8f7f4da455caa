"""Words about a run that is still starting: which servers are pending, in what phase, last lines."""

from __future__ import annotations

from ..core.model import FAILED, RunState
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
    elif waiting:
        line += "; waiting: " + ", ".join(waiting)
    c = state.collector
    if c.started:
        done = sum(1 for t in state.trials.values() if t.status != "pending")
        line += f"; trials {done}/{state.expected_total if state.expected_total is not None else '?'}"
    return line


def timeout_summary(state: RunState, seconds: float) -> str:
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

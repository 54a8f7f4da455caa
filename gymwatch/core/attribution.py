"""Failure-to-log attribution: which log line explains a failure (GYM_REFERENCE §6).

The collector names a URL, Gym names a process; the cause sits in another server's
own output. These functions follow that chain over the state the reducer built.
"""

from __future__ import annotations

import re
from typing import Optional

from . import gymlines as gl
from .model import Evidence, RunState, Server, Trial

_PORT_RE = re.compile(r"https?://[^:/'\"\s]+:(\d+)")


def agent_server(state: RunState, name: str = "") -> Optional[Server]:
    """The agent server: by the rows' agent_ref name, else the one server of kind agent."""
    for n in ([name] if name else []) + sorted(state.agent_names) + [state.info.agent]:
        if n and n in state.servers:
            return state.servers[n]
    agents = [s for s in state.servers.values() if s.kind == "agent"]
    return agents[0] if len(agents) == 1 else (agents[0] if agents else None)


def agent_log_evidence(state: RunState, name: str = "") -> Optional[Evidence]:
    """The line of the agent's log to read first: why it failed to start; else its first error;
    else its last line."""
    s = agent_server(state, name)
    if s is None:
        return None
    if s.failure is not None:
        return s.failure
    if s.errors:
        return s.errors[0]
    return s.last_line_at or s.ready_evidence


def never_ran_cause(state: RunState, trial: Optional[Trial]) -> Optional[Evidence]:
    """Never-ran: the agent's startup and /run handling (GYM_REFERENCE §6). An error line of the agent
    may belong to another trial, so unless the agent failed, point where its serving began."""
    s = agent_server(state, trial.agent if trial else "")
    if s is None:
        return None
    return s.failure or s.ready_evidence or agent_log_evidence(state, s.name)


def server_for_port(state: RunState, port: int) -> Optional[Server]:
    name = state.port_owner.get(port)
    if name:
        return state.servers.get(name)
    for s in state.servers.values():
        if s.port == port:
            return s
    return None


def abort_cause(state: RunState) -> tuple[Optional[Evidence], list[Evidence], str]:
    """Why the collector aborted: (primary evidence, related lines, one-line reason)."""
    c = state.collector
    err = c.error
    if err is None:
        return c.traceback, [], "the collector died with a traceback"
    m = gl.URL_PORT_RE.search(err.text)
    status = re.search(r"Error: (\d{3})", err.text)
    if m is None:
        return err, [c.traceback] if c.traceback else [], f"the collector died: {err.text.strip()}"
    port, path = int(m.group(1)), m.group(2) or ""
    target = server_for_port(state, port)
    if target is None:
        return err, [], f"the collector got an error from port {port}{path}, which no known server owns"
    first = _first_matching(target, gl.RUN_500_RE) or (target.errors[0] if target.errors else None)
    related = [err]
    upstream = _upstream_errors(state, target)
    related.extend(upstream)
    code = status.group(1) if status else "an error"
    why = f"the collector aborted: {target.name} answered {code} on {path or '/'}"
    if upstream:
        why += f"; upstream {upstream[0].file} shows `{_brief(upstream[0].text)}`"
    return first or err, related, why


def _first_matching(server: Server, pattern: re.Pattern[str]) -> Optional[Evidence]:
    for ev in server.errors:
        if pattern.search(ev.text):
            return ev
    return None


def _upstream_errors(state: RunState, target: Server) -> list[Evidence]:
    """Errors in the servers the failing one calls: model retries first, then resources servers."""
    out = []
    for s in sorted(state.servers.values(), key=lambda s: (s.kind != "model", s.name)):
        if s is target:
            continue
        retry = [e for e in s.errors if gl.MODEL_RETRY_RE.search(e.text)]
        out.extend(retry[:3] if retry else s.errors[:1])
    return out


def _brief(text: str, limit: int = 100) -> str:
    _, body = gl.split_prefix(text)
    body = " ".join(body.split())
    return body if len(body) <= limit else body[: limit - 1] + "…"


def trial_cause(state: RunState, trial: Trial) -> Optional[Evidence]:
    """Where to read about one failed, never-ran or missing trial (beyond its own row)."""
    if trial.status == "never_ran":
        return never_ran_cause(state, trial)
    if trial.status == "failed":
        if trial.failure_class.startswith("judge"):
            res = [s for s in state.servers.values() if s.kind in ("resources", "unknown") and s.errors]
            res.sort(key=lambda s: s.kind != "resources")
            if res:
                return res[0].errors[-1]
        return agent_log_evidence(state, trial.agent)
    if trial.status == "missing":
        c = state.collector
        return c.error or c.last_line or agent_log_evidence(state, trial.agent)
    return None

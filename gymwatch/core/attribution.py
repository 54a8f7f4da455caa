"""Failure-to-log attribution: which log line explains a failure (docs/gym-formats.md, "Where the
cause is").

The collector names a URL, Gym names a process; the cause sits in another server's
own output. These functions follow that chain over the state the reducer built.
"""

from __future__ import annotations

import re
from typing import Optional

from . import gymlines as gl, upstream
from .model import (
    FAILED,
    K_AGENT,
    K_ENVIRONMENT,
    K_MODEL,
    K_RESOURCES,
    K_UNKNOWN,
    T_COMPLETED,
    T_FAILED,
    T_MISSING,
    T_NEVER_RAN,
    Evidence,
    Retrying,
    RunState,
    Server,
    Trial,
)

_PORT_RE = re.compile(r"https?://[^:/'\"\s]+:(\d+)")


Memo = Optional[dict]    # answers that depend on the servers only, kept over one report of one state


def agent_server(state: RunState, name: str = "", memo: Memo = None) -> Optional[Server]:
    """The agent server: by the rows' agent_ref name, else the one server of kind agent."""
    if memo is not None:
        key = ("agent", name)
        if key not in memo:
            memo[key] = agent_server(state, name)
        return memo[key]
    for n in ([name] if name else []) + sorted(state.agent_names) + [state.info.agent]:
        if n and n in state.servers:
            return state.servers[n]
    agents = [s for s in state.servers.values() if s.kind == K_AGENT]
    return agents[0] if len(agents) == 1 else (agents[0] if agents else None)


def agent_log_evidence(state: RunState, name: str = "", memo: Memo = None) -> Optional[Evidence]:
    """The line of the agent's log to read first: why it failed to start; else its first error;
    else its last line."""
    s = agent_server(state, name, memo)
    if s is None:
        return None
    if s.failure is not None:
        return s.failure
    if s.errors:
        return s.errors[0]
    return s.last_line_at or s.ready_evidence


def never_ran_cause(state: RunState, trial: Optional[Trial], memo: Memo = None) -> Optional[Evidence]:
    """Never-ran: the agent's /run handling, where a line of it is tied to the trial. Its failure
    (to start, or a death: every trial's), else the first of never_ran_lines()."""
    s = agent_server(state, trial.agent if trial else "", memo)
    if s is None:
        return None
    if s.failure is not None:
        return s.failure
    lines = never_ran_lines(state, s, trial, memo)
    return lines[0] if lines else None


def never_ran_lines(state: RunState, agent: Server, trial: Optional[Trial], memo: Memo = None) -> list[Evidence]:
    """The agent's lines while serving that explain a never-ran trial. When no request it answered
    had an output (empty_for_all), they apply to every trial: its errors while serving, else its
    first `POST /run` (access logs, Gym 0.4-0.5), else its last line (never its startup banner,
    which says nothing about why the model was not called). Otherwise only its errors that name
    the trial: another trial's error says nothing of this one."""
    serving = serving_errors(agent, memo)
    if trial is None or empty_for_all(state, agent, memo):
        if serving:
            return serving
        if agent.first_run is not None:
            return [agent.first_run]
        last = agent.last_line_at
        return [last] if last is not None and last != agent.ready_evidence else []
    return [e for e in serving if gl.names_trial(e.text, trial.key)]


def empty_for_all(state: RunState, agent: Server, memo: Memo = None) -> bool:
    """No trial of this agent completed: every request it answered came back empty."""
    if memo is not None:
        key = ("empty_for_all", agent.name)
        if key not in memo:
            memo[key] = empty_for_all(state, agent)
        return memo[key]
    return not any(t.status == T_COMPLETED and agent_server(state, t.agent, memo) is agent
                   for t in state.trials.values())


def serving_errors(s: Server, memo: Memo = None) -> list[Evidence]:
    """Error lines a server printed after it was up (while it handled requests)."""
    if memo is not None:
        key = ("serving", s.name)
        if key not in memo:
            memo[key] = serving_errors(s)
        return memo[key]
    ready = s.ready_evidence
    if ready is None:
        return list(s.errors)
    return [e for e in s.errors if e.file != ready.file or e.line > ready.line]


def never_ran_row(trial: Trial) -> Optional[Evidence]:
    """A never-ran trial's row, with what in it shows the model was never called."""
    ev = trial.evidence
    if ev is None:
        return None
    return Evidence(ev.file, ev.line, ev.text, "response.output is empty and every token count is 0")


def server_for_port(state: RunState, port: int) -> Optional[Server]:
    name = state.port_owner.get(port)
    if name:
        return state.servers.get(name)
    for s in state.servers.values():
        if s.port == port:
            return s
    return None


RECOVERED_AFTER = 2.0    # seconds a row must be written after a retry report's file to count as later


def connection_trouble(state: RunState) -> Optional[tuple[str, Retrying]]:
    """The connection a process of the run retried longest without making it, and who: Gym
    retries refused and dropped connections without end, so a dead model endpoint or server
    stalls the collection with no error anywhere but these lines. Only retries that no recorded
    trial came after (still_retrying)."""
    return _longest(state, _retries(state))


def server_trouble(state: RunState, s: Server) -> Optional[Retrying]:
    """The connection server `s` retried longest without making it (still_retrying), if any."""
    found = _longest(state, [(s.name, r) for r in s.retrying.values()])
    return found[1] if found is not None else None


def _retries(state: RunState) -> list[tuple[str, Retrying]]:
    """Every process's connections it could not make, and who: the servers, then the collector."""
    found = [(s.name, r) for s in state.servers.values() for r in s.retrying.values()]
    return found + [("the collector", r) for r in state.collector.retrying.values()]


def _longest(state: RunState, found: list[tuple[str, Retrying]]) -> Optional[tuple[str, Retrying]]:
    found = [x for x in found if still_retrying(state, x[1])]
    return max(found, key=lambda x: (x[1].elapsed, x[1].failures or 0), default=None)


def _trouble(state: RunState, memo: Memo) -> Optional[tuple[str, Retrying]]:
    if memo is None:
        return connection_trouble(state)
    if ("trouble",) not in memo:
        memo[("trouble",)] = connection_trouble(state)
    return memo[("trouble",)]


def still_retrying(state: RunState, r: Retrying) -> bool:
    """Nothing shows the connection was made since its last report: no row was written after the
    file holding that report was (the lines carry no time, the files' last writes do; a row written
    later means trials went on, while a log still written later says nothing either way)."""
    a = state.activity
    logged = a.writes.get(r.last.file)
    return a.rows_write is None or logged is None or a.rows_write <= logged + RECOVERED_AFTER


def died_serving(state: RunState) -> Optional[Server]:
    """The server Gym named dead (`Process X finished unexpectedly!`) after it had been ready:
    it died while trials ran, and whatever failed after it follows from that. Not one whose own
    output shows it exited with the run (the reducer concluded exited: it did not die)."""
    name = state.parent.died_server
    s = state.servers.get(name) if name else None
    return s if s is not None and s.became_ready and s.state == FAILED else None


def retries_to(state: RunState, target: Server) -> list[Evidence]:
    """The last `[request_retry ...]` line of each process that could not connect to `target`."""
    return [r.last for _, r in _retries(state) if _server_at(state, r.url) is target]


def _server_at(state: RunState, url: str) -> Optional[Server]:
    """The run's server a URL goes to, by its port."""
    m = _PORT_RE.match(url)
    return server_for_port(state, int(m.group(1))) if m else None


def retry_target(state: RunState, who: str, url: str) -> str:
    """What a retried URL is: one of the run's servers (by its port), a model server's upstream
    (the model endpoint), or just the URL."""
    target = _server_at(state, url)
    if target is not None and target.name != who:
        return f"{target.name} ({url})"
    s = state.servers.get(who)
    return f"the model endpoint {url}" if s is not None and s.kind == K_MODEL else url


def retry_words(state: RunState, who: str, r: Retrying, named: bool = True) -> str:
    failures = f"{r.failures} failed connections, " if r.failures else ""
    return (f"{who + ' ' if named else ''}could not connect to {retry_target(state, who, r.url)} ({r.error}): "
            f"{failures}one request retrying for {r.elapsed:.0f}s (Gym retries these without end)")


def abort_cause(state: RunState) -> tuple[Optional[Evidence], list[Evidence], str]:
    """Why the collector aborted: (primary evidence, related lines, one-line reason)."""
    c = state.collector
    err = c.error
    if err is None:
        return c.traceback, [], "the collector died with a traceback"
    m = gl.URL_PORT_RE.search(err.text)
    status = re.search(r"Error: (\d{3})", err.text)
    if m is None and c.traceback is None:
        return err, [], f"the collector stopped on an error of its own: {' '.join([err.text.strip(), *c.error_more])}"
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
        why += f"; upstream, {said(state, upstream[0])} ({upstream[0].where()})"
    return first or err, related, why


def _first_matching(server: Server, pattern: re.Pattern[str]) -> Optional[Evidence]:
    for ev in server.errors:
        if pattern.search(ev.text):
            return ev
    return None


def _upstream_errors(state: RunState, target: Server) -> list[Evidence]:
    """Errors in the servers the failing one calls: model retries first, then resources servers."""
    out = []
    for s in sorted(state.servers.values(), key=lambda s: (s.kind != K_MODEL, s.name)):
        if s is target:
            continue
        retry = [e for e in s.errors if gl.MODEL_RETRY_RE.search(e.text)]
        out.extend(retry[:3] if retry else s.errors[:1])
    return out


def said(state: RunState, ev: Evidence) -> str:
    """What a cause line says, for a reason, whole: a failed request as who got what from whom and
    the upstream's own error message (`policy_model got HTTP 500 from the model endpoint U: "stub
    forced failure"`: from the retry line's `error_msg`, or the `Response content:` line after
    Gym 0.7's `[upstream_request_failed]`); any other line quoted as it is."""
    who, body = gl.split_prefix(ev.text)
    who = who or _owner(state, ev)
    body = body.strip()
    answer = upstream.answer(body)
    if answer is None:
        answer = _answer_after(state, who, ev)
    if answer is None:
        return f"{who} logged `{body}`" if who else f"`{body}`"
    url, status = upstream.request(body)
    target = retry_target(state, who or "", url) if url else "its upstream"
    return f"{who or 'a server'} got {f'HTTP {status}' if status else 'an error'} from {target}: " \
           f"\"{upstream.message(answer)}\""


def _owner(state: RunState, ev: Evidence) -> str:
    """The server whose own log holds the line."""
    return next((s.name for s in state.servers.values() if s.log_file == ev.file), "")


def _answer_after(state: RunState, who: str, ev: Evidence) -> Optional[str]:
    """The answer Gym 0.7 logs on the line after an `[upstream_request_failed]` line."""
    s = state.servers.get(who)
    for a in s.answers if s is not None else ():
        if a.file == ev.file and a.line == ev.line + 1:
            return upstream.answer(gl.split_prefix(a.text)[1])
    return None


def failure_chain(state: RunState, trial: Trial, memo: Memo = None) -> list[Evidence]:
    """The lines that explain a failed trial, in the order a request travelled: the collector's
    line naming it, the server that got its /run (the port in the error's URL), the agent, then the
    model server and what it got upstream. One line per server: its first error of the kind (past
    the target, else its first error while serving: it was on the failed request's path)."""
    chain = [e for e in (trial.named_at, trial.evidence) if e is not None]
    target = target_server(state, trial)
    seen = set()
    for s in [target, agent_server(state, trial.agent, memo)] + _models(state, memo):
        if s is None or s.name in seen:
            continue
        seen.add(s.name)
        # else a server past the target on the request's path: its first error while serving
        serving = serving_errors(s, memo) if s is not target else []
        first = _first_matching(s, _REQUEST_ERROR) or (serving[0] if serving else None)
        if first is not None:
            chain.append(first)
    return list(dict.fromkeys(chain))


def target_server(state: RunState, trial: Trial) -> Optional[Server]:
    """The server a failed trial's request went to: the port in its error's URL."""
    m = gl.URL_PORT_RE.search(trial.message)
    return server_for_port(state, int(m.group(1))) if m else None


def failing_call(state: RunState, trial: Trial) -> Optional[tuple[str, Optional[Server]]]:
    """The request whose failure failed the trial: its path, and the server it went to when known.
    From the URL in the failure's message (its port names the server); else from Gym's `/run
    failed` line naming the trial: the collector's /run, which goes to the agent up to Gym 0.6 and
    to the environment server from 0.7 (the run's one such server; several: not known which)."""
    m = gl.URL_PORT_RE.search(trial.message)
    if m:
        return m.group(2) or "/", server_for_port(state, int(m.group(1)))
    named = trial.named_at or trial.evidence
    if named is None or not gl.RUN_FAILED_RE.search(named.text):
        return None
    envs = [s for s in state.servers.values() if s.kind == K_ENVIRONMENT]
    if envs:
        return "/run", envs[0] if len(envs) == 1 else None
    return "/run", agent_server(state, trial.agent)


def cause_chain(state: RunState, trial: Trial, memo: Memo = None) -> list[Evidence]:
    """Every line that explains one trial, in the order to read them: its own row (or the
    collector line that named it), then across servers to the cause; Gym's health finding last."""
    chain: list[Optional[Evidence]]
    if trial.status == T_FAILED:
        chain = list(failure_chain(state, trial, memo))
    elif trial.status == T_NEVER_RAN:
        agent = agent_server(state, trial.agent, memo)
        chain = [never_ran_row(trial), never_ran_cause(state, trial, memo)]
        chain += never_ran_lines(state, agent, trial, memo)[:3] if agent is not None else []
    elif trial.status == T_MISSING:
        # what ended the collector, in reading order (its traceback, then the error it ends
        # with); when that was an HTTP error from a server, where that server's answer came from
        c = state.collector
        chain = [c.traceback, c.error, cut_row(state)]    # a cut row: where the collector stopped
        if c.error is not None and gl.URL_PORT_RE.search(c.error.text):
            first, related, _ = abort_cause(state)
            chain += [first, *related]
        trouble = _trouble(state, memo)
        cut = cut_row(state)
        chain += [trouble[1].last if trouble else None, cut_short_by(state), c.last_line if cut is None else None]
    else:
        chain = [trial.evidence]
    chain.append(trial_cause(state, trial, memo))
    gym = state.health.get(trial.key)
    chain.append(gym.evidence if gym is not None else None)
    out: list[Evidence] = []
    for ev in chain:
        if ev is not None and all((e.file, e.line) != (ev.file, ev.line) for e in out):
            out.append(ev)
    return out


_REQUEST_ERROR = re.compile(r"\[model_retry |\[upstream_request_failed\]|\"POST /run HTTP/[\d.]+\" 5\d\d|"
                            r"Hit an exception while making a request")


def _models(state: RunState, memo: Memo = None) -> list[Server]:
    if memo is not None:
        if ("models",) not in memo:
            memo[("models",)] = _models(state)
        return memo[("models",)]
    return sorted((s for s in state.servers.values() if s.kind == K_MODEL), key=lambda s: s.name)


def trial_cause(state: RunState, trial: Trial, memo: Memo = None) -> Optional[Evidence]:
    """Where to read about one failed, never-ran or missing trial (beyond its own row). `memo`:
    a dict kept over many trials of one state (a report), for what depends on the servers only."""
    if trial.status == T_NEVER_RAN:
        return never_ran_cause(state, trial, memo)
    if trial.status == T_FAILED:
        if trial.failure_class.startswith("judge"):
            res = [s for s in state.servers.values() if s.kind in (K_RESOURCES, K_UNKNOWN) and s.errors]
            res.sort(key=lambda s: s.kind != K_RESOURCES)
            if res:
                return res[0].errors[-1]
        chain = failure_chain(state, trial, memo)
        own = {trial.named_at, trial.evidence}
        beyond = [e for e in chain if e not in own]
        return beyond[-1] if beyond else every_trials_cause(state, trial, memo)
    if trial.status == T_MISSING:
        c = state.collector
        trouble = _trouble(state, memo)
        return (c.error or cut_row(state) or (trouble[1].last if trouble else None) or cut_short_by(state)
                or c.last_line or every_trials_cause(state, trial, memo))
    return None


def every_trials_cause(state: RunState, trial: Trial, memo: Memo = None) -> Optional[Evidence]:
    """What failed every trial then, when no line of a server names this one's failure: its agent's
    failure (it never started, or died), a server Gym named dead while trials ran, or Gym's stop
    of its servers before the collection finished (their open requests answer 500). Not just any
    line of the agent's: nothing would tie it to the trial."""
    s = agent_server(state, trial.agent, memo)
    if s is not None and s.failure is not None:
        return s.failure
    dead = died_serving(state)
    if dead is not None:
        return dead.failure or state.parent.died
    if state.parent.stopping is not None and not (state.collector.finished or state.aggregate_written):
        return state.parent.stopping
    return None


def cut_row(state: RunState) -> Optional[Evidence]:
    """The rollouts file's last row, cut mid-line, of a collection that did not finish: the
    collector died while writing it (killed, out of memory); the trials it never wrote are missing."""
    c = state.collector
    return c.cut_row if c.cut_row is not None and not c.finished and not state.aggregate_written else None


def cut_short_by(state: RunState) -> Optional[Evidence]:
    """`NeMo Gym finished!` when gym env start shut the servers down before the collector finished
    and nothing else says how the collector ended (no error of its own, no exit status, no process
    seen)."""
    c, p = state.collector, state.parent
    if p.finished is None or c.finished or c.alive is not None or c.exit_code is not None:
        return None
    if c.error is not None or c.traceback is not None:
        return None
    return p.finished

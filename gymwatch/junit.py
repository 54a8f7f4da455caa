"""`gymwatch report RUN --format junit`: a Gym run as a JUnit XML test report, for CI systems.

One `<testcase>` per trial (classname `<environment>.<agent>`, name `task T rollout R`): a
completed trial passes; a failed, never-ran or missing one is a `<failure>` whose message is its
reason and evidence `file:line`; a trial still pending when the report was written is an
`<error>`. A run that failed before or beside its trials (startup failed, collection aborted, no
agent ran) adds one `<error>` testcase for the run itself. The suite's properties carry the
verdict and counts, its `system-out` the text report.

The document is valid against the Apache Ant JUnit schema that Jenkins and most CI readers follow
(tests/junit-ant.xsd): `<testsuites>` without attributes, one `<testsuite>` with `package` and
`id`, `properties`, `system-out` and `system-err` always present, a timestamp without a zone.

Every string comes from the run (log lines, rollout fields, paths): terminal escapes are stripped
(`core.sanitize.clean`), then every character XML 1.0 forbids, then it is escaped for its place.
Written a testcase at a time: a 100k-trial run is never held as one tree.
"""

from __future__ import annotations

import os
import re
import socket
import time
from typing import Iterator, Optional

from .core import attribution
from .core.model import (
    FAILED,
    T_COMPLETED,
    T_FAILED,
    T_MISSING,
    T_NEVER_RAN,
    T_PENDING,
    V_COLLECTION_ABORTED,
    V_NO_AGENT_RAN,
    V_STARTUP_FAILED,
    V_UNREADABLE,
    Evidence,
    RunState,
    Trial,
)
from .core.sanitize import clean
from .core.verdict import Verdict, counts, mean_reward, verdict
from .report import HEADLINES, said, sorted_trials, to_text

# Characters XML 1.0 does not allow anywhere, even as character references.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
RUN_ERRORS = (V_STARTUP_FAILED, V_COLLECTION_ABORTED, V_NO_AGENT_RAN, V_UNREADABLE)
MESSAGE_MAX = 1000      # characters of a failure message attribute (the body has the rest)


def xml_text(s: str) -> str:
    """Untrusted text as XML character data: escapes and forbidden characters gone, & < > escaped."""
    s = _NOT_XML.sub("", clean(s))
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def xml_attr(s: str) -> str:
    """Untrusted text as a double-quoted attribute value (line breaks and tabs kept as references)."""
    return (xml_text(s).replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;")
            .replace("\t", "&#9;"))


def _attrs(**kw: object) -> str:
    return "".join(f' {k.rstrip("_")}="{xml_attr(str(v))}"' for k, v in kw.items())


def classname(state: RunState, t: Optional[Trial] = None) -> str:
    """`environment.agent` (Jenkins reads the part before the last dot as the package)."""
    env = state.info.environment or "gym"
    agent = (t.agent if t is not None and t.agent else "") or state.info.agent
    return ".".join(" ".join(clean(x).split()).replace(".", "_") for x in (env, agent) if x) or "gym"


def case_name(t: Trial) -> str:
    return f"task {t.task_index} rollout {t.rollout_index}"


def _why(t: Trial) -> str:
    head = " ".join(x for x in (t.failure_class, f"HTTP {t.http_status}" if t.http_status else "") if x)
    why = head + (": " if head and t.message else "") + t.message
    if t.status == T_NEVER_RAN:
        withheld = f"; recorded reward {t.withheld_reward:g} withheld" if t.withheld_reward is not None else ""
        return "never ran: the model was never called (empty output, zero usage)" + withheld
    if t.status == T_MISSING:
        return "missing: no row; the collector ended without it" + (f" ({why})" if why else "")
    if t.status == T_PENDING:
        return "still pending when the report was written (the run had not finished)"
    return "failed" + (f": {why}" if why else "")


def _where(e: Optional[Evidence]) -> str:
    return e.where() if e is not None else ""


def trial_failure(state: RunState, t: Trial, memo: attribution.Memo = None) -> tuple[str, str, str, str]:
    """(element, type, message, body) of a trial that did not pass; element '' when it passed."""
    if t.status == T_COMPLETED:
        return "", "", "", ""
    cause = attribution.trial_cause(state, t, memo)
    ev = t.evidence or (cause if t.status == T_MISSING else None)
    rows = [u.words() for u in state.unreadable.values() if u.rows]
    why = " ".join(clean(f"unknown: {'; '.join(rows)}" if rows and t.status == T_PENDING else _why(t)).split())
    where = _where(ev) or _where(cause)
    message = why[:MESSAGE_MAX] + (f" ({where})" if where else "")
    body = [why]
    if ev is not None:
        body.append(f"evidence: {ev.where()}" + (f"  {ev.text.strip()}" if ev.text.strip() else ""))
    if t.named_at is not None and t.named_at is not ev:
        body.append(f"named at: {t.named_at.where()}  {t.named_at.text.strip()}")
    if cause is not None and cause is not ev:
        body.append(f"cause: {cause.where()}" + (f"  {cause.text.strip()}" if cause.text.strip() else ""))
    if t.attempt_index is not None:
        body.append(f"attempt: {t.attempt_index}" + (f" (of {len(t.earlier) + 1} seen)" if t.earlier else ""))
    element = "error" if t.status == T_PENDING else "failure"
    kind = t.status if t.status != T_FAILED else f"failed.{t.failure_class or 'unknown'}"
    return element, kind, message, "\n".join(body)


def run_error(state: RunState, v: Verdict) -> Optional[tuple[str, str, str]]:
    """(type, message, body) of the run's own error: startup failed, collection aborted, no agent ran."""
    if v.name not in RUN_ERRORS:
        return None
    where = _where(v.evidence)
    message = " ".join(clean(v.reason).split()) + (f" ({where})" if where else "")     # whole: never cut
    body = [f"{HEADLINES.get(v.name, v.name)}: {v.reason}"]
    if v.evidence is not None:
        body.append(f"evidence: {v.evidence.where()}  {said(v.evidence)}".rstrip())
    body += [f"related: {e.where()}  {said(e)}".rstrip() for e in v.related[:10]]
    for s in state.servers.values():
        if s.state == FAILED:
            body.append(f"server {s.name} failed: {s.failure_reason}" + (f" ({s.failure.where()})" if s.failure else ""))
    return v.name, message, "\n".join(body)


def run_case_name(v: Verdict) -> str:
    return {V_STARTUP_FAILED: "gym env start", V_COLLECTION_ABORTED: "gym eval run (rollout collection)",
            V_NO_AGENT_RAN: "agent"}.get(v.name, "run")


def _timestamp(state: RunState) -> str:
    """When the run started (UTC, no zone: the schema's pattern), else the run's newest file time."""
    ts = state.info.started_at or getattr(state, "first_stamp", None)
    if not ts:
        try:
            ts = os.stat(state.root).st_mtime
        except OSError:
            ts = 0.0
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts))


def _duration(state: RunState) -> float:
    first, last = getattr(state, "first_stamp", None), getattr(state, "last_stamp", None)
    return round(max(0.0, last - first), 3) if first is not None and last is not None else 0.0


def iter_junit(state: RunState, v: Optional[Verdict] = None, hostname: Optional[str] = None) -> Iterator[str]:
    """The JUnit XML document in pieces (one testcase a piece)."""
    v = v or verdict(state)
    trials = sorted_trials(state)
    run_err = run_error(state, v)
    failures = sum(1 for t in trials if t.status in (T_FAILED, T_NEVER_RAN, T_MISSING))
    errors = sum(1 for t in trials if t.status == T_PENDING) + (1 if run_err else 0)
    tests = len(trials) + (1 if run_err else 0)
    name = " ".join(clean(os.path.basename(os.path.normpath(state.root)) or state.root).split()) or "gym run"
    host = hostname or socket.gethostname() or "localhost"
    yield '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n'
    yield (f'  <testsuite{_attrs(name=name, package=classname(state), id=0, timestamp=_timestamp(state), hostname=host, tests=tests, failures=failures, errors=errors, time=_duration(state))}>\n')
    yield "    <properties>\n"
    c = counts(state)
    mr = mean_reward(state)
    props = [("verdict", v.name), ("reason", v.reason), ("evidence", _where(v.evidence)),
             ("exit_code", str(v.exit_code)), ("root", str(state.root)),
             ("environment", state.info.environment), ("agent", state.info.agent), ("model", state.info.model),
             ("mean_reward", "" if mr is None else f"{mr:.6g}")]
    props += [(f"trials.{k}", str(n)) for k, n in c.items()]
    for key, value in props:
        if value:
            yield f"      <property{_attrs(name=key, value=value)}/>\n"
    yield "    </properties>\n"
    if run_err is not None:
        kind, message, body = run_err
        yield (f'    <testcase{_attrs(name=run_case_name(v), classname=classname(state), time=0)}>\n'
               f'      <error{_attrs(message=message, type=kind)}>{xml_text(body)}</error>\n    </testcase>\n')
    memo: dict = {}
    for t in trials:
        element, kind, message, body = trial_failure(state, t, memo)
        head = f'    <testcase{_attrs(name=case_name(t), classname=classname(state, t), time=0)}'
        if not element:
            yield head + "/>\n"
        else:
            yield (f"{head}>\n      <{element}{_attrs(message=message, type=kind)}>{xml_text(body)}"
                   f"</{element}>\n    </testcase>\n")
    yield f"    <system-out>{xml_text(to_text(state, v))}</system-out>\n"
    err = f"{HEADLINES.get(v.name, v.name)}: {v.reason}" + (f" ({_where(v.evidence)})" if v.evidence else "")
    yield f"    <system-err>{xml_text(err) if v.exit_code else ''}</system-err>\n"
    yield "  </testsuite>\n</testsuites>\n"

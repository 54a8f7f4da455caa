"""The one reducer: every parsed line of every file goes through here into the RunState.

It records which keys changed so views update only what moved. The report and the
live screen both read the state this builds, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from . import gymlines as gl
from . import records
from .layout import BOTH, EVAL, VALIDATE
from .model import (
    FAILED, READY, T_COMPLETED, T_FAILED, T_NEVER_RAN, T_PENDING,
    Evidence, Malformed, RunState, Server, Trial, TrialKey,
)
from .markers import is_error_line
from .servers import ServerTracker, on_line, set_state

MAX_KEPT_MALFORMED = 200


@dataclass(slots=True)
class Changes:
    servers: set[str] = field(default_factory=set)
    trials: set[TrialKey] = field(default_factory=set)
    removed_trials: set[TrialKey] = field(default_factory=set)
    run: bool = False
    files: dict[str, int] = field(default_factory=dict)   # file (relative) -> new lines read
    reset: bool = False

    def __bool__(self) -> bool:
        return bool(self.servers or self.trials or self.removed_trials or self.run or self.files or self.reset)

    def merge(self, other: "Changes") -> None:
        self.servers |= other.servers
        self.trials |= other.trials
        self.removed_trials |= other.removed_trials
        self.run = self.run or other.run
        self.reset = self.reset or other.reset
        for k, v in other.files.items():
            self.files[k] = self.files.get(k, 0) + v


class Reducer:
    def __init__(self, state: RunState, clock: Callable[[], Optional[float]] = lambda: None):
        self.state = state
        self.clock = clock
        self.changes = Changes()
        self.trackers: dict[str, ServerTracker] = {}
        self.own_logs: set[str] = set()          # servers read from their own log file
        self.fed_from_merged: set[str] = set()   # servers whose lines came from a merged stream
        self._banner: Optional[str] = None       # server whose `# Server Instances` block is being read
        self._examples_next = False
        self._attempts: dict[tuple[int, int], list[TrialKey]] = {}   # (task, rollout) -> keys with attempts

    def take_changes(self) -> Changes:
        out, self.changes = self.changes, Changes()
        return out

    # --- servers ---------------------------------------------------------------
    def server(self, name: str) -> Server:
        s = self.state.servers.get(name)
        if s is None:
            kind = "resources" if name == self.state.info.environment else gl.server_kind(name)
            s = Server(name=name, kind=kind)
            self.state.servers[name] = s
            self.trackers[name] = ServerTracker()
            self.changes.run = True
        self.changes.servers.add(name)
        return s

    def server_log_line(self, name: str, file: str, lineno: int, text: str) -> None:
        """A line of `<logs>/<name>.log`: it is that server's, prefixed or not."""
        pref, body = gl.split_prefix(text)
        if pref is not None and pref != name and (pref in self.state.servers or gl.log_stem(pref) == name):
            if gl.log_stem(pref) == name:
                self._rename(name, pref)
            name = pref   # the real name (slashes become `_` in file names), or a foreign line
        elif pref is None:
            name = self._owner_of_stem(name)
        self._server_text(name, body if pref is not None else text, Evidence(file, lineno, text))
        self.state.servers[name].log_file = file

    def _owner_of_stem(self, stem: str) -> str:
        """The server `<logs>/<stem>.log` belongs to, if one is known by its real name (a name
        with `/` has its log named with `_`)."""
        if stem in self.state.servers:
            return stem
        return next((n for n in self.state.servers if gl.log_stem(n) == stem), stem)

    def _rename(self, stem: str, real: str) -> None:
        """Lines at the top of `<stem>.log` came before any `(<real>) ` prefix told the server's
        real name: give what they made to the real server (unless it is known already)."""
        servers = self.state.servers
        if stem == real or stem not in servers:
            return
        s = servers.pop(stem)
        tracker = self.trackers.pop(stem)
        self.changes.servers.discard(stem)
        self.changes.run = True
        if real not in servers:
            s.name = real
            servers[real] = s
            self.trackers[real] = tracker

    def _server_text(self, name: str, body: str, ev: Evidence) -> None:
        s = self.server(name)
        on_line(s, self.trackers[name], body, ev, self.clock())
        if s.port is not None and s.state == READY:
            self.state.port_owner[s.port] = name

    # --- the head server (optional HTTP probes) ---------------------------------------
    def server_instances(self, instances: list) -> None:
        """Apply the head server's `/server_instances` list (name, host, port, pid, url)."""
        for inst in instances:
            if not isinstance(inst, dict) or not isinstance(inst.get("process_name") or inst.get("name"), str):
                continue
            s = self.server(inst.get("process_name") or inst["name"])
            s.kind = gl.SERVER_TYPE_KIND.get(str(inst.get("server_type")), s.kind)
            if isinstance(inst.get("port"), int):
                s.port = inst["port"]
                self.state.port_owner[s.port] = s.name
            s.host = inst.get("host") if isinstance(inst.get("host"), str) else s.host
            s.url = inst.get("url") if isinstance(inst.get("url"), str) else s.url
            s.pid = s.pid or (inst.get("pid") if isinstance(inst.get("pid"), int) else None)   # a wrapper's

    def http_answer(self, name: str, ok: bool) -> None:
        """Any HTTP response from `GET /` proves a server is up (GYM_REFERENCE §2)."""
        s = self.server(name)
        s.http_ok = ok
        if ok and s.state not in (READY, FAILED):
            set_state(s, READY, self.clock(), "answering HTTP")
            if s.ready_at is None:
                s.ready_at = self.clock()

    # --- captured streams of gym processes -------------------------------------
    def stream_line(self, role: str, file: str, lineno: int, text: str) -> None:
        for piece in gl.unglue(text, self.state.servers.keys()):
            self._stream_piece(role, file, lineno, piece)

    def _stream_piece(self, role: str, file: str, lineno: int, text: str) -> None:
        name, body = gl.split_prefix(text)
        ev = Evidence(file, lineno, text)
        if name is not None:
            if gl.log_stem(name) not in self.own_logs:
                self.fed_from_merged.add(gl.log_stem(name))
                self._server_text(name, body, ev)
            elif name not in self.state.servers:
                self.server(name)
            return
        if role == VALIDATE:
            return
        self._parent_line(role, text, ev)
        if role in (EVAL, BOTH):
            self._collector_line(role, text, ev)

    def _parent_line(self, role: str, text: str, ev: Evidence) -> None:
        """A line of gym env start. Collector streams are read for its patterns too: an end-to-end
        `gym eval run` serves and collects in one process."""
        matched = self._parent_patterns(role, text, ev)
        if role != EVAL or matched:
            p = self.state.parent
            p.started = True
            if text.strip():
                p.last_lines[ev.file] = ev
            if p.error is None and p.all_ready is None and role != EVAL and is_error_line(text) \
                    and not text.startswith("Traceback"):
                p.error = ev      # e.g. its head server could not bind its port: why it gave up

    def _parent_patterns(self, role: str, text: str, ev: Evidence) -> bool:
        p = self.state.parent
        if self._banner_line(text, ev):
            return True
        if not gl.PARENT_ANY_RE.search(text):
            return False
        pending = gl.parse_pending(text)
        if pending is not None:
            self._pending(pending, ev)
            return True
        if gl.ALL_READY_RE.search(text):
            p.all_ready, p.pending = ev, []
            for s in list(self.state.servers.values()):
                self._gym_says_ready(s)
            self.changes.run = True
            return True
        m = gl.DIED_RE.search(text)
        if m:
            p.died, p.died_server = ev, m.group(1)
            self.server(m.group(1))
        elif gl.TIMEOUT_RE.search(text):
            p.timeout = ev
        elif gl.FINISHED_RE.search(text):
            p.finished = ev
        elif text.startswith("Traceback (most recent call last):") and not self._collecting(role):
            p.traceback = ev
        else:
            m = gl.HEAD_RE.search(text)
            if m and p.head_url is None and role != EVAL:
                p.head_url = m.group(1)
            return False
        self.changes.run = True
        return True

    def _pending(self, pending: tuple[int, int, list[str]], ev: Evidence) -> None:
        p = self.state.parent
        ready, total, names = pending
        p.pending, p.ready_count, p.wait_line = names, (ready, total), ev
        for n in names:
            self.server(n)
        if ready:
            for s in list(self.state.servers.values()):
                if s.name not in names:
                    self._gym_says_ready(s)
        self.changes.run = True

    def _gym_says_ready(self, s: Server) -> None:
        s.reported_ready_by_gym = True
        if s.state != FAILED and s.state != READY:
            set_state(s, READY, self.clock(), "ready")
            if s.ready_at is None:
                s.ready_at = self.clock()
        self.changes.servers.add(s.name)

    def _banner_line(self, text: str, ev: Evidence) -> bool:
        m = gl.BANNER_RE.match(text)
        if m:
            self._banner = m.group(2)
            s = self.server(self._banner)
            s.kind = gl.SERVER_TYPE_KIND.get(m.group(3), s.kind)
            return True
        if self._banner is None:
            return False
        if text.startswith("#") or (text.startswith("[") and not text.startswith("[model_retry")):
            self._banner = None
            return False
        f = gl.BANNER_FIELD_RE.match(text)
        if f:
            s = self.server(self._banner)
            key, value = f.group(1), f.group(2)
            if key == "port" and value.isdigit():
                s.port = int(value)
                self.state.port_owner[s.port] = s.name
            elif key == "pid" and value.isdigit():
                s.pid = s.pid or int(value)    # the bash wrapper's; the server's own wins (servers.py)
            elif key == "host":
                s.host = value
            elif key == "url":
                s.url = value
            elif key == "server_type":
                s.kind = gl.SERVER_TYPE_KIND.get(value, s.kind)
            return True
        return text.strip() in ("{", "}", "")

    def _collecting(self, role: str) -> bool:
        c = self.state.collector
        return role == EVAL or (role == BOTH and c.started)

    def _collector_line(self, role: str, text: str, ev: Evidence) -> None:
        c = self.state.collector
        if role == EVAL or gl.COLLECT_START_RE.search(text):
            if not c.started:
                self.changes.run = True
            c.started = True
        if not c.started:
            return
        stripped = text.strip()
        if stripped and not stripped.startswith("Collecting rollouts:") and not stripped.startswith("Reading rows:"):
            c.last_lines[ev.file] = ev
        if self._examples_next:
            self._examples_next = False
            m = gl.EXAMPLES_LEFT_RE.match(stripped)
            if m:
                c.examples_left = int(m.group(2))
        if stripped == "Examples left:":
            self._examples_next = True
        if gl.COLLECT_DONE_RE.search(text):
            c.finished = True
            self.changes.run = True
        m = _last(gl.PROGRESS_RE, text) or _last(gl.TQDM_RE, text)
        if m:
            c.progress = (int(m.group(1)), int(m.group(2)))
            self.changes.run = True
        if text.startswith("Traceback (most recent call last):"):
            c.traceback, c.error = ev, None
            self.changes.run = True
        elif c.traceback is not None and gl.EXC_LINE_RE.match(text):
            c.error = ev
            self.changes.run = True

    # --- rollouts files -----------------------------------------------------------
    def rollout_row(self, file: str, lineno: int, raw: bytes) -> None:
        facts = self._facts(records.rollout_facts, file, lineno, raw)
        if facts is None:
            return
        if facts.agent and facts.agent not in self.state.agent_names:
            self.state.agent_names.add(facts.agent)
        t = self._trial(facts, file, lineno)
        if t is None:
            return
        if facts.agent:
            t.agent = facts.agent
        t.input_tokens, t.output_tokens = facts.input_tokens, facts.output_tokens
        t.evidence = Evidence(file, lineno)
        if facts.never_ran:
            t.status, t.reward, t.withheld_reward = T_NEVER_RAN, None, facts.reward
        elif facts.failure_class:
            t.status, t.reward = T_FAILED, None
            t.failure_class, t.message = facts.failure_class, facts.message
        else:
            t.status, t.reward = T_COMPLETED, facts.reward
            if t.failure_class:
                t.failure_class = t.message = ""

    def failure_row(self, file: str, lineno: int, raw: bytes) -> None:
        facts = self._facts(records.failure_facts, file, lineno, raw)
        if facts is None:
            return
        t = self._trial(facts, file, lineno)
        if t is None or t.status in (T_COMPLETED, T_NEVER_RAN):
            return   # a success row for the same key wins over a stale failure row
        # A failure row that meets the never-ran rule counts as never-ran (GYM_REFERENCE §5).
        t.status, t.reward = (T_NEVER_RAN if facts.never_ran else T_FAILED), None
        t.failure_class, t.message = facts.failure_class, facts.message
        t.agent = facts.agent or t.agent
        t.input_tokens, t.output_tokens = facts.input_tokens, facts.output_tokens
        t.evidence = Evidence(file, lineno)
        self.state.collector.started = True

    def materialized_row(self, file: str, lineno: int, raw: bytes) -> None:
        facts = self._facts(records.materialized_facts, file, lineno, raw)
        if facts is None:
            return
        if facts.task is None or facts.rollout is None:
            self._malformed(file, lineno, facts.problem or "no usable trial key")
            return
        state = self.state
        state.collector.started = True
        state.expected_total = (state.expected_total or 0) + 1
        base = (facts.task, facts.rollout, None)
        trials = state.trials
        t = trials.get(base)
        if t is not None:
            t.expected = True
        elif base[:2] in self._attempts:
            for k in self._attempts[base[:2]]:
                trials[k].expected = True
        else:
            trials[base] = Trial(facts.task, facts.rollout, expected=True)
            self.changes.trials.add(base)
        self.changes.run = True

    def _facts(self, parse, file: str, lineno: int, raw: bytes):
        try:
            return parse(raw)
        except records.BadLine as exc:
            if not raw.strip():
                return None   # a blank line is not a row
            self._malformed(file, lineno, str(exc))
            return None

    def _trial(self, facts: records.RowFacts, file: str, lineno: int) -> Optional[Trial]:
        if not self.state.collector.started:
            self.state.collector.started = True    # a row proves the collector ran
        if facts.task is None or facts.rollout is None:
            self.state.unattributed_records += 1
            self._malformed(file, lineno, facts.problem or "no usable _ng_task_index")
            return None
        if facts.problem:
            self._malformed(file, lineno, facts.problem)
        key = (facts.task, facts.rollout, facts.attempt)
        trials = self.state.trials
        t = trials.get(key)
        if t is None:
            expected = False
            base = (facts.task, facts.rollout, None)
            if facts.attempt is not None and base in trials and trials[base].status == T_PENDING:
                expected = trials.pop(base).expected
                self.changes.removed_trials.add(base)
            t = Trial(facts.task, facts.rollout, facts.attempt, expected=expected)
            trials[key] = t
            if facts.attempt is not None:
                self._attempts.setdefault(key[:2], []).append(key)
        self.changes.trials.add(key)
        self.changes.run = True
        return t

    def _malformed(self, file: str, lineno: int, reason: str) -> None:
        self.state.malformed_count += 1
        if len(self.state.malformed) < MAX_KEPT_MALFORMED:
            self.state.malformed.append(Malformed(file, lineno, reason))
        self.changes.run = True

    def file_error(self, file: str, reason: str) -> None:
        for m in self.state.malformed:
            if m.file == file and m.line == 0 and m.reason == reason:
                return
        self._malformed(file, 0, reason)


def _last(pattern, text: str):
    m = None
    for m in pattern.finditer(text):
        pass
    return m

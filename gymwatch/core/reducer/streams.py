"""Gym's captured output: `gym env start`'s lines (the parent: its servers' wait, banner, deaths,
endpoint wait, shutdown) and `gym eval run`'s (the collector: start, progress, errors, the lines
that name a failed trial, health totals). A line of a server (`(name) ` prefixed) goes to
core/reducer/servers.py unless that server is read from its own log."""

from __future__ import annotations

import re
from typing import Callable, Optional

from .. import attempts, fast, gymlines as gl
from ..fast import scan
from ..layout import BOTH, EVAL, VALIDATE
from ..markers import is_error_line
from ..model import (
    INSTALLING,
    K_SERVICE,
    K_UNKNOWN,
    PENDING,
    READY,
    SRC_LINE,
    STARTING,
    T_FAILED,
    Attempt,
    Evidence,
    HealthTotals,
    Server,
)
from ..servers import lock_phase, same_venv, set_phase, set_state
from ..stamps import STAMP_START
from ..tail import decode
from .servers import ServerLines
from .writer import Part, Writer, retrying


class StreamLines(Part):
    def __init__(self, w: Writer, server_lines: ServerLines):
        super().__init__(w)
        self.server_lines = server_lines
        self.banner: Optional[str] = None          # server whose `# Server Instances` block is being read
        self.examples_next = False                 # the line after `Examples left:` is read next
        self.endpoint_list = False                 # reading the endpoints listed under Gym's give-up line

    def line(self, role: str, file: str, lineno: int, text: str) -> None:
        if gl.cannot_glue(text):      # (no list from unglue for the common case)
            self._stream_piece(role, file, lineno, text)
            return
        for piece in gl.unglue(text, self.state.servers.keys()):
            self._stream_piece(role, file, lineno, piece)

    def block(self, role: str, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of a captured stream (whole lines, each ending with a newline, none
        holding a \r): as if each went to `line`."""
        if fast.enabled("scan"):
            scan.stream_block(self, role, file, first, block)
            return
        for lineno, raw in enumerate(block.split(b"\n")[:-1], first):
            self.line(role, file, lineno, decode(raw))

    # --- for the block search (core/fast/scan.py) -----------------------------------------------
    def steady(self, file: str, lineno: int) -> bool:
        """No state that reads the next lines one by one is open: a banner's fields, the endpoint
        list, the line after `Examples left:`, the lines that go on a `gym` command's error."""
        c = self.state.collector
        return (self.banner is None and not self.endpoint_list and not self.examples_next
                and not (c.error is not None and c.traceback is None and c.error.file == file
                         and lineno == c.error.line + 1 + len(c.error_more)))

    def quiet_servers(self) -> frozenset[str]:
        """Servers whose lines in a merged stream change nothing: known, and read from their own logs."""
        return frozenset(n for n in self.state.servers if gl.log_stem(n) in self.server_lines.own_logs)

    def quiet(self, role: str, file: str, stamps: list[str], unprefixed: bool,
              last: Callable[[], Optional[tuple[int, str]]]) -> None:
        """Lines holding no word of gymlines.PARENT's or COLLECTOR's steady entries, or a quiet
        server's: their timestamps (`stamps`: the lines that may start with one); if any is Gym's
        own (`unprefixed`), the stream was seen, and its last line is the last of those that holds
        text (`last()`: its number and text)."""
        for text in stamps:
            self.w.stamp(text)
        if role == VALIDATE or not unprefixed:
            return
        found = last()
        ev = None if found is None else Evidence(file, found[0], found[1])
        if role != EVAL:
            p = self.state.parent
            p.started = True
            if ev is not None:
                p.last_lines[file] = ev
        if role in (EVAL, BOTH):
            c = self.state.collector
            if role == EVAL and not c.started:
                c.started = self.changes.run = True
            if c.started and ev is not None:
                c.last_lines[file] = ev

    def _stream_piece(self, role: str, file: str, lineno: int, text: str) -> None:
        name, body = gl.split_prefix(text)
        ev = Evidence(file, lineno, text)
        if name is not None:
            if gl.log_stem(name) not in self.server_lines.own_logs:
                self.server_lines.fed_from_merged.add(gl.log_stem(name))
                self.server_lines.text(name, body, ev)
            elif name not in self.state.servers:
                self.w.server(name)
            return
        if text[:1] in STAMP_START:
            self.w.stamp(text)
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
            # (not Gym's `Process X finished unexpectedly!`, which is `died`: it may also end a run
            # whose servers were all ready, in the other stream, read in either order)
            if p.error is None and p.all_ready is None and role != EVAL and is_error_line(text) \
                    and gl.TRACEBACK not in text and ev is not p.died:
                p.error = ev      # e.g. its head server could not bind its port: why it gave up
            if p.head_failed is None and p.all_ready is None and role != EVAL and gl.BIND_ERROR_RE.search(text):
                # Unprefixed: Gym's own head server (a server's uvicorn lines carry its prefix). Gym
                # may print its servers' wait all the same, in the other stream: not a sign either way.
                p.head_failed = ev
                self.changes.run = True

    def _parent_patterns(self, role: str, text: str, ev: Evidence) -> bool:
        p = self.state.parent
        if self._banner_line(text, ev) or self._endpoint_list_line(text, ev):
            return True
        if not gl.parent_line_candidate(text):
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
        if self._startup_line(text, ev) or self._endpoint_line(text, ev):
            self.changes.run = True
            return True
        if gl.HEAD_DOWN_RE.search(text):
            p.head_down, p.head_down_count = ev, p.head_down_count + 1
            self.changes.run = True
            return True
        m = gl.DIED_RE.search(text)
        if m:
            p.died, p.died_server = ev, m.group(1)
            self.w.server(m.group(1))
        elif gl.TIMEOUT_RE.search(text):
            p.timeout = ev
            self.w.sign("spinup_limit", ev)
        elif gl.FINISHED_RE.search(text):
            p.finished = ev
        elif gl.SHUTDOWN_BEGIN_RE.match(text):
            p.stopping = p.stopping or ev
        elif gl.INTERRUPT_RE.match(text):
            if p.traceback is None or p.traceback.file != ev.file or self._collecting(role):
                return False
            p.interrupt = ev
        elif gl.TRACEBACK in text and not self._collecting(role):
            p.traceback = p.traceback or ev
        else:
            m = gl.HEAD_RE.search(text)
            if m and p.head_url is None and role != EVAL:
                p.head_url = m.group(1)
            return False
        self.changes.run = True
        return True

    def _startup_line(self, text: str, ev: Evidence) -> bool:
        """Gym 0.7's launch line per server, the venv-lock wait in merged output, and the start
        of the spin-up wait (the clock of Gym's spin-up limit)."""
        p = self.state.parent
        m = gl.LAUNCH_RE.search(text)
        if m:
            s = self.w.server(m.group(1))
            s.venv = m.group(2)
            kind = gl.server_kind(s.name, m.group(2))
            if kind != K_UNKNOWN:
                s.kind = kind
            if s.state == PENDING and not s.phase:
                s.phase = "launched, waiting for its first output"
            self.w.sign("launch_line", ev)
            for other in self.state.servers.values():    # a lock wait read before this line
                if self.trackers[other.name].lock_wait and same_venv(other.venv, s.venv):
                    set_phase(other, lock_phase(self.state, other, other.venv), self.w.clock())
                    self.changes.servers.add(other.name)
            return True
        m = gl.VENV_LOCK_RE.search(text)
        if m:     # unprefixed: every server of that venv with no output of its own yet may be the one
            self.w.sign("venv_lock", ev)
            for s in self.state.servers.values():
                if same_venv(s.venv, m.group(1)) and s.state == PENDING and s.last_line_at is None:
                    set_phase(s, lock_phase(self.state, s, m.group(1)), self.w.clock())
                    self.changes.servers.add(s.name)
            return True
        if gl.SPINUP_RE.search(text):
            p.spinup = ev
            p.spinup_at = self.w.clock()
            return True
        if gl.HEAD_WAIT_RE.search(text) and "launch_line" not in self.state.gym_signs:
            self.w.sign("no_launch_line", ev)     # Gym 0.7 names each server's venv before this line
        return False

    def _endpoint_line(self, text: str, ev: Evidence) -> bool:
        """The model-endpoint wait after all servers are ready (Gym 0.5+)."""
        e = self.state.parent.endpoints
        m = gl.ENDPOINT_WAIT_RE.search(text)
        if m:
            e.waiting, e.waiting_at, e.urls = ev, self.w.clock(), gl.endpoint_urls(m.group(2))
            self.w.sign("endpoint_wait", ev)
            limit = gl.ENDPOINT_LIMIT_RE.search(text)     # a glued stream may hold both lines
            if limit:
                e.limit = float(limit.group(1))
            return True
        m = gl.ENDPOINT_LIMIT_RE.search(text)
        if m and e.waiting is not None:
            e.limit = float(m.group(1))
            return True
        m = gl.ENDPOINT_STILL_RE.search(text)
        if m and e.waiting is not None:
            e.elapsed, e.elapsed_at = float(m.group(1)), self.w.clock()
            return True
        m = gl.ENDPOINT_OK_RE.search(text)
        if m:
            e.answered, e.elapsed, e.elapsed_at = ev, float(m.group(1)), self.w.clock()
            return True
        m = gl.ENDPOINT_FAILED_RE.search(text)
        if m:
            e.gave_up, e.limit = ev, float(m.group(2))
            self.endpoint_list = True
            self.w.sign("endpoint_wait", ev)
            return True
        m = gl.ENDPOINT_UNRESOLVED_RE.search(text)
        if m:
            e.unresolved.append(ev)
            return True
        return False

    def _endpoint_list_line(self, text: str, ev: Evidence) -> bool:
        """`  - http://host/v1 (from `key`)` lines under Gym's give-up line."""
        if not self.endpoint_list:
            return False
        stripped = text.strip()
        if stripped.startswith("- ") and gl.ENDPOINT_ITEM[0] in stripped:
            # `- <url> (from `key`)`; rich wraps long lines, so the key may be on the next line
            words = stripped[2:].split()
            key = re.search(r"\(from `([^`]+)`\)", stripped)
            url = words[0] + (f" ({key.group(1)})" if key else "")
            e = self.state.parent.endpoints
            if url not in e.urls:
                e.urls.append(url)
            return True
        self.endpoint_list = False    # the list ends at the first other line (advice follows)
        return False

    def _pending(self, pending: tuple[int, int, list[str]], ev: Evidence) -> None:
        p = self.state.parent
        ready, total, names = pending
        p.pending, p.ready_count, p.wait_line = names, (ready, total), ev
        for n in names:
            self.w.server(n)
        if ready:
            for s in list(self.state.servers.values()):
                if s.name not in names:
                    self._gym_says_ready(s)
        self.changes.run = True

    def _gym_says_ready(self, s: Server) -> None:
        if s.kind == K_SERVICE:       # a job's service step: not one of Gym's servers
            return
        s.reported_ready_by_gym = True
        if s.state in (PENDING, INSTALLING, STARTING):     # not one its own lines ended since
            set_state(s, READY, self.w.clock(), "ready")
            if s.ready_at is None:
                s.ready_at = self.w.clock()
        self.changes.servers.add(s.name)

    def _banner_line(self, text: str, ev: Evidence) -> bool:
        m = gl.BANNER_RE.match(text) if text[:1] == "[" else None
        if m:
            self.banner = m.group(2)
            s = self.w.server(self.banner)
            s.kind = gl.SERVER_TYPE_KIND.get(m.group(3), s.kind)
            return True
        if self.banner is None:
            return False
        if text.startswith("#") or (text.startswith("[") and not text.startswith("[model_retry")):
            self.banner = None
            return False
        f = gl.BANNER_FIELD_RE.match(text)
        if f:
            s = self.w.server(self.banner)
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
        if gl.REQUEST_RETRY in text and retrying(c.retrying, text, ev):
            self.changes.run = True
        stripped = text.strip()
        if stripped and not stripped.startswith(gl.NOT_LAST_LINES):
            c.last_lines[ev.file] = ev
        if self.examples_next:
            self.examples_next = False
            m = gl.EXAMPLES_LEFT_RE.match(stripped)
            if m:
                c.examples_left = int(m.group(2))
        if stripped.endswith(gl.EXAMPLES_LEFT):
            self.examples_next = True
        if gl.COLLECT_DONE_RE.search(text):
            c.finished = True
            self.changes.run = True
        m = gl.PROGRESS_RE.last(text) or gl.TQDM_RE.last(text)
        if m:
            done = (int(m.group(1)), int(m.group(2)))
            if done[0] > (c.progress[0] if c.progress is not None else 0):
                self.w.arrived(1)         # progress that moved is a result (a redrawn bar is not)
            if c.progress is None or done[0] >= c.progress[0]:      # stdout's and stderr's counts,
                c.progress = done                                     # read in either order: the most
            self.changes.run = True
        elif c.concurrency is None and text.startswith(gl.CONCURRENCY):
            m = gl.CONCURRENCY_RE.match(text)
            if m:
                c.concurrency = int(m.group(1))
                self.changes.run = True
        if gl.TRACEBACK in text:    # also mid-line, after a tqdm segment
            c.traceback, c.error = ev, None
            self.changes.run = True
        elif c.traceback is not None and (gl.EXC_LINE_RE.match(text) or gl.INTERRUPT_RE.match(text)):
            c.error = ev
            self.changes.run = True
        elif c.traceback is None and c.error is None and gl.CLI_ERROR_RE.match(text):
            c.error = ev                # Gym refused its config or arguments (`Error: Input file not found`)
            self.changes.run = True
        elif (c.traceback is None and c.error is not None and ev.file == c.error.file and stripped
              and ev.line == c.error.line + 1 + len(c.error_more)):
            c.error_more.append(stripped)
        elif gl.TRIAL_LINE in text:
            self._trial_line(text, ev)
        else:
            self._collector_signs(text, ev)

    def _trial_line(self, text: str, ev: Evidence) -> None:
        """A collector line that names a failed trial: `/run failed status=N row={...}`, or `rollout
        dropped from the score: row={...} class=X error=...` (Gym 0.7 prints both for one failure)."""
        m = gl.RUN_FAILED_RE.search(text)
        if m:
            key = gl.row_key(m.group(2))
            status = int(m.group(1)) if m.group(1).isdigit() else None
            if key is not None:
                self._observe(key, Attempt(None, T_FAILED, None, "", "", status, ev, SRC_LINE, ev))
            return
        m = gl.DROPPED_RE.search(text)
        if m:
            key = gl.row_key(m.group(1))
            message = (m.group(3) or "").strip()
            code = re.match(r"(\d{3})\b", message)
            if key is not None:
                self._observe(key, Attempt(None, T_FAILED, None, m.group(2), message,
                                           int(code.group(1)) if code else None, ev, SRC_LINE, ev))

    def _observe(self, key: tuple, failed: Attempt) -> None:
        """A collector line named the trial `key` failed: a result of it, seen now."""
        t = self.w.trial(key[:2])
        attempts.observe_line(t, failed)
        self.w.arrived(1)
        now = self.w.clock()
        if now is not None:
            t.arrived = now

    def _collector_signs(self, text: str, ev: Evidence) -> None:
        """Gym's health totals line, and features that bound the Gym version."""
        if gl.HEALTH_LINE in text:
            m = gl.HEALTH_LINE_RE.search(text)
            if m and not self.w.health_file_totals:
                _, healthy, unhealthy, unobserved = (int(x) for x in m.groups())
                self.state.health_totals = HealthTotals(healthy, unhealthy, unobserved, ev)
                self.changes.run = True
            self.w.sign("health_check", ev)
        elif gl.FOUND_RE.search(text):
            self.w.sign("found_progress", ev)
        elif text.startswith(gl.ROUTE_FAILURES):
            self.w.sign("route_failures", ev)
        elif text.startswith(gl.TASK_LATENCY):
            self.w.sign("task_latency", ev)

"""The one reducer: the only writer of the RunState. Every parsed line of every file, what the
session learns beside them (configs, processes, file activity) and what the whole state means
(`settle`) go through here.

It records which keys changed so views update only what moved. The report and the
live screen both read the state this builds, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import re
from typing import Callable, Iterator, Optional

from . import gymlines as gl
from . import attempts, health, logscan, records, streamscan
from .layout import BOTH, EVAL, VALIDATE
from .stamps import STAMP_START, line_stamp
from .model import (
    EXITED, FAILED, INSTALLING, K_RESOURCES, K_UNKNOWN, PENDING, READY, STARTING, T_COMPLETED, T_FAILED, T_MISSING,
    T_NEVER_RAN, T_PENDING, SRC_FAILURE_ROW, SRC_LINE, SRC_ROW, Attempt, Evidence, HealthTotals, Malformed, Retrying, Unreadable,
    RunInfo, RunState, Server, Trial, TrialKey,
)
from .markers import is_error_line
from .servers import ServerTracker, fail, hold, lift, lock_phase, on_line, ready_by_gym_first, same_venv, set_state
from .tail import decode
from .verdict import collector_ended, exited_with_run, parent_gave_up, timed_out_reason

MAX_KEPT_MALFORMED = 200
CANON_MAX = 4096            # distinct values rollout_items keeps one object of
LEFT_STARTING = "not up when gym env start ended: nothing waits for it any more"
STOPPED_STARTING = "stopped by Gym before it was ready"
EXITED_WITH_RUN = "exited with the run (Ctrl-C, or a signal)"
_POOL_SIGN, _ACCESS_OFF_SIGN = logscan.STEADY_KEYWORDS["VERSION_SIGNS"]   # Reducer._output_signs


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
        self._endpoint_list = False              # reading the endpoints listed under Gym's give-up line
        self.health_file_totals = False          # quality_summary.json read: it outranks the line
        self.access_sign_files: set[str] = set() # files whose first access-log line was seen
        self.bad_rows: dict[str, int] = {}       # per rows file, its last line that was no row
        self._canon: tuple[dict, dict, dict] = ({}, {}, {})   # rollout_items' agent names, rewards, token counts

    def take_changes(self) -> Changes:
        out, self.changes = self.changes, Changes()
        return out

    # --- what the whole state means (after every poll; idempotent) ------------------------
    def settle(self, now: Optional[float] = None) -> None:
        """Apply what Gym's parent says about servers (a death it named, its spin-up timeout, its
        give-up, its shutdown), and mark trials missing once the collector has ended (pending
        again if it turns out not to have). Every change is reported like any other.

        What settle concludes of a server is held apart from what its lines made of it: each
        settle first takes the last one's conclusions back, and so does the server's next line
        (core/servers.py, `hold()` / `lift()`). The files are tailed separately, so Gym's words
        may be read before the server's own: the conclusions are always drawn from every line
        read so far, as one whole read would draw them."""
        st, p = self.state, self.state.parent
        before = {name: (s.state, s.phase, s.kind, s.state_since) for name, s in st.servers.items()}
        for name, s in st.servers.items():
            lift(s, self.trackers[name])
        env = st.servers.get(st.info.environment)
        if env is not None and env.kind == K_UNKNOWN:
            env.kind = K_RESOURCES
        if p.died_server and p.died_server in st.servers:
            s = st.servers[p.died_server]
            if exited_with_run(st, s):
                self._conclude(s, now, phase=EXITED_WITH_RUN, state=EXITED)
            else:
                self._conclude(s, now, f"Gym: {p.died.text.strip() if p.died else 'process died'}", told=p.died)
        if p.timeout is not None:
            for s in st.servers.values():
                if not s.became_ready and s.state != FAILED:
                    self._conclude(s, now, timed_out_reason(st, s), timed_out=True)
        if parent_gave_up(st):
            for s in st.servers.values():
                # Output ending at the install step is a death of its own (the 0.4-0.6 pipefail bug)
                # unless Gym stopped its servers, or was stopped itself: then that is where it was.
                if not (s.became_ready or s.state == FAILED) and (
                        s.failure is not None or self.trackers[s.name].ended_at_install and p.stopping is None
                        and p.interrupt is None):
                    self._conclude(s, now, "died during startup")
                elif not (s.became_ready or s.state in (FAILED, EXITED)):
                    if p.stopping is not None:
                        self._conclude(s, now, phase=STOPPED_STARTING, state=EXITED)
                    else:   # no death of its own: its process may still run, with nothing waiting for it
                        self._conclude(s, now, phase=LEFT_STARTING)
        if p.finished is not None:
            for s in st.servers.values():
                if s.state == READY:
                    self._conclude(s, now, phase="stopped by Gym", state=EXITED)
        for name, s in st.servers.items():
            old = before.get(name)
            if old is not None and old[0] == s.state:
                s.state_since = old[3]      # the same conclusion drawn again: its time stays
        moved = {name for name, s in st.servers.items() if before.get(name, ())[:3] != (s.state, s.phase, s.kind)}
        self.changes.servers |= moved
        self.changes.trials |= self._settle_trials(collector_ended(st))
        self.changes.run |= bool(moved)

    def _conclude(self, s: Server, now: Optional[float], why: str = "", timed_out: bool = False,
                  phase: str = "", state: str = "", told: Optional[Evidence] = None) -> None:
        """One of settle's conclusions about a server: failed for `why`, else the new `phase` (and
        `state`). Held, so that it can be taken back."""
        tracker = self.trackers[s.name]
        hold(s, tracker)
        if why:
            fail(s, tracker, now, why, timed_out=timed_out, told=told)
        else:
            set_state(s, state or s.state, now, phase)

    def _settle_trials(self, ended: bool) -> set[TrialKey]:
        """Expected trials without a row are missing once the collector has ended; not while a file
        of rows could not be read (their rows may be in it)."""
        moved = set()
        ended = ended and not any(u.rows for u in self.state.unreadable.values())
        for t in self.state.trials.values():
            if t.status == T_PENDING and ended and t.expected:
                t.status = T_MISSING
                moved.add(t.key)
            elif t.status == T_MISSING and not ended:
                t.status = T_PENDING
                moved.add(t.key)
        return moved

    # --- what the session learns beside the files' lines ----------------------------------
    def run_info(self, info: RunInfo) -> None:
        """Names and settings read from Hydra's configs, the manifest or a bundle."""
        self.state.info = info
        self.changes.run = True

    def collection_began(self) -> None:
        """The materialized inputs exist: Gym writes them first, as collection begins."""
        if not self.state.collector.started:
            self.state.collector.started = True
            self.changes.run = True

    def aggregate_done(self) -> None:
        """The aggregate metrics file is whole: the collection finished."""
        if not self.state.aggregate_written:
            self.state.aggregate_written = True
            self.changes.run = True

    def note(self, text: str) -> None:
        """A file gymwatch did not read, and why."""
        if text not in self.state.notes:
            self.state.notes.append(text)
            self.changes.run = True

    def read_progress(self, behind: bool, now: Optional[float]) -> None:
        """Whether files are still being read to their end (a budgeted poll), and the clock."""
        self.state.reading = behind
        self.state.now = now

    # --- servers ---------------------------------------------------------------
    def server(self, name: str) -> Server:
        s = self.state.servers.get(name)
        if s is None:
            kind = K_RESOURCES if name == self.state.info.environment else gl.server_kind(name)
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

    def server_log_block(self, stem: str, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of `<logs>/<stem>.log`, whole (each ends with a newline, none holds a
        \r), with the effect of giving each to `server_log_line`: while the server is steady, the
        lines up to the next one that can change it are skipped in C (core/logscan.py). Of the
        timestamps, the block's first and last stamped lines count (a server writes its lines
        in time order), and those of the lines read one by one."""
        end = len(block)

        def steady(lineno: int) -> bool:
            name = self._owner_of_stem(stem)
            s, tracker = self.state.servers.get(name), self.trackers.get(name)
            return s is not None and tracker is not None and _steady(s, tracker)

        def next_hit(pos: int) -> int:
            name = self._owner_of_stem(stem)
            pat = logscan.pattern(name, file not in self.access_sign_files, self.state.servers[name].first_run is None)
            return logscan.next_line(pat, block, pos, end)

        def skip(lo: int, hi: int, lineno: int) -> None:
            name = self._owner_of_stem(stem)
            # The line at `hi` is the server's next last line, unless another server's prefix may
            # give it to that one (or there is none).
            own = hi < end and not logscan.foreign(block, hi, name) and logscan.has_text(block, hi)
            self._skip_lines(self.state.servers[name], self.trackers[name], file, block, lo, hi, lineno, own)

        _walk_block(block, first, steady, next_hit, skip,
                    lambda lineno, text: self.server_log_line(stem, file, lineno, text))
        for at in logscan.stamped_lines(block, 0, end):
            if at is not None:
                _, body = gl.split_prefix(decode(block[at:block.index(b"\n", at)]))
                if body[:1] in STAMP_START:
                    self._stamp(body)

    def _skip_lines(self, s: Server, tracker: ServerTracker, file: str, block: bytes, lo: int, hi: int,
                    lineno: int, then_own: bool) -> None:
        """What block[lo:hi] (from line `lineno`) does to a steady server whose lines there hold
        nothing that changes it: it was seen, and its last line is the last of them (unless the
        server's own line read next, `then_own`, says so anyway)."""
        now = self.clock()
        if s.first_seen is None:
            s.first_seen = now
        s.last_seen = now
        s.log_file = file
        self.changes.servers.add(s.name)
        if then_own and not tracker.chained:
            return
        last = logscan.last_text_line(block, lo, hi)
        if last is not None:
            if not then_own:
                text = decode(block[last:block.index(b"\n", last)])
                pref, body = gl.split_prefix(text)
                s.last_line = body if pref is not None else text
                s.last_line_at = Evidence(file, lineno + block.count(b"\n", lo, last), text)
            if file not in tracker.stopping:
                tracker.chained = False      # none of them starts a chained traceback

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
        if body[:1] in STAMP_START:
            self._stamp(body)
        s = self.server(name)
        on_line(s, self.trackers[name], body, ev, self.clock())
        if s.port is not None and s.state == READY:
            self.state.port_owner[s.port] = name
        if s.ready_evidence is None:
            self._starting_signs(s, body, ev)
        self._output_signs(body, ev)
        if gl.REQUEST_RETRY in body and self._retrying(s.retrying, body, ev):
            self.changes.run = True
        if 'HTTP/1.1" ' in body:
            if ev.file not in self.access_sign_files:   # each file's first: the sign is the same in any order
                self.access_sign_files.add(ev.file)
                self._sign("server_access_log", ev)     # Gym 0.6 turned servers' access logs off
            if s.first_run is None and gl.RUN_ACCESS_RE.search(body):
                s.first_run = ev

    def _starting_signs(self, s: Server, body: str, ev: Evidence) -> None:
        """A starting server's lines: the venv-lock wait (Gym 0.7)."""
        if body.startswith("Waiting for virtual environment setup"):
            m = gl.VENV_LOCK_RE.match(body)
            if m:
                s.venv = s.venv or m.group(1)
                set_state(s, INSTALLING, self.clock(), lock_phase(self.state, s, m.group(1)))
                self.trackers[s.name].lock_wait = True
                self._sign("venv_lock", ev)

    def _output_signs(self, body: str, ev: Evidence) -> None:
        """Features of any server line that bound the Gym version. Not only while the server
        starts: with its stdout and stderr in two files, its ready line may be read before a
        startup line printed earlier, and the sign must not depend on that order."""
        if "nemo-gym==" in body and gl.GYM_PACKAGE_RE.match(body):
            self._sign("package", ev)
        elif _POOL_SIGN in body:
            self._sign("pool_capacity", ev)
        elif _ACCESS_OFF_SIGN in body:
            self._sign("access_log_off", ev)

    # --- processes and file activity ------------------------------------------------------
    def processes(self, parent: Optional[bool], collector: Optional[bool], parent_exit: Optional[int],
                  collector_exit: Optional[int], checked: bool) -> None:
        """What the process check found: True alive, False ended, None not seen (maybe elsewhere)."""
        p, c, a = self.state.parent, self.state.collector, self.state.activity
        if (p.alive, c.alive, p.exit_code, c.exit_code) != (parent, collector, parent_exit, collector_exit):
            self.changes.run = True
        p.alive, c.alive, p.exit_code, c.exit_code = parent, collector, parent_exit, collector_exit
        a.processes_checked = checked
        a.processes_seen = bool(parent or collector)

    def process_facts(self, live: dict[str, dict]) -> None:
        """psutil facts of the servers' processes (a launched run): those no longer running keep
        their last facts with alive=False."""
        for name, s in self.state.servers.items():
            facts = live.get(name)
            if facts is None and s.process and s.process.get("alive"):
                facts = {**s.process, "alive": False}
            if facts is not None and facts != s.process:
                s.process = facts
                self.changes.servers.add(name)

    def orphans(self, alive: dict[str, int]) -> None:
        """Servers whose process still runs although gym env start has ended (name -> pid)."""
        for name, s in self.state.servers.items():
            orphaned = name in alive
            if orphaned != s.orphaned:
                s.orphaned = orphaned
                if orphaned and s.state != FAILED:
                    s.phase = f"still running after Gym ended (pid {alive[name]}): an orphan holding its port"
                self.changes.servers.add(name)

    def file_activity(self, last_write: Optional[float], wall_now: float,
                      writes: Optional[dict[str, float]] = None, rows_write: Optional[float] = None) -> None:
        """The run's files' last writes (`writes`: each file's, by the name evidence gives it)."""
        a = self.state.activity
        was_quiet = a.quiet
        a.writes, a.rows_write = writes or {}, rows_write
        a.last_write = last_write
        a.quiet_for = None if last_write is None else max(0.0, wall_now - last_write)
        if a.quiet != was_quiet:
            self.changes.run = True

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
        """Any HTTP response from `GET /` proves a server is up (docs/gym-formats.md §3)."""
        s = self.server(name)
        s.http_ok = ok
        if ok and s.state not in (READY, FAILED):
            set_state(s, READY, self.clock(), "answering HTTP")
            if s.ready_at is None:
                s.ready_at = self.clock()

    # --- captured streams of gym processes -------------------------------------
    def stream_line(self, role: str, file: str, lineno: int, text: str) -> None:
        if gl.cannot_glue(text):      # (no list from unglue for the common case)
            self._stream_piece(role, file, lineno, text)
            return
        for piece in gl.unglue(text, self.state.servers.keys()):
            self._stream_piece(role, file, lineno, piece)

    def stream_block(self, role: str, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of a captured stream, whole (each ends with a newline, none holds a
        \r), with the effect of giving each to `stream_line`: while no line-by-line state is
        open, the lines up to the next that holds a keyword (core/streamscan.py), or a server's
        line that may change something, are skipped in C."""
        # (servers met in the block only make it read more lines one by one than it needs to)
        pattern = streamscan.hot_pattern(self._quiet_servers())
        _walk_block(block, first, lambda lineno: self._stream_steady(file, lineno),
                    lambda pos: logscan.next_line(pattern, block, pos, len(block)),
                    lambda lo, hi, lineno: self._quiet_lines(role, file, block, lo, hi, lineno),
                    lambda lineno, text: self.stream_line(role, file, lineno, text))

    def _stream_steady(self, file: str, lineno: int) -> bool:
        """No state that reads the next lines one by one is open: a banner's fields, the endpoint
        list, the line after `Examples left:`, the lines that go on a `gym` command's error."""
        c = self.state.collector
        return (self._banner is None and not self._endpoint_list and not self._examples_next
                and not (c.error is not None and c.traceback is None and c.error.file == file
                         and lineno == c.error.line + 1 + len(c.error_more)))

    def _quiet_servers(self) -> frozenset[str]:
        """Servers whose lines in a merged stream change nothing: known, and read from their own logs."""
        return frozenset(n for n in self.state.servers if gl.log_stem(n) in self.own_logs)

    def _quiet_lines(self, role: str, file: str, block: bytes, lo: int, hi: int, lineno: int) -> None:
        """What block[lo:hi] (lines from `lineno` holding no keyword, or a quiet server's) does:
        the stream was seen, its last line, its stamps (a server's line does none of it)."""
        for at in streamscan.stamped_starts(block, lo, hi):
            self._stamp(decode(block[at:block.index(b"\n", at)]))
        if role == VALIDATE or not streamscan.any_unprefixed(block, lo, hi):
            return
        last = streamscan.last_unprefixed_text(block, lo, hi)
        ev = None if last is None else \
            Evidence(file, lineno + block.count(b"\n", lo, last), decode(block[last:block.index(b"\n", last)]))
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
            if gl.log_stem(name) not in self.own_logs:
                self.fed_from_merged.add(gl.log_stem(name))
                self._server_text(name, body, ev)
            elif name not in self.state.servers:
                self.server(name)
            return
        if text[:1] in STAMP_START:
            self._stamp(text)
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
            self.server(m.group(1))
        elif gl.TIMEOUT_RE.search(text):
            p.timeout = ev
            self._sign("spinup_limit", ev)
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
            s = self.server(m.group(1))
            s.venv = m.group(2)
            kind = gl.server_kind(s.name, m.group(2))
            if kind != K_UNKNOWN:
                s.kind = kind
            if s.state == PENDING and not s.phase:
                s.phase = "launched, waiting for its first output"
            self._sign("launch_line", ev)
            for other in self.state.servers.values():    # a lock wait read before this line
                if self.trackers[other.name].lock_wait and same_venv(other.venv, s.venv):
                    other.phase = lock_phase(self.state, other, other.venv)
                    self.changes.servers.add(other.name)
            return True
        m = gl.VENV_LOCK_RE.search(text)
        if m:     # unprefixed: every server of that venv with no output of its own yet may be the one
            self._sign("venv_lock", ev)
            for s in self.state.servers.values():
                if same_venv(s.venv, m.group(1)) and s.state == PENDING and s.last_line_at is None:
                    s.phase = lock_phase(self.state, s, m.group(1))
                    self.changes.servers.add(s.name)
            return True
        if gl.SPINUP_RE.search(text):
            p.spinup = ev
            p.spinup_at = self.clock()
            return True
        if gl.HEAD_WAIT_RE.search(text) and "launch_line" not in self.state.gym_signs:
            self._sign("no_launch_line", ev)     # Gym 0.7 names each server's venv before this line
        return False

    def _endpoint_line(self, text: str, ev: Evidence) -> bool:
        """The model-endpoint wait after all servers are ready (Gym 0.5+)."""
        e = self.state.parent.endpoints
        m = gl.ENDPOINT_WAIT_RE.search(text)
        if m:
            e.waiting, e.waiting_at, e.urls = ev, self.clock(), gl.endpoint_urls(m.group(2))
            self._sign("endpoint_wait", ev)
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
            e.elapsed, e.elapsed_at = float(m.group(1)), self.clock()
            return True
        m = gl.ENDPOINT_OK_RE.search(text)
        if m:
            e.answered, e.elapsed, e.elapsed_at = ev, float(m.group(1)), self.clock()
            return True
        m = gl.ENDPOINT_FAILED_RE.search(text)
        if m:
            e.gave_up, e.limit = ev, float(m.group(2))
            self._endpoint_list = True
            self._sign("endpoint_wait", ev)
            return True
        m = gl.ENDPOINT_UNRESOLVED_RE.search(text)
        if m:
            e.unresolved.append(ev)
            return True
        return False

    def _endpoint_list_line(self, text: str, ev: Evidence) -> bool:
        """`  - http://host/v1 (from `key`)` lines under Gym's give-up line."""
        if not self._endpoint_list:
            return False
        stripped = text.strip()
        if stripped.startswith("- ") and "://" in stripped:
            # `- <url> (from `key`)`; rich wraps long lines, so the key may be on the next line
            words = stripped[2:].split()
            key = re.search(r"\(from `([^`]+)`\)", stripped)
            url = words[0] + (f" ({key.group(1)})" if key else "")
            e = self.state.parent.endpoints
            if url not in e.urls:
                e.urls.append(url)
            return True
        self._endpoint_list = False    # the list ends at the first other line (advice follows)
        return False

    def _stamp(self, text: str) -> None:
        """A line that may start with a timestamp: the run's first and last recorded times."""
        ts = line_stamp(text)
        if ts is not None:
            st = self.state
            if st.first_stamp is None or ts < st.first_stamp:
                st.first_stamp = ts
            if st.last_stamp is None or ts > st.last_stamp:
                st.last_stamp = ts

    def _sign(self, name: str, ev: Evidence) -> None:
        """A feature of the run's output that bounds its Gym version (gymversion.py). The
        first by file name and line is kept, so the basis reads the same whatever order the
        files were read in."""
        old = self.state.gym_signs.get(name)
        if old is None or (ev.file, ev.line) < (old.file, old.line):
            self.state.gym_signs[name] = ev

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
        if s.state in (PENDING, INSTALLING, STARTING):     # not one its own lines ended since
            set_state(s, READY, self.clock(), "ready")
            if s.ready_at is None:
                s.ready_at = self.clock()
        self.changes.servers.add(s.name)

    def _banner_line(self, text: str, ev: Evidence) -> bool:
        m = gl.BANNER_RE.match(text) if text[:1] == "[" else None
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

    @staticmethod
    def _retrying(records: dict[str, Retrying], text: str, ev: Evidence) -> bool:
        """A `[request_retry ...]` line: the latest word on connections to its URL (the first kept)."""
        m = gl.REQUEST_RETRY_RE.search(text)
        if m is None:
            return False
        url, error, retry, elapsed, failures = m.groups()
        old = records.get(url)
        records[url] = Retrying(url, error, int(retry), float(elapsed), int(failures) if failures else None,
                                old.first if old is not None else ev, ev)
        return True

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
        if gl.REQUEST_RETRY in text and self._retrying(c.retrying, text, ev):
            self.changes.run = True
        stripped = text.strip()
        if stripped and not stripped.startswith("Collecting rollouts:") and not stripped.startswith("Reading rows:"):
            c.last_lines[ev.file] = ev
        if self._examples_next:
            self._examples_next = False
            m = gl.EXAMPLES_LEFT_RE.match(stripped)
            if m:
                c.examples_left = int(m.group(2))
        if stripped.endswith("Examples left:"):
            self._examples_next = True
        if gl.COLLECT_DONE_RE.search(text):
            c.finished = True
            self.changes.run = True
        m = (_last(gl.PROGRESS_RE, text) if "Finished " in text else None) or \
            (_last(gl.TQDM_RE, text) if "Collecting rollouts:" in text else None)
        if m:
            done = (int(m.group(1)), int(m.group(2)))
            if c.progress is None or done[0] >= c.progress[0]:      # stdout's and stderr's counts,
                c.progress = done                                     # read in either order: the most
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
        elif "[rollout_" in text:
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
                attempts.observe_line(self._trial(key[:2]), Attempt(None, T_FAILED, None, "", "", status, ev,
                                                                    SRC_LINE, ev))
            return
        m = gl.DROPPED_RE.search(text)
        if m:
            key = gl.row_key(m.group(1))
            message = (m.group(3) or "").strip()
            code = re.match(r"(\d{3})\b", message)
            if key is not None:
                attempts.observe_line(self._trial(key[:2]), Attempt(None, T_FAILED, None, m.group(2), message,
                                                                    int(code.group(1)) if code else None, ev,
                                                                    SRC_LINE, ev))

    def _collector_signs(self, text: str, ev: Evidence) -> None:
        """Gym's health totals line, and features that bound the Gym version."""
        if "Rollout health:" in text:
            m = gl.HEALTH_LINE_RE.search(text)
            if m and not self.health_file_totals:
                _, healthy, unhealthy, unobserved = (int(x) for x in m.groups())
                self.state.health_totals = HealthTotals(healthy, unhealthy, unobserved, ev)
                self.changes.run = True
            self._sign("health_check", ev)
        elif "rollouts for `" in text and gl.FOUND_RE.search(text):
            self._sign("found_progress", ev)
        elif text.startswith("route_failures_to_sidecar is on"):
            self._sign("route_failures", ev)
        elif text.startswith("Per-task latency over"):
            self._sign("task_latency", ev)

    # --- rollouts files -----------------------------------------------------------
    def rollout_rows(self, file: str, first: int, rows: list[bytes]) -> None:
        """Rows `first`.. of a rollouts file (a run of lines: Tailer.read(rows=True))."""
        self.rollout_items(file, first, records.row_items(rows))

    def rollout_block(self, file: str, first: int, block: bytes) -> None:
        """Lines `first`.. of a rollouts file as one block of whole lines (Tailer.read(blocks=True)):
        decoded at once when every line is a row of the usual shape (records.block_items)."""
        self.rollout_items(file, first, records.block_items(block))

    def rollout_items(self, file: str, first: int, items: list) -> None:
        """Rows `first`.. of a rollouts file, each as its facts (records.rollout_tuple's tuple, or
        a list of them) or, when only the general code can read it, its raw bytes. A row of the
        usual shape for a trial with no failure yet is applied here directly (what `rollout_row`
        and `attempts.observe_row` do with it, without their objects: a 100k-row file is most
        of a report's time); any other goes through `rollout_row`."""
        state = self.state
        trials, agents, changed = state.trials, state.agent_names, self.changes.trials
        # The same object for the same agent name, reward and token count (a run has few): a
        # trial's values then share cache lines with the others', which halved the cache misses
        # of writing the JSON report in key order (~0.28 s -> ~0.2 s for 100k trials), and ~15 MB.
        # Zero rewards keep their own objects (0.0 == -0.0 would merge them).
        canon = self._canon
        if len(canon[0]) + len(canon[1]) + len(canon[2]) > CANON_MAX:
            canon = self._canon = ({}, {}, {})
        names, floats, ints = canon
        applied = False
        for lineno, f in enumerate(items, first):
            if type(f) is bytes:
                self.rollout_row(file, lineno, f)
                continue
            task, rollout, attempt, reward, inp, out, nr, agent = f
            key = (task, rollout)
            t = trials.get(key)
            if agent:
                agent = names.setdefault(agent, agent)
                if agent not in agents:
                    agents.add(agent)
            if reward:
                reward = floats.setdefault(reward, reward)
            if inp is not None:
                inp = ints.setdefault(inp, inp)
            if out is not None:
                out = ints.setdefault(out, out)
            status, kept, withheld = (T_NEVER_RAN, None, reward) if nr else (T_COMPLETED, reward, None)
            if t is None:       # a new trial, made whole in one call
                trials[key] = Trial(task, rollout, attempt, status, kept, withheld, inp, out, "", "", None, agent,
                                    Evidence(file, lineno), SRC_ROW)
            elif t.source >= SRC_FAILURE_ROW or t.line is not None:
                self._rollout_facts(file, lineno, records.RowFacts(*f))
                continue
            else:
                if agent:
                    t.agent = agent
                t.attempt_index, t.source, t.evidence, t.input_tokens, t.output_tokens = attempt, SRC_ROW, \
                    Evidence(file, lineno), inp, out
                t.failure_class, t.message, t.http_status, t.row_own = "", "", None, None
                t.status, t.reward, t.withheld_reward = status, kept, withheld
            changed.add(key)
            applied = True
        if applied:
            state.collector.started = True       # a row proves the collector ran
            self.changes.run = True

    def materialized_rows(self, file: str, first: int, rows: list[bytes]) -> None:
        """Rows `first`.. of the materialized inputs (a run of lines): each is an expected trial."""
        plain = records.rows_plain(rows)
        fast = records.materialized_key
        tasks: list[int] = []
        rollouts: list[int] = []
        odd: list[bytes] = []
        for raw in rows:
            key = fast(raw, plain) if plain else None
            if key is None:
                tasks.append(-1)
                rollouts.append(-1)
                odd.append(raw)
            else:
                tasks.append(key[0])
                rollouts.append(key[1])
        self.materialized_keys(file, first, (tasks, rollouts, odd))

    def materialized_keys(self, file: str, first: int, keys: tuple[list[int], list[int], list[bytes]]) -> None:
        """Materialized-input rows `first`.. as (task of each row, rollout of each row, the odd
        rows): a row of the usual shape by its key, any other (task -1) by its raw bytes, in the
        order they come (read the general way): from `materialized_rows`, or from the child
        process that read them (core/inputkeys.py)."""
        tasks, rollouts, odd = keys
        state = self.state
        at, raws = 0, iter(odd)
        for i in _odd_rows(tasks, len(odd)):
            self._expect(first + at, zip(tasks[at:i], rollouts[at:i]))
            self.materialized_row(file, first + i, next(raws))
            at = i + 1
        self._expect(first + at, zip(tasks[at:], rollouts[at:]) if at else zip(tasks, rollouts))
        n = len(tasks) - len(odd)
        if n:
            state.inputs_file = file
            state.collector.started = True
            state.expected_total = (state.expected_total or 0) + n
            self.changes.run = True

    def _expect(self, first: int, keys) -> None:
        """Expected trials by key, lines `first`..: made or marked (input_line: their line)."""
        trials, changed = self.state.trials, self.changes.trials
        for lineno, key in enumerate(keys, first):
            t = trials.get(key)
            if t is None:
                trials[key] = Trial(key[0], key[1], expected=True, input_line=lineno)
                changed.add(key)
            else:
                t.expected, t.input_line = True, lineno

    def rollout_row(self, file: str, lineno: int, raw: bytes, plain: bool = False) -> None:
        """One row; `plain`: its block passed records.block_plain."""
        facts = self._facts(records.rollout_facts, file, lineno, raw, plain)
        if facts is not None:
            self._rollout_facts(file, lineno, facts)

    def _rollout_facts(self, file: str, lineno: int, facts: records.RowFacts) -> None:
        if facts.agent and facts.agent not in self.state.agent_names:
            self.state.agent_names.add(facts.agent)
        key = self._key(facts, file, lineno)
        if key is None:
            return
        if facts.never_ran:
            status = T_NEVER_RAN
        else:
            status = T_FAILED if facts.failure_class else T_COMPLETED
        attempts.observe_row(self._trial(key), Attempt(facts.attempt, status, facts.reward, facts.failure_class,
                                                       facts.message, facts.http_status, Evidence(file, lineno),
                                                       SRC_ROW), facts)

    def failure_row(self, file: str, lineno: int, raw: bytes) -> None:
        facts = self._facts(records.failure_facts, file, lineno, raw)
        if facts is None:
            return
        key = self._key(facts, file, lineno)
        if key is None:
            return
        # A failure row that meets the never-ran rule counts as never-ran (docs/gym-formats.md).
        status = T_NEVER_RAN if facts.never_ran else T_FAILED
        attempts.observe_row(self._trial(key), Attempt(facts.attempt, status, None, facts.failure_class,
                                                       facts.message, facts.http_status, Evidence(file, lineno),
                                                       SRC_FAILURE_ROW), facts)

    def materialized_row(self, file: str, lineno: int, raw: bytes, plain: bool = False) -> None:
        facts = self._facts(records.materialized_facts, file, lineno, raw, plain)
        if facts is None:
            return
        if facts.task is None or facts.rollout is None:
            self._malformed(file, lineno, facts.problem or "no usable trial key")
            return
        state = self.state
        state.collector.started = True
        state.expected_total = (state.expected_total or 0) + 1
        key = (facts.task, facts.rollout)
        state.inputs_file = file
        t = state.trials.get(key)
        if t is None:
            state.trials[key] = Trial(facts.task, facts.rollout, expected=True, input_line=lineno)
            self.changes.trials.add(key)
        else:
            t.expected, t.input_line = True, lineno
        self.changes.run = True

    def verdict_row(self, file: str, lineno: int, raw: bytes) -> None:
        """A line of Gym's rollout_verdicts.jsonl: Gym's health verdict on one rollout."""
        try:
            key, gym = health.verdict_row(raw)
        except records.BadLine as exc:
            if raw.strip():
                self._malformed(file, lineno, str(exc))
            return
        gym.evidence = Evidence(file, lineno)
        self.state.health[key] = gym
        self._sign("health_check", gym.evidence)
        if key in self.state.trials:
            self.changes.trials.add(key)
        self.changes.run = True

    def health_summary(self, file: str, data: bytes) -> None:
        """quality_summary.json, read whole once it is complete: Gym's own totals."""
        try:
            totals = health.summary_totals(data)
        except records.BadLine as exc:
            self.file_error(file, str(exc))
            return
        totals.evidence = Evidence(file, 1)
        self.state.health_totals = totals
        self.health_file_totals = True
        self._sign("health_check", totals.evidence)
        self.changes.run = True

    def _facts(self, parse, file: str, lineno: int, raw: bytes, *plain: bool):
        try:
            return parse(raw, *plain)
        except records.BadLine as exc:
            if not raw.strip():
                return None   # a blank line is not a row
            self._malformed(file, lineno, str(exc))
            self.bad_rows[file] = lineno
            return None

    def cut_row(self, ev: Optional[Evidence]) -> None:
        """The rollouts file's last line when it is no whole row (the session tells: a partial line
        held back, or an unusable last line with no line end), else None."""
        c = self.state.collector
        if c.cut_row != ev:
            c.cut_row = ev
            self.changes.run = True

    def _key(self, facts: records.RowFacts, file: str, lineno: int) -> Optional[TrialKey]:
        if not self.state.collector.started:
            self.state.collector.started = True    # a row proves the collector ran
        if facts.task is None or facts.rollout is None:
            self.state.unattributed_records += 1
            self._malformed(file, lineno, facts.problem or "no usable _ng_task_index")
            return None
        if facts.problem:
            self._malformed(file, lineno, facts.problem)
        return facts.task, facts.rollout

    def _trial(self, key: TrialKey) -> Trial:
        t = self.state.trials.get(key)
        if t is None:
            t = self.state.trials[key] = Trial(key[0], key[1])
        self.changes.trials.add(key)
        self.changes.run = True
        return t

    def _malformed(self, file: str, lineno: int, reason: str) -> None:
        self.state.malformed_count += 1
        if len(self.state.malformed) < MAX_KEPT_MALFORMED:
            self.state.malformed.append(Malformed(file, lineno, reason))
        self.changes.run = True

    def unreadable(self, file: str, reason: str, rows: bool = False) -> None:
        """A file (or a directory: `file` ends with `/`) that could not be read, and why."""
        known = self.state.unreadable.get(file)
        if known is None or known.reason != reason:
            self.state.unreadable[file] = Unreadable(file, reason, rows)
            self.changes.run = True

    def readable(self, file: str) -> None:
        """A file read after all (its permissions were fixed): no longer unreadable."""
        if self.state.unreadable.pop(file, None) is not None:
            self.changes.run = True

    def file_error(self, file: str, reason: str) -> None:
        for m in self.state.malformed:
            if m.file == file and m.line == 0 and m.reason == reason:
                return
        self._malformed(file, 0, reason)


def _walk_block(block: bytes, first: int, steady: Callable[[int], bool], next_hit: Callable[[int], int],
                skip: Callable[[int, int, int], None], one: Callable[[int, str], None]) -> None:
    """The whole lines of `block` (numbered from `first`): while `steady(lineno)`, those before
    `next_hit(pos)` (the next line that can change something: the start of a line, or the block's
    end) go to `skip(lo, hi, lineno)` at once; every other line to `one(lineno, text)`. A hit
    found is kept while it is ahead: a search made in another state only finds more lines."""
    pos, lineno, end = 0, first, len(block)
    hit = -1
    while pos < end:
        if steady(lineno):
            if hit < pos:
                hit = next_hit(pos)
            if hit > pos:
                skip(pos, hit, lineno)
                lineno += block.count(b"\n", pos, hit)
                pos = hit
                if pos >= end:
                    return
        nl = block.index(b"\n", pos)
        one(lineno, decode(block[pos:nl]))
        pos, lineno = nl + 1, lineno + 1


def _odd_rows(tasks: list[int], n: int) -> Iterator[int]:
    """The positions of the `n` odd rows (task -1) of a materialized-inputs run, in order."""
    i = -1
    for _ in range(n):
        i = tasks.index(-1, i + 1)
        yield i


def _last(pattern, text: str):
    m = None
    for m in pattern.finditer(text):
        pass
    return m


def _steady(s: Server, tracker: ServerTracker) -> bool:
    """A server whose next lines change only its last line unless they hold a keyword of
    core/logscan.py: running (not installing: install lines are not keyed), outside an error block
    (whose continuation lines end it), not waiting on a venv lock, not right after uv's install
    summary (whose package list is followed line by line), not under a conclusion of settle
    (its next line takes it back), not ready by Gym's word only (its own install lines may
    follow)."""
    return (s.state not in (PENDING, INSTALLING) and not tracker.in_block and not tracker.lock_wait
            and (tracker.installed_at is None or tracker.after_install) and tracker.settled is None
            and not ready_by_gym_first(s))

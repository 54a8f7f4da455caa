"""A server's own lines: its log (`<logs>/<name>.log`), or its `(name) ` prefixed lines in Gym's
captured output (core/reducer/streams.py hands those over). One server's life from its lines is
core/servers.py's (`on_line()`); here: which server a line is, and what else it says (Gym
version signs, retried connections, an agent's first `/run`)."""

from __future__ import annotations

from typing import Callable

from .. import gymlines as gl
from .. import logscan
from ..model import INSTALLING, PENDING, READY, Evidence, Server
from ..servers import ServerTracker, lock_phase, on_line, ready_by_gym_first, set_state
from ..stamps import STAMP_START
from ..tail import decode
from .writer import Part, Writer, retrying

_POOL_SIGN, _ACCESS_OFF_SIGN = logscan.STEADY_KEYWORDS["VERSION_SIGNS"]


class ServerLines(Part):
    def __init__(self, w: Writer):
        super().__init__(w)
        self.own_logs: set[str] = set()          # servers read from their own log file
        self.fed_from_merged: set[str] = set()   # servers whose lines came from a merged stream
        self.access_sign_files: set[str] = set() # files whose first access-log line was seen

    def line(self, name: str, file: str, lineno: int, text: str) -> None:
        """A line of `<logs>/<name>.log`: it is that server's, prefixed or not."""
        pref, body = gl.split_prefix(text)
        if pref is not None and pref != name and (pref in self.state.servers or gl.log_stem(pref) == name):
            if gl.log_stem(pref) == name:
                self._rename(name, pref)
            name = pref   # the real name (slashes become `_` in file names), or a foreign line
        elif pref is None:
            name = self._owner_of_stem(name)
        self.text(name, body if pref is not None else text, Evidence(file, lineno, text))
        self.state.servers[name].log_file = file

    def block(self, stem: str, file: str, first: int, block: bytes) -> None:
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
                    lambda lineno, text: self.line(stem, file, lineno, text))
        for at in logscan.stamped_lines(block, 0, end):
            if at is not None:
                _, body = gl.split_prefix(decode(block[at:block.index(b"\n", at)]))
                if body[:1] in STAMP_START:
                    self.w.stamp(body)

    def _skip_lines(self, s: Server, tracker: ServerTracker, file: str, block: bytes, lo: int, hi: int,
                    lineno: int, then_own: bool) -> None:
        """What block[lo:hi] (from line `lineno`) does to a steady server whose lines there hold
        nothing that changes it: it was seen, and its last line is the last of them (unless the
        server's own line read next, `then_own`, says so anyway)."""
        now = self.w.clock()
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

    def text(self, name: str, body: str, ev: Evidence) -> None:
        if body[:1] in STAMP_START:
            self.w.stamp(body)
        s = self.w.server(name)
        on_line(s, self.trackers[name], body, ev, self.w.clock())
        if s.port is not None and s.state == READY:
            self.state.port_owner[s.port] = name
        if s.ready_evidence is None:
            self._starting_signs(s, body, ev)
        self._output_signs(body, ev)
        if gl.REQUEST_RETRY in body and retrying(s.retrying, body, ev):
            self.changes.run = True
        if 'HTTP/1.1" ' in body:
            if ev.file not in self.access_sign_files:   # each file's first: the sign is the same in any order
                self.access_sign_files.add(ev.file)
                self.w.sign("server_access_log", ev)     # Gym 0.6 turned servers' access logs off
            if s.first_run is None and gl.RUN_ACCESS_RE.search(body):
                s.first_run = ev

    def _starting_signs(self, s: Server, body: str, ev: Evidence) -> None:
        """A starting server's lines: the venv-lock wait (Gym 0.7)."""
        if body.startswith("Waiting for virtual environment setup"):
            m = gl.VENV_LOCK_RE.match(body)
            if m:
                s.venv = s.venv or m.group(1)
                set_state(s, INSTALLING, self.w.clock(), lock_phase(self.state, s, m.group(1)))
                self.trackers[s.name].lock_wait = True
                self.w.sign("venv_lock", ev)

    def _output_signs(self, body: str, ev: Evidence) -> None:
        """Features of any server line that bound the Gym version. Not only while the server
        starts: with its stdout and stderr in two files, its ready line may be read before a
        startup line printed earlier, and the sign must not depend on that order."""
        if "nemo-gym==" in body and gl.GYM_PACKAGE_RE.match(body):
            self.w.sign("package", ev)
        elif _POOL_SIGN in body:
            self.w.sign("pool_capacity", ev)
        elif _ACCESS_OFF_SIGN in body:
            self.w.sign("access_log_off", ev)



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

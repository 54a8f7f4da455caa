"""A server's own lines: its log (`<logs>/<name>.log`), or its `(name) ` prefixed lines in Gym's
captured output (core/reducer/streams.py hands those over). One server's life from its lines is
core/servers.py's (`on_line()`); here: which server a line is, and what else it says (Gym
version signs, retried connections, an agent's first `/run`)."""

from __future__ import annotations

from typing import Callable, Optional

from .. import fast, gymlines as gl
from ..fast import scan
from ..model import INSTALLING, PENDING, READY, Evidence, Server
from ..servers import INSTALLED, UP_TO_DATE, ServerTracker, lock_phase, on_line, ready_by_gym_first, set_state
from ..stamps import STAMP_START
from ..tail import decode
from .writer import Part, Writer, retrying

_DONE = {(access, run): frozenset(n for n, had in (("ACCESS_LINE", access), ("RUN_ACCESS_RE", run)) if had)
         for access in (False, True) for run in (False, True)}


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
        """Lines `first`.. of `<logs>/<stem>.log` (whole lines, each ending with a newline, none
        holding a \r): as if each went to `line`."""
        if fast.enabled("scan"):
            scan.server_block(self, stem, file, first, block)
            return
        for lineno, raw in enumerate(block.split(b"\n")[:-1], first):
            self.line(stem, file, lineno, decode(raw))

    # --- for the block search (core/fast/scan.py) -----------------------------------------------
    def owner(self, stem: str) -> str:
        """The server `<logs>/<stem>.log` belongs to."""
        return self._owner_of_stem(stem)

    def steady(self, stem: str) -> bool:
        """The next lines of `<logs>/<stem>.log` can change only its server's last line unless
        they hold a word of gymlines.SERVER's steady entries."""
        name = self._owner_of_stem(stem)
        s, tracker = self.state.servers.get(name), self.trackers.get(name)
        return s is not None and tracker is not None and _steady(s, tracker)

    def done(self, name: str, file: str) -> frozenset[str]:
        """The `once` entries of gymlines.SERVER whose line this file (its first access-log line)
        or this server (its first `/run`) has had."""
        s = self.state.servers.get(name)
        return _DONE[file in self.access_sign_files, s is not None and s.first_run is not None]

    def quiet(self, name: str, file: str, then_own: bool, last: Callable[[], Optional[tuple[int, str]]]) -> None:
        """Lines of a steady server that hold nothing that changes it: it was seen, and its last
        line is the last of them that holds text (`last()`: its number and text), unless the
        server's own line read next (`then_own`) says so anyway."""
        s, tracker = self.state.servers[name], self.trackers[name]
        now = self.w.clock()
        if s.first_seen is None:
            s.first_seen = now
        s.last_seen = now
        s.log_file = file
        self.changes.servers.add(s.name)
        if then_own and not tracker.chained:
            return
        found = last()
        if found is not None:
            if not then_own:
                lineno, text = found
                pref, body = gl.split_prefix(text)
                s.last_line = body if pref is not None else text
                s.last_line_at = Evidence(file, lineno, text)
            if file not in tracker.stopping:
                tracker.chained = False      # none of them starts a chained traceback

    def stamp(self, text: str) -> None:
        if text[:1] in STAMP_START:
            self.w.stamp(text)

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
        if gl.ACCESS_LINE[0] in body:
            if ev.file not in self.access_sign_files:   # each file's first: the sign is the same in any order
                self.access_sign_files.add(ev.file)
                self.w.sign("server_access_log", ev)     # Gym 0.6 turned servers' access logs off
            if s.first_run is None and gl.RUN_ACCESS_RE.search(body):
                s.first_run = ev

    def _starting_signs(self, s: Server, body: str, ev: Evidence) -> None:
        """A starting server's lines: the venv-lock wait (Gym 0.7)."""
        m = gl.VENV_LOCK_RE.match(body) if body[:1] == "W" else None
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
        elif gl.POOL_SIGN in body:
            self.w.sign("pool_capacity", ev)
        elif gl.ACCESS_OFF_SIGN in body:
            self.w.sign("access_log_off", ev)



def _steady(s: Server, tracker: ServerTracker) -> bool:
    """A server whose next lines change only its last line unless they hold a word of
    gymlines.SERVER's steady entries: running and past its venv's build (uv's lines act until its
    own start: they are no steady entries), outside an error block (whose continuation lines end
    it), not waiting on a venv lock, not right after uv's install summary (whose package list is
    followed line by line), not under a conclusion of settle (its next line takes it back), not
    ready by Gym's word only (its own install lines may follow)."""
    return (s.state not in (PENDING, INSTALLING) and not s.phase.startswith((INSTALLED, UP_TO_DATE))
            and not tracker.in_block and not tracker.lock_wait
            and (tracker.installed_at is None or tracker.after_install) and tracker.settled is None
            and not ready_by_gym_first(s))

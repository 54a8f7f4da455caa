"""One server's life from its own output lines: installing -> starting -> ready -> exited/failed."""

from __future__ import annotations

from . import gymlines as gl
from .markers import find_marker
from .model import EXITED, FAILED, INSTALLING, PENDING, READY, STARTING, Evidence, Server

MAX_KEPT_ERRORS = 20
# Lines that continue an error block: indented traceback frames, uv's `cause:` lines, chained exceptions.
_CONTINUATION = ("  ", "\t", "The above exception", "During handling of the above exception")


class ServerTracker:
    """Per-server reducer state that views do not need (error-block bookkeeping)."""

    __slots__ = ("in_block", "block_start", "block_exception", "last_error_block", "guessed")

    def __init__(self) -> None:
        self.in_block = False
        self.block_start: Evidence | None = None
        self.block_exception: Evidence | None = None
        self.last_error_block: tuple[Evidence, Evidence | None] | None = None
        self.guessed = False        # failed with no error block of its own read yet


def set_state(server: Server, state: str, now: float | None, phase: str = "") -> None:
    if server.state != state:
        server.state = state
        server.state_since = now
    if phase:
        server.phase = phase


def _restart(server: Server, tracker: ServerTracker) -> None:
    """A new start of the same server (a reused, appended log): forget the previous life."""
    server.error_count = 0
    server.errors.clear()
    server.failure = None
    server.failure_reason = ""
    server.ready_evidence = None
    server.ready_at = None
    server.silent_death = False
    server.reported_ready_by_gym = False
    tracker.__init__()


def on_line(server: Server, tracker: ServerTracker, text: str, ev: Evidence, now: float | None) -> None:
    """Apply one line the server printed (its `(name) ` prefix already removed)."""
    if server.first_seen is None:
        server.first_seen = now
    server.last_seen = now
    if not text.strip():
        return
    server.last_line = text
    server.last_line_at = ev
    if gl.VENV_RE.search(text):
        if _lived(server, tracker):
            _restart(server, tracker)
        if server.kind == "unknown":
            server.kind = gl.server_kind(server.name, text)
        set_state(server, INSTALLING, now, "creating venv")
    else:
        _lifecycle(server, text, ev, now)
    _errors(server, tracker, text, ev, now)


def _lived(server: Server, tracker: ServerTracker) -> bool:
    """Its own output already showed a whole life (it served, or its own error ended it): a
    venv being created again is a new start. Ready or dead only by Gym's word is not enough:
    Gym's output may simply have been read before the server's own."""
    own_failure = server.state == FAILED and server.failure is not None and not tracker.guessed
    return server.state in (READY, EXITED, FAILED) and (server.ready_evidence is not None or own_failure)


def _lifecycle(server: Server, text: str, ev: Evidence, now: float | None) -> None:
    """A line that is not a venv's creation. Install lines only count before the server
    starts (a served request may well print "Installed"), so they are not even searched for
    after: a long log is mostly a ready server's request lines."""
    if server.state in (PENDING, INSTALLING) and _install_line(server, text, now):
        return
    m = gl.UVICORN_RE.search(text)
    if m:
        server.url, server.host, server.port = m.group(1), m.group(2), int(m.group(3))
        server.ready_evidence = ev
        if server.ready_at is None:
            server.ready_at = now
        set_state(server, READY, now, "ready")
        return
    if gl.STARTING_RE.search(text):
        pid = gl.SERVER_PID_RE.search(text)
        if pid:        # the server process itself (Gym's banner and head name its bash wrapper)
            server.pid = int(pid.group(1))
        if server.state in (PENDING, INSTALLING, STARTING):
            set_state(server, STARTING, now, "starting")
        return
    if gl.SHUTDOWN_RE.search(text):
        if server.state == READY or server.ready_evidence is not None:
            set_state(server, EXITED, now, "exited")
        elif server.error_count:
            set_state(server, FAILED, now, "failed")
        else:
            set_state(server, EXITED, now, "exited before ready")


def _install_line(server: Server, text: str, now: float | None) -> bool:
    m = gl.RESOLVED_RE.search(text)
    if m:
        server.packages = int(m.group(1))
        set_state(server, INSTALLING, now, f"installing venv: {server.packages} packages")
        return True
    m = gl.INSTALLED_RE.search(text)
    if m:
        server.packages = int(m.group(1))
        set_state(server, INSTALLING, now, f"installed {server.packages} packages")
        return True
    m = gl.CHECKED_RE.search(text)
    if m:
        server.packages = server.packages or int(m.group(1))
        set_state(server, INSTALLING, now, f"venv up to date: {m.group(1)} packages")
        return True
    if gl.INSTALL_RE.search(text):
        set_state(server, INSTALLING, now, server.phase or "installing venv")
        return True
    return False


def _errors(server: Server, tracker: ServerTracker, text: str, ev: Evidence, now: float | None) -> None:
    marker = find_marker(text)
    if marker is None:
        if tracker.in_block and not text.startswith(_CONTINUATION) and not gl.EXC_LINE_RE.match(text):
            tracker.in_block = False
        elif tracker.in_block and gl.EXC_LINE_RE.match(text):
            tracker.block_exception = ev
            tracker.last_error_block = (tracker.block_start, ev)
        return
    server.error_count += 1
    if len(server.errors) < MAX_KEPT_ERRORS:
        server.errors.append(ev)
    if not tracker.in_block:
        tracker.in_block = True
        tracker.block_start = ev
        tracker.block_exception = None
    if gl.EXC_LINE_RE.match(text.strip()):
        tracker.block_exception = ev
    tracker.last_error_block = (tracker.block_start, tracker.block_exception)
    # An error before the server is up explains why it is not up; also when Gym reported the
    # server dead before its own error lines were read (the files are tailed separately).
    if server.state != READY and server.ready_evidence is None and (server.state != FAILED or tracker.guessed):
        server.failure = tracker.block_start
        server.failure_reason = _reason(tracker)
        server.silent_death = tracker.guessed = False
        if marker == "uv_error":
            # uv's `error:` ends the venv build, and with it the server's start command.
            set_state(server, FAILED, now, "venv build failed")


def _reason(tracker: ServerTracker) -> str:
    best = tracker.block_exception or tracker.block_start
    return _body(best) if best else ""


def _body(ev: Evidence) -> str:
    return gl.split_prefix(ev.text)[1].strip()


def fail(server: Server, tracker: ServerTracker, now: float | None, why: str) -> None:
    """Mark a server failed, pointing at the last error block of its own output.

    With no error text at all and output ending right after `Installed N packages`,
    it is the silent death of GYM_REFERENCE §3 (pipefail + `grep -v` on a cold venv build).
    """
    if server.state == FAILED and server.failure is not None:
        return
    block = tracker.last_error_block
    tracker.guessed = block is None
    if block is not None:
        server.failure = block[0]
        server.failure_reason = _body(block[1] or block[0])
    elif server.last_line_at is not None and gl.INSTALLED_RE.search(server.last_line):
        server.silent_death = True
        server.failure = server.last_line_at
        server.failure_reason = (
            f"died silently right after `{server.last_line.strip()}`: the Gym 0.4-0.5 pipefail bug with "
            "+nemo_gym_log_dir on a cold venv build (the install pipeline's `grep -v` exits 1); "
            "rerun without +nemo_gym_log_dir, or build the venvs once without it")
    else:
        server.failure = server.last_line_at
        server.failure_reason = why
    set_state(server, FAILED, now, "failed")

"""One server's life from its own output lines: installing -> starting -> ready -> exited/failed."""

from __future__ import annotations

from . import gymlines as gl, upstream
from .markers import find_marker
from .model import (
    EXITED,
    FAILED,
    INSTALLING,
    K_UNKNOWN,
    PENDING,
    READY,
    S_FAILED,
    S_INSTALL,
    S_LOCK,
    S_READY,
    S_START,
    S_STOPPED,
    S_VENV,
    STARTING,
    Evidence,
    RunState,
    Server,
    StepMark,
)

MAX_KEPT_ERRORS = 20
INSTALLED = "installed"     # the phase after uv's `Installed N packages`
UP_TO_DATE = "venv up to date"      # the phase after a warm venv's `Checked N packages`
CREATING_VENV = "creating venv"     # the phase after Gym's `uv venv` line
WAITING_FOR = "waiting for "        # the phase of a server waiting on a shared venv's setup lock (lock_phase)
# Lines that continue an error block: indented traceback frames, uv's `cause:` lines, chained exceptions.
_CHAINED = gl.CHAINED
_CONTINUATION = ("  ", "\t") + _CHAINED


class ServerTracker:
    """Per-server reducer state that views do not need (error-block bookkeeping)."""

    __slots__ = ("in_block", "block_start", "block_exception", "last_error_block", "guessed",
                 "installed_at", "after_install", "lock_wait", "stopping", "before_block", "chained", "settled",
                 "upstream_failed")

    def __init__(self) -> None:
        self.in_block = False
        self.block_start: Evidence | None = None
        self.block_exception: Evidence | None = None
        self.last_error_block: tuple[Evidence, Evidence | None] | None = None
        self.guessed = False        # failed with no error block of its own read yet
        self.installed_at: Evidence | None = None   # uv's `Installed N packages` (or `Checked N packages`: warm)
        self.after_install = False  # a line other than uv's package list came after it
        self.lock_wait = False      # its last word: waiting for a shared venv's setup lock (Gym 0.7)
        # the files in which it said it is shutting down: tracebacks later in them are noise (only
        # in them: a server's stdout and stderr are separate files, read in either order)
        self.stopping: set[str] = set()
        self.before_block: tuple | None = None   # what the current error block changed, to undo it
        self.chained = False        # the last line chains the next traceback to this one
        self.settled: tuple | None = None   # the server as its lines left it, before settle's conclusions
        self.upstream_failed = False  # its last line was `[upstream_request_failed]`: the answer comes next

    @property
    def ended_at_install(self) -> bool:
        """Its output so far ends with uv's install summary and package list."""
        return self.installed_at is not None and not self.after_install


def set_state(server: Server, state: str, now: float | None, phase: str = "") -> None:
    if server.state != state:
        server.state = state
        server.state_since = now
    if phase:
        server.phase = phase
    _mark(server, now)


def set_phase(server: Server, phase: str, now: float | None) -> None:
    """New words for what the server does, in the state it is in."""
    server.phase = phase
    _mark(server, now)


def _mark(server: Server, now: float | None) -> None:
    """A step entered (its timeline's next mark)."""
    step = step_of(server.state, server.phase)
    if step and (not server.steps or server.steps[-1].step != step):
        server.steps.append(StepMark(step, now))


def step_of(state: str, phase: str) -> str:
    """The startup step (model.S_*) a server's state and phase words say it is in ('' while pending
    with nothing known)."""
    if state in (PENDING, INSTALLING) and phase.startswith(WAITING_FOR):
        return S_LOCK      # (pending: Gym's unprefixed lock line named its venv, no line of its own yet)
    if state == INSTALLING:
        return S_VENV if phase == CREATING_VENV else S_INSTALL
    return _STEP_OF_STATE.get(state, "")


_STEP_OF_STATE = {STARTING: S_START, READY: S_READY, FAILED: S_FAILED, EXITED: S_STOPPED}


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
    server.shut_down = None
    server.answers.clear()
    server.steps.clear()
    tracker.__init__()  # type: ignore[misc]


def on_line(server: Server, tracker: ServerTracker, text: str, ev: Evidence, now: float | None) -> None:
    """Apply one line the server printed (its `(name) ` prefix already removed)."""
    lift(server, tracker)
    if server.first_seen is None:
        server.first_seen = now
    server.last_seen = now
    if not text.strip():
        return
    server.last_line = text
    server.last_line_at = ev
    tracker.lock_wait = False
    if gl.VENV_RE.search(text):
        if _lived(server, tracker):
            _restart(server, tracker)
        venv = gl.VENV_PATH_RE.search(text)
        if venv:
            server.venv = server.venv or venv.group(1)
        if server.kind == K_UNKNOWN:
            server.kind = gl.server_kind(server.name, text)
        if not ready_by_gym_first(server):
            set_state(server, INSTALLING, now, CREATING_VENV)
    else:
        _lifecycle(server, text, ev, now)
    if tracker.installed_at is None or tracker.after_install:
        if server.ready_evidence is None and (server.phase.startswith(INSTALLED) and gl.INSTALLED_RE.search(text)
                                              or server.phase.startswith(UP_TO_DATE) and gl.CHECKED_RE.search(text)):
            tracker.installed_at, tracker.after_install = ev, False
    elif not gl.PACKAGE_LINE_RE.match(text):
        tracker.after_install = True
    _errors(server, tracker, text, ev, now)


def lock_phase(state: RunState, server: Server, venv: str | None) -> str:
    """Gym 0.7 sets up a venv shared by several servers once, under a lock: the others wait."""
    others = sorted(s.name for s in state.servers.values() if same_venv(s.venv, venv) and s is not server)
    return f"{WAITING_FOR}{' / '.join(others)}'s venv setup" if others else f"{WAITING_FOR}its venv's setup lock"


def same_venv(a: str | None, b: str | None) -> bool:
    """Gym prints a venv's path as configured in one line and resolved in another: compare the
    last three parts (`<server type>/<name>/.venv`)."""
    return a is not None and b is not None and a.rstrip("/").split("/")[-3:] == b.rstrip("/").split("/")[-3:]


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
    if (server.state in (PENDING, INSTALLING) or server.phase.startswith(INSTALLED)) and _install_line(server, text, now):
        return
    if ready_by_gym_first(server) and _install_line(server, text, now, move=False):
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
    elif server.state == PENDING:
        set_state(server, STARTING, now, "starting")     # its own output: its process runs


def ready_by_gym_first(server: Server) -> bool:
    """Gym said the server is ready before its own output did (Gym's output was read first):
    its own venv and install lines still tell what they tell, but do not move it back."""
    return server.reported_ready_by_gym and server.ready_evidence is None and server.state == READY


def _install_line(server: Server, text: str, now: float | None, move: bool = True) -> bool:
    """uv's lines while a venv is built. `move`: they set the server's state and phase (else
    only its package count)."""
    m = gl.RESOLVED_RE.search(text)
    if m:
        server.packages = int(m.group(1))
        if move:
            set_state(server, INSTALLING, now, f"installing venv: {server.packages} packages")
        return True
    m = gl.INSTALLED_RE.search(text)
    if m:
        # uv is done (its package list follows): the server's own start comes next, and a
        # Python server can take half a minute of imports before it prints anything
        server.packages = int(m.group(1))
        if move:
            set_state(server, STARTING, now, f"{INSTALLED} {server.packages} packages; starting")
        return True
    if server.phase.startswith(INSTALLED) and gl.PACKAGE_LINE_RE.match(text):
        return True     # uv's list of what it installed
    m = gl.CHECKED_RE.search(text)
    if m:
        server.packages = server.packages or int(m.group(1))
        if move:
            set_state(server, INSTALLING, now, f"{UP_TO_DATE}: {m.group(1)} packages")
        return True
    if gl.INSTALL_RE.search(text):
        if move:
            set_state(server, INSTALLING, now, server.phase or "installing venv")
        return True
    return False


def _errors(server: Server, tracker: ServerTracker, text: str, ev: Evidence, now: float | None) -> None:
    if ev.file in tracker.stopping:
        return      # tracebacks of a server that is shutting down say nothing about the run
    if gl.STOPPING_RE.search(text):
        tracker.stopping.add(ev.file)
        server.shut_down = server.shut_down or ev
        tracker.in_block = False
        return
    marker = find_marker(text)
    if tracker.upstream_failed and marker is None and upstream.is_answer_line(text) and len(server.answers) < MAX_KEPT_ERRORS:
        server.answers.append(ev)
    tracker.upstream_failed = marker == "upstream_failed"
    if marker == "traceback" and tracker.in_block and not tracker.chained:
        tracker.in_block = False          # a new traceback, not one chained to the last
    tracker.chained = text.startswith(_CHAINED)
    if marker is None:
        if tracker.in_block and gl.SHUTDOWN_EXC_RE.match(text.strip()):
            _undo_block(server, tracker)      # a KeyboardInterrupt / CancelledError: shutdown noise
        elif tracker.in_block and not text.startswith(_CONTINUATION) and not gl.EXC_LINE_RE.match(text):
            tracker.in_block = False
        elif tracker.in_block and gl.EXC_LINE_RE.match(text):
            tracker.block_exception = ev
            tracker.last_error_block = (tracker.block_start or ev, ev)
        return
    if not tracker.in_block:
        tracker.before_block = (server.error_count, len(server.errors), tracker.last_error_block,
                                server.failure, server.failure_reason)
    server.error_count += 1
    if len(server.errors) < MAX_KEPT_ERRORS:
        server.errors.append(ev)
    if not tracker.in_block:
        tracker.in_block = True
        tracker.block_start = ev
        tracker.block_exception = None
    if gl.EXC_LINE_RE.match(text.strip()):
        tracker.block_exception = ev
    tracker.last_error_block = (tracker.block_start or ev, tracker.block_exception)
    # An error before the server is up explains why it is not up; also when Gym reported the
    # server dead before its own error lines were read (the files are tailed separately).
    if server.state != READY and server.ready_evidence is None and (server.state != FAILED or tracker.guessed):
        server.failure = tracker.block_start
        server.failure_reason = _reason(tracker)
        server.silent_death = tracker.guessed = False
        if marker == "uv_error":
            # uv's `error:` ends the venv build, and with it the server's start command.
            set_state(server, FAILED, now, "venv build failed")


def _undo_block(server: Server, tracker: ServerTracker) -> None:
    """Forget an error block that turned out to be a shutdown's (it ends in KeyboardInterrupt,
    CancelledError or SystemExit): it is not an error of the server."""
    count, kept, block, failure, reason = tracker.before_block or (server.error_count, len(server.errors),
                                                                   tracker.last_error_block, server.failure,
                                                                   server.failure_reason)
    server.error_count = count
    del server.errors[kept:]
    tracker.last_error_block, server.failure, server.failure_reason = block, failure, reason
    tracker.in_block = False


def _reason(tracker: ServerTracker) -> str:
    best = tracker.block_exception or tracker.block_start
    return _body(best) if best else ""


def _body(ev: Evidence) -> str:
    return gl.split_prefix(ev.text)[1].strip()


def fail(server: Server, tracker: ServerTracker, now: float | None, why: str, timed_out: bool = False,
         told: Evidence | None = None) -> None:
    """Mark a server failed, pointing at the last error block of its own output.

    With no error text at all and its own log (`+nemo_gym_log_dir`) ending right after uv's install
    step (`Installed N packages` and its list, or a warm venv's `Checked N packages`), it is the
    silent death of the install step under that flag (Gym 0.4-0.6: the install pipeline's `grep -v`
    exits 1 under pipefail; docs/gym-formats.md). `timed_out`: the server was still running when
    Gym's spin-up limit ran out, so `why` says what it was doing and the evidence is its last line
    (or its last error). `told`: the line of Gym's that named it dead, the evidence for a server
    that died after it was ready without a word of its own.
    """
    if server.state == FAILED and server.failure is not None:
        return
    block = tracker.last_error_block
    tracker.guessed = block is None
    if block is not None:
        server.failure = block[0]
        body = _body(block[1] or block[0])
        server.failure_reason = f"{why}; its last error: {body}" if timed_out else body
    elif not timed_out and tracker.ended_at_install and server.log_file is not None:
        # (the bug needs +nemo_gym_log_dir, which gives the server its own log: without one, the
        # install step ran without pipefail and its end says nothing of why it stopped)
        server.silent_death = True
        server.failure = tracker.installed_at
        assert tracker.installed_at is not None   # ended_at_install says so
        installed = _body(tracker.installed_at)
        server.failure_reason = (
            f"died without an error message right after its venv install (`{installed}`): a known Gym "
            "0.4-0.6 bug (with +nemo_gym_log_dir set, the install step runs under pipefail and exits 1 "
            "although uv succeeded); rerun without +nemo_gym_log_dir, or with +skip_venv_if_present=true "
            "once the venvs exist")
    elif told is not None and server.became_ready:
        server.failure = told
        server.failure_reason = f"died after it was ready, without an error of its own (killed? out of memory?); {why}"
    else:
        server.failure = server.last_line_at
        server.failure_reason = why
    set_state(server, FAILED, now, "failed")



def hold(server: Server, tracker: ServerTracker) -> None:
    """Before settle draws a conclusion about the server: keep it as its lines left it."""
    if tracker.settled is None:
        tracker.settled = (server.state, server.state_since, server.phase, server.failure,
                           server.failure_reason, server.silent_death, tracker.guessed, len(server.steps))


def lift(server: Server, tracker: ServerTracker) -> None:
    """Take settle's conclusions back (the next settle draws them again): before the server's
    next line, which Gym's words, read first, must not change the meaning of."""
    if tracker.settled is not None:
        (server.state, server.state_since, server.phase, server.failure, server.failure_reason,
         server.silent_death, tracker.guessed, steps) = tracker.settled
        del server.steps[steps:]
        tracker.settled = None

"""`gymwatch stop DIR`: SIGTERM to the gym processes, a grace period, SIGKILL to their process
groups, then a sweep of every process whose environment carries the run's marker (Ray's
gcs_server/raylet leave the group), or that is in one of the run's sessions with no marker shown
(a process that retitles itself can zero its /proc/PID/environ). Reports what it stopped and how
many are left (zero)."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import psutil

from ..core.layout import EVAL
from ..core.procs import env_value, pid_alive
from . import manifest as mf
from .spawn import MARKER_VAR

DEFAULT_GRACE = 20.0
SWEEP_GRACE = 3.0
QUIET = 2.0          # seconds without a marked process before stop says how many are left
SWEEP_LIMIT = 30.0   # seconds of sweeping at most


@dataclass
class StopResult:
    run_id: str
    stopped: list[str] = field(default_factory=list)   # "name (pid N): how"
    left: list[psutil.Process] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.left


def marked(run_id: str, exclude: Optional[set[int]] = None,
           sessions: Optional[set[int]] = None) -> list[psutil.Process]:
    """Live processes whose environment has GYMWATCH_RUN_ID=<run_id>; with `sessions` (the run's,
    from run_sessions), also those in one of them that show no marker at all: setproctitle
    (Ray's ray::DashboardAgent, ray-dashboard-*Head) zeroes /proc/PID/environ. A session no
    process is in any more is dropped from `sessions`: it can get no new member, and its
    number can then be reused."""
    exclude = exclude or set()
    seen: set[int] = set()
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            sid = os.getsid(p.pid) if sessions else None
            if sid in (sessions or ()):
                seen.add(sid)
            if p.pid in exclude:
                continue
            value = env_value(p, MARKER_VAR)
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if value == run_id or (value is None and sid in (sessions or ())):
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    if sessions:
        sessions &= seen
    return out


def run_sessions(data: dict, procs: list[psutil.Process]) -> set[int]:
    """The sessions the launcher started (each gym wrapper and the driver leads its own) that a
    marked process is in now: every process in them is the run's, marker shown or not."""
    leaders = {e.get("pgid") for e in data.get("processes") or [] if isinstance(e, dict)}
    leaders.add((data.get("driver") or {}).get("pid"))
    out = set()
    for p in procs:
        try:
            sid = os.getsid(p.pid)
        except OSError:
            continue
        if isinstance(sid, int) and sid > 1 and sid in leaders:
            out.add(sid)
    return out


def _me_and_ancestors() -> set[int]:
    out = {os.getpid()}
    try:
        out |= {p.pid for p in psutil.Process().parents()}
    except psutil.Error:
        pass
    return out


def _label(p: psutil.Process) -> str:
    try:
        cmd = p.cmdline()
        name = " ".join(os.path.basename(c) if i == 0 else c for i, c in enumerate(cmd[:3])) or p.name()
    except psutil.Error:
        name = "?"
    return f"{name[:60]} (pid {p.pid})"


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return [p for p in alive if _running(p)]


def stop_run(run_dir: Path, grace: float = DEFAULT_GRACE, say: Callable[[str], None] = print) -> StopResult:
    data = mf.load(run_dir)
    run_id = str(data["run_id"])
    res = StopResult(run_id)
    exclude = _me_and_ancestors()
    sessions = run_sessions(data, marked(run_id, exclude))
    before = marked(run_id, exclude, sessions)
    say(f"stopping run {run_id}: {len(before)} process(es) with {MARKER_VAR}={run_id} running")
    entries = [p for p in data.get("processes") or [] if isinstance(p, dict) and isinstance(p.get("pid"), int)]
    entries.sort(key=lambda e: e.get("role") != EVAL)   # the collector first, then the servers' parent
    termed = []
    for e in entries:
        if not pid_alive(e["pid"], e.get("create_time")):
            continue
        proc = psutil.Process(e["pid"])
        label = _label(proc)
        say(f"  SIGTERM {label}")
        try:
            proc.send_signal(signal.SIGTERM)
            termed.append((proc, label))
        except psutil.Error:
            pass
    if termed:
        t0 = time.monotonic()
        left = _wait_gone([p for p, _ in termed], grace)
        for p, label in termed:
            if p in left:
                say(f"  {label} still running after {grace:.0f}s")
            else:
                res.stopped.append(f"{label}: exited on SIGTERM")
        if not left:
            say(f"  gym exited after {time.monotonic() - t0:.1f}s")
    _wait_wrappers(entries)
    for e in entries:
        _kill_group(e.get("pgid"), run_id, exclude, res, say, sessions)
    res.left = _sweep_until_quiet(run_id, exclude, res, say, sessions=sessions)
    _record(run_dir, res)
    n = len(res.stopped)
    say(f"stopped {n} process{'es' if n != 1 else ''} directly ({len(before)} were running; gym shut down "
        f"the rest); {len(res.left)} left with {MARKER_VAR}={run_id}")
    for p in res.left:
        say(f"  still running: {_label(p)}")
    return res


def _wait_wrappers(entries: list[dict], timeout: float = 3.0) -> None:
    """Let each status wrapper record its gym's exit code before the group is killed."""
    procs = []
    for e in entries:
        try:
            w = psutil.Process(int(e.get("wrapper_pid") or 0))
            if env_value(w, MARKER_VAR) and not pid_alive(e["pid"], e.get("create_time")):
                procs.append(w)
        except (psutil.Error, ValueError, OSError):
            continue
    if procs:
        psutil.wait_procs(procs, timeout=timeout)


def _kill_group(pgid, run_id: str, exclude: set[int], res: StopResult, say,
                sessions: Optional[set[int]] = None) -> None:
    if not isinstance(pgid, int) or pgid <= 1:
        return
    members = []
    for p in marked(run_id, exclude, sessions):
        try:
            if os.getpgid(p.pid) == pgid:
                members.append(p)
        except OSError:
            continue
    if not members:   # nothing of this run is left in the group (or the pgid was reused): leave it
        return
    labels = [_label(p) for p in members]
    say(f"  SIGKILL process group {pgid}: {len(members)} process(es)")
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        return
    _wait_gone(members, 5.0)
    res.stopped += [f"{lb}: killed with its process group" for lb in labels]


def _sweep_until_quiet(run_id: str, exclude: set[int], res: StopResult, say,
                       quiet: float = QUIET, limit: float = SWEEP_LIMIT,
                       sessions: Optional[set[int]] = None) -> list[psutil.Process]:
    """Sweep until no marked process has been seen for `quiet` seconds: Ray's raylet starts its
    agents (ray::DashboardAgent, ray::RuntimeEnvAgent) late, and one can appear after a sweep
    that found nothing, so a single look would say "0 left" with two still running."""
    deadline = time.monotonic() + limit
    quiet_since = time.monotonic()
    while True:
        if _sweep(run_id, exclude, res, say, sessions):
            quiet_since = time.monotonic()
        if time.monotonic() - quiet_since >= quiet or time.monotonic() > deadline:
            return marked(run_id, exclude, sessions)
        time.sleep(0.25)


def _sweep(run_id: str, exclude: set[int], res: StopResult, say,
           sessions: Optional[set[int]] = None) -> bool:
    """One sweep of the marked processes; True if it found any."""
    found = marked(run_id, exclude, sessions)
    if not found:
        return False
    labels = {p.pid: _label(p) for p in found}
    say(f"  sweeping {len(found)} process(es) with {MARKER_VAR}={run_id} outside the group: "
        + ", ".join(labels.values()))
    for p in found:
        try:
            p.terminate()
        except psutil.Error:
            pass
    stubborn = _wait_gone(found, SWEEP_GRACE)
    for p in stubborn:
        try:
            p.kill()
        except psutil.Error:
            pass
    left = {p.pid for p in _wait_gone(stubborn, 5.0)}
    killed = {p.pid for p in stubborn}
    for p in found:
        if p.pid not in left:
            res.stopped.append(f"{labels[p.pid]}: {'SIGKILL' if p.pid in killed else 'SIGTERM'} (marker sweep)")
    return True


def _record(run_dir: Path, res: StopResult) -> None:
    try:
        with mf.editing(run_dir) as data:
            data["stopped"] = {"at": time.time(), "stopped": len(res.stopped), "left": len(res.left)}
    except (OSError, ValueError):
        pass

"""Is the run still alive? From the manifest's pids (with create times), else by looking for a
live `gym` process whose command line names the run's files."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import psutil

GYM_BINARIES = {"gym", "ng", "ng_run", "ng_collect_rollouts", "ng_e2e_collect_rollouts"}
CREATE_TIME_SLACK = 0.5   # seconds: psutil's create_time is rounded differently across calls
RUN_ID_VAR = "GYMWATCH_RUN_ID"   # in the environment of every process of a run gymwatch launched
PROC = "/proc"                  # Linux: each process's command line, read directly


@dataclass(slots=True)
class Liveness:
    parent: Optional[bool] = None
    collector: Optional[bool] = None
    parent_pid: Optional[int] = None
    collector_pid: Optional[int] = None
    parent_exit: Optional[int] = None      # from the launcher's status file (negative: signal)
    collector_exit: Optional[int] = None

    def saw(self, role: str, pid: int, alive: Optional[bool] = True, exit_code: Optional[int] = None) -> None:
        """A gym process of this run: `gym env start` (env), `gym eval run` (eval), or both."""
        if role in ("env", "both"):
            self.parent, self.parent_pid, self.parent_exit = alive, pid, exit_code
        if role in ("eval", "both"):
            self.collector, self.collector_pid, self.collector_exit = alive, pid, exit_code


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity, not just what the machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def pid_alive(pid: int, create_time: Optional[float]) -> bool:
    """True only if `pid` runs AND started when recorded, so a reused pid is not the run."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        if create_time is not None and abs(proc.create_time() - create_time) > CREATE_TIME_SLACK:
            return False
        return True
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def exit_code(status_file: object) -> Optional[int]:
    """The return code the launcher's wrapper recorded for a gym process, if it has ended."""
    if not isinstance(status_file, str):
        return None
    try:
        with open(status_file, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    code = data.get("returncode") if isinstance(data, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def from_manifest(manifest: dict) -> Liveness:
    live = Liveness()
    for proc in manifest.get("processes") or []:
        if not isinstance(proc, dict) or not isinstance(proc.get("pid"), int):
            continue
        code = exit_code(proc.get("status_file"))
        alive = code is None and pid_alive(proc["pid"], proc.get("create_time"))
        live.saw(str(proc.get("role")), proc["pid"], alive, code)
    return live


def _is_gym_command(cmdline: list[str]) -> Optional[str]:
    """'env' / 'eval' / 'both' for a Gym CLI command line, else None."""
    head = [os.path.basename(a) for a in cmdline[:3]]
    if not any(h in GYM_BINARIES for h in head) and "nemo_gym" not in " ".join(cmdline[:3]):
        return None
    words = set(cmdline)
    if "ng_run" in head or ({"env", "start"} <= words):
        return "env"
    if "ng_collect_rollouts" in head or ({"eval", "run"} <= words and "--no-serve" in words):
        return "eval"
    if "ng_e2e_collect_rollouts" in head or {"eval", "run"} <= words:
        return "both"
    return None


def scan(needles: list[str]) -> Liveness:
    """Look for live Gym processes whose command line mentions any of `needles` (paths). One not
    found is None, not False: it may run on another machine that writes to a shared filesystem."""
    live = Liveness()
    needles = [n for n in needles if n]
    for proc, cmd, role in gym_processes():
        if _mentions(proc, cmd, needles):
            live.saw(role, proc.pid)
    return live


def gym_processes() -> Iterator[tuple[psutil.Process, list[str], str]]:
    """Every live process but this one that runs a Gym command: (process, its command line, its
    role: env / eval / both)."""
    me = os.getpid()
    for pid, cmd in _command_lines():
        role = _is_gym_command(cmd) if pid != me and cmd else None
        if role is None:
            continue
        try:
            proc = psutil.Process(pid)
        except (psutil.Error, OSError):
            continue
        yield proc, cmd, role


def _command_lines() -> Iterator[tuple[int, list[str]]]:
    """(pid, command line) of every process. Read from /proc where there is one: one small read
    a process, where psutil's process_iter also reads each one's stat file (a desktop runs
    hundreds, and the runs browser sweeps them on every listing)."""
    try:
        pids = [int(name) for name in os.listdir(PROC) if name.isdigit()]
    except OSError:
        pids = []
    if not pids:
        yield from _psutil_command_lines()
        return
    for pid in pids:
        data = _proc_cmdline(pid)
        if data:
            yield pid, _split_cmdline(os.fsdecode(data))


def _proc_cmdline(pid: int) -> bytes:
    """The raw /proc/<pid>/cmdline (b"": gone, not ours to read, or a kernel thread)."""
    try:
        fd = os.open(f"{PROC}/{pid}/cmdline", os.O_RDONLY)
    except OSError:
        return b""
    try:
        parts = [os.read(fd, 1 << 16)]
        while len(parts[-1]) == 1 << 16:
            parts.append(os.read(fd, 1 << 16))
        return b"".join(parts)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _split_cmdline(text: str) -> list[str]:
    """A command line's arguments: NUL-separated, but a process that retitled itself (Ray's
    workers, setproctitle) may have written one string with spaces instead, with or without a
    NUL at its end (psutil splits them the same way)."""
    sep = "\0" if text.endswith("\0") else " "
    args = (text[:-1] if text.endswith(sep) else text).split(sep)
    if sep == "\0" and len(args) == 1 and " " in args[0]:
        args = args[0].split(" ")
    return args


def _psutil_command_lines() -> Iterator[tuple[int, list[str]]]:
    """(pid, command line) through psutil: where there is no /proc (macOS)."""
    try:
        found = list(psutil.process_iter(["pid", "cmdline"]))
    except (psutil.Error, OSError):
        return
    for proc in found:
        try:
            yield proc.info["pid"], proc.info.get("cmdline") or []
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue


def _mentions(proc: psutil.Process, cmd: list[str], needles: list[str]) -> bool:
    """Does this gym process name the run: in its arguments (relative ones resolved against its
    cwd), or through a file it holds open (stdout captured into the run dir)?"""
    joined = " ".join(cmd)
    if any(n in joined for n in needles):
        return True
    try:
        cwd = proc.cwd()
        paths = [os.path.normpath(os.path.join(cwd, a.split("=", 1)[-1])) for a in cmd[1:]]
        if any(_under(p, n) for p in paths for n in needles):
            return True
        return any(_under(f.path, n) for f in proc.open_files() for n in needles)
    except (psutil.Error, OSError):
        return False


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def server_process_alive(pid: int, venv: Optional[str]) -> bool:
    """Does `pid` still run a Gym server, and the one of that venv when it is known (a pid read
    from a log may belong to another machine, or have been reused)?"""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        cmd = " ".join(proc.cmdline())
        if "python" not in cmd:
            return False
        if venv is None:
            return True
        home = os.path.dirname(venv.rstrip("/"))
        return venv in cmd or venv in (proc.exe() or "") or proc.cwd() == home
    except (psutil.Error, OSError):
        return False


def needles_for(root: Path, rollouts: Optional[Path], logs_dir: Optional[Path]) -> list[str]:
    out = [str(root)]
    if rollouts is not None:
        out.append(str(rollouts))
    if logs_dir is not None:
        out.append(str(logs_dir))
    return out


def env_value(proc: psutil.Process, name: str) -> Optional[str]:
    """`name` in a process's environment. Read from /proc whole where it can be: Ray's processes
    retitle themselves (`ray::DashboardAgent`) by writing over the start of their environment
    block, and psutil, which stops at the first empty entry, then sees none of it."""
    try:
        with open(f"/proc/{proc.pid}/environ", "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return _psutil_env(proc, name)          # not Linux, or the process is gone
    except PermissionError as exc:
        raise psutil.AccessDenied(proc.pid) from exc
    prefix = name.encode() + b"="
    for entry in data.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix):].decode("utf-8", "replace")
    return None


def _psutil_env(proc: psutil.Process, name: str) -> Optional[str]:
    if not proc.is_running():
        raise psutil.NoSuchProcess(proc.pid)
    return proc.environ().get(name)


def runs_elsewhere(pid: object, run_id: str) -> bool:
    """True when `pid` is a live process of some other run than `run_id` (it lacks the run's
    marker); False when it is this run's, or when that cannot be told (gone, not ours to read)."""
    if not run_id or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        return env_value(psutil.Process(pid), RUN_ID_VAR) != run_id
    except (psutil.Error, OSError):
        return False

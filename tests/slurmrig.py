"""A real single-host Slurm for the cluster tests and for recording Gym submissions.

Debian's slurm-wlm and munge (installed by `.ci/install_slurm.sh`), started here without an init
system and with a private configuration: every daemon gets its own paths under one directory
(`GYMWATCH_SLURMRIG_DIR`, default /tmp/gymwatch-slurmrig), its own ports, its own munge key and
socket, and `SLURM_CONF` points the commands at it, so nothing global is read or left behind.
With `accounting=True` a private MariaDB and slurmdbd come up too (sacct, and Gym's resume chains,
need them). The pyxis flags Gym's job scripts pass to srun are accepted by the fakepyxis SPANK
plugin; `env()` puts the stand-in `vllm` (tests/slurmrig_bin) first on PATH.

One Slurm per machine: `running_rig()` holds /tmp/realslurm.lock while it starts, is used and
stops. A process that also runs real Gym takes /tmp/realgym.lock AFTER this one, never the other
way round, and a child of the lock holder (e.g. the recorder run by a test) takes neither.
Teardown cancels every job, stops exactly the daemons it started, by pid, and removes the dir.

By hand (docs/slurm-rig.md):  flock /tmp/realslurm.lock bash, then in that shell
          python tests/slurmrig.py start [--accounting]   (prints `export SLURM_CONF=...`)
          python tests/slurmrig.py stop
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
STANDIN_BIN = REPO / "tests" / "slurmrig_bin"
PLUGIN = Path(os.environ.get("GYMWATCH_SLURMRIG_LIB", "/opt/gymwatch-slurmrig")) / "fakepyxis.so"
LOCK = Path("/tmp/realslurm.lock")
DEFAULT_DIR = Path(os.environ.get("GYMWATCH_SLURMRIG_DIR", "/tmp/gymwatch-slurmrig"))
# Below Linux's ephemeral range (32768+) and above Gym's random server ports (10001-20000).
DEFAULT_PORT_BASE = int(os.environ.get("GYMWATCH_SLURMRIG_PORT_BASE", "29817"))
CLUSTER = "gymwatch"
PARTITION = "debug"
INSTALL_HINT = "run `bash .ci/install_slurm.sh` (make test does)"
ENV_MARK = "GYMWATCH_SLURMRIG_DIR"      # set in env(): a child knows a rig is up and whose it is
DAEMON_MARK = "GYMWATCH_SLURMRIG_DAEMON"   # in the daemons' environment only (slurmstepd inherits it)


class RigError(RuntimeError):
    """The rig could not start or stop; the message says why and where to look."""


def _run(cmd: list[str], env: dict | None = None, timeout: float = 30, check: bool = True
         ) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise RigError(f"{' '.join(cmd)} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-800:]}")
    return proc


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _start_time(pid: int) -> float | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return float(stat.rsplit(")", 1)[1].split()[19])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            break
    return pids


class SlurmRig:
    """One private Slurm (munged, slurmctld, slurmd; with accounting also mariadbd and slurmdbd)."""

    def __init__(self, base: Path = DEFAULT_DIR, accounting: bool = False, port_base: int = DEFAULT_PORT_BASE,
                 first_job_id: int = 1):
        self.base = Path(base)
        self.accounting = accounting
        self.first_job_id = first_job_id
        self.ports = {"slurmctld": port_base, "slurmd": port_base + 1, "slurmdbd": port_base + 2,
                      "mariadb": port_base + 3}
        self.hostname = socket.gethostname()
        self.conf = self.base / "etc" / "slurm.conf"
        self.logs = self.base / "log"
        self.munge_socket = self.base / "munge" / "munge.socket"
        self.pyxis_log = self.base / "log" / "fakepyxis.log"
        self.procs: dict[str, subprocess.Popen] = {}
        self.start_seconds: float | None = None

    @classmethod
    def attach(cls) -> SlurmRig:
        """The rig a parent process started (its env() was handed down): used, never stopped here."""
        base = os.environ.get(ENV_MARK)
        if not base or not (Path(base) / "etc" / "slurm.conf").exists():
            raise RigError(f"no running rig: {ENV_MARK} is not set to a rig's dir")
        return cls(Path(base))

    # ------------------------------------------------------------------ use
    def env(self, base: dict | None = None) -> dict:
        """An environment whose Slurm commands reach this rig and whose jobs find the stand-in vllm
        (sbatch exports the submitter's environment to the job and its steps)."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        env[ENV_MARK] = str(self.base)
        env["PATH"] = f"{STANDIN_BIN}:{env.get('PATH', '/usr/bin:/bin')}"
        return env

    def run(self, *cmd: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        return _run(list(cmd), env=self.env(), timeout=timeout, check=check)

    def job_ids(self) -> list[str]:
        out = self.run("squeue", "-h", "-o", "%i").stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def active_job_ids(self) -> list[str]:
        out = self.run("squeue", "-h", "-t", "PD,R,CG,S,CF,RS,RQ,SO,SE", "-o", "%i").stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    # ------------------------------------------------------------------ start
    def start(self) -> SlurmRig:
        t0 = time.monotonic()
        self._check_installed()
        self._reap_leftovers()
        busy = [f"{name} {port}" for name, port in self.ports.items()
                if (self.accounting or name not in ("slurmdbd", "mariadb")) and not _port_free(port)]
        if busy:
            raise RigError(f"ports in use: {', '.join(busy)} (another Slurm? set GYMWATCH_SLURMRIG_PORT_BASE)")
        shutil.rmtree(self.base, ignore_errors=True)
        for sub in ("etc", "log", "ctld", "slurmd", "munge"):
            (self.base / sub).mkdir(parents=True, exist_ok=True)
        self.base.chmod(0o755)          # munge and mysql must reach their own subdirectories
        try:
            self._start_munge()
            if self.accounting:
                self._start_accounting()
            self._write_slurm_conf()
            self._start("slurmctld", ["slurmctld", "-D", "-i"])
            self._start("slurmd", ["slurmd", "-D"])
            self._wait_idle()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _check_installed(self) -> None:
        need = ["slurmctld", "slurmd", "munged", "sbatch", "srun", "setpriv"]
        if self.accounting:
            need += ["slurmdbd", "mariadbd", "mariadb-install-db", "mariadb"]
        missing = [exe for exe in need if shutil.which(exe) is None]
        if missing:
            raise RigError(f"not installed: {', '.join(missing)}; {INSTALL_HINT}")
        if not PLUGIN.exists():
            raise RigError(f"no fakepyxis plugin at {PLUGIN}; {INSTALL_HINT}")

    def _start(self, name: str, cmd: list[str], user: str | None = None) -> subprocess.Popen:
        if user:
            cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *cmd]
        out = open(self.logs / f"{name}.stdout", "ab")
        env = {**self.env(), DAEMON_MARK: str(self.base)}
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        out.close()
        self.procs[name] = proc
        self._save_pids()
        return proc

    def _save_pids(self) -> None:
        """Which daemons this rig started (pid and start time), so a later rig can stop the ones a
        killed test left behind, and nothing else."""
        data = {name: {"pid": p.pid, "start": _start_time(p.pid)} for name, p in self.procs.items()}
        (self.base / "pids.json").write_text(json.dumps(data))

    def _reap_leftovers(self) -> None:
        path = self.base / "pids.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        for name, entry in data.items():
            pid = entry.get("pid")
            if pid and entry.get("start") is not None and _start_time(pid) == entry["start"]:
                print(f"slurmrig: stopping {name} (pid {pid}) left by an earlier rig", file=sys.stderr)
                self._stop_pid(pid)
        self._sweep_jobs()

    def _wait_for(self, cond, timeout: float, what: str, proc_names: tuple[str, ...] = ()) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            for name in proc_names:
                if self.procs[name].poll() is not None:
                    raise RigError(f"{name} exited {self.procs[name].returncode} while waiting for {what}:"
                                   f"{self._log_tails(name)}")
            time.sleep(0.1)
        raise RigError(f"timed out after {timeout:.0f}s waiting for {what}:{self._log_tails(*proc_names)}")

    def _log_tails(self, *names: str) -> str:
        """The last lines of the daemons' logs, for an error (teardown removes the dir)."""
        out = []
        for name in names:
            for path in sorted(self.logs.glob(f"{name}*")) + sorted(self.base.glob(f"*/{name}.log")):
                lines = path.read_text(errors="replace").splitlines()[-8:]
                out.append(f"\n--- {path.name}:\n" + "\n".join(lines))
        return "".join(out) or " (no log)"

    def _start_munge(self) -> None:
        munge = pwd.getpwnam("munge")
        d = self.base / "munge"
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        for p in (d, key):
            os.chown(p, munge.pw_uid, munge.pw_gid)
        d.chmod(0o755)          # munged: clients must reach its socket
        self._start("munged", ["munged", "-F", f"--socket={self.munge_socket}", f"--key-file={key}",
                               f"--pid-file={d / 'munged.pid'}", f"--log-file={d / 'munged.log'}",
                               f"--seed-file={d / 'munged.seed'}"], user="munge")
        self._wait_for(lambda: self.munge_socket.exists(), 10, "munged's socket", ("munged",))

    def _start_accounting(self) -> None:
        mysql = pwd.getpwnam("mysql")
        data = self.base / "mysql"             # mysql's own: its socket, pid and log go here too
        sock = data / "mysqld.sock"
        data.mkdir()
        os.chown(data, mysql.pw_uid, mysql.pw_gid)
        _run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=mysql",
              "--auth-root-authentication-method=socket", "--skip-test-db", "--skip-name-resolve"], timeout=120)
        self._start("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}",
                                 f"--port={self.ports['mariadb']}", "--bind-address=127.0.0.1", "--user=mysql",
                                 f"--pid-file={data / 'mariadbd.pid'}",
                                 f"--log-error={data / 'mariadbd.log'}", "--skip-name-resolve",
                                 "--innodb-buffer-pool-size=128M", "--innodb-lock-wait-timeout=900", "--skip-log-bin"])
        sql = ["mariadb", "--no-defaults", f"--socket={sock}", "-u", "root"]
        self._wait_for(lambda: _run([*sql, "-e", "SELECT 1"], check=False).returncode == 0, 60,
                       "mariadbd", ("mariadbd",))
        _run([*sql, "-e", "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmrig'; "
                          "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"])
        dbd = self.base / "etc" / "slurmdbd.conf"
        dbd.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}",
            "DbdAddr=127.0.0.1", "DbdHost=localhost", f"DbdPort={self.ports['slurmdbd']}",
            "SlurmUser=root", f"LogFile={self.logs / 'slurmdbd.log'}", f"PidFile={self.base / 'slurmdbd.pid'}",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={self.ports['mariadb']}", "StorageUser=slurm", "StoragePass=slurmrig",
            "StorageLoc=slurm_acct_db", ""]))
        dbd.chmod(0o600)
        self._write_slurm_conf()       # sacctmgr needs it to find slurmdbd
        self._start("slurmdbd", ["slurmdbd", "-D"])
        self._wait_for(lambda: self.run("sacctmgr", "-n", "list", "cluster", check=False).returncode == 0, 60,
                       "slurmdbd", ("slurmdbd",))
        self.run("sacctmgr", "-i", "add", "cluster", CLUSTER)

    def _write_slurm_conf(self) -> None:
        node = _run(["slurmd", "-C"]).stdout.splitlines()[0]            # NodeName=... CPUs=... RealMemory=...
        node = " ".join(w for w in node.split() if not w.startswith("NodeName="))
        b = self.base
        lines = [
            f"ClusterName={CLUSTER}",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={self.ports['slurmctld']}",
            f"SlurmdPort={self.ports['slurmd']}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.munge_socket}",
            "SlurmUser=root", "SlurmdUser=root",
            f"StateSaveLocation={b / 'ctld'}", f"SlurmdSpoolDir={b / 'slurmd'}",
            f"SlurmctldPidFile={b / 'slurmctld.pid'}", f"SlurmdPidFile={b / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.logs / 'slurmctld.log'}", f"SlurmdLogFile={self.logs / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill", "MpiDefault=none", "ReturnToService=2",
            "MinJobAge=300", "KillWait=10", "InactiveLimit=0", f"FirstJobId={self.first_job_id}",
            "DependencyParameters=kill_invalid_depend",
            f"PlugStackConfig={b / 'etc' / 'plugstack.conf'}",
            "JobCompType=jobcomp/none",
        ]
        if self.accounting:
            # (the connection to slurmdbd takes its munge socket from AccountingStoragePass, not AuthInfo)
            lines += ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=localhost",
                      f"AccountingStoragePort={self.ports['slurmdbd']}", f"AccountingStoragePass={self.munge_socket}"]
        else:
            lines += ["AccountingStorageType=accounting_storage/none"]
        lines += [f"NodeName={self.hostname} NodeAddr=127.0.0.1 NodeHostname={self.hostname} {node} State=UNKNOWN",
                  f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]
        self.conf.write_text("\n".join(lines))
        (b / "etc" / "plugstack.conf").write_text(f"required {PLUGIN} log={self.pyxis_log}\n")

    def _wait_idle(self) -> None:
        def idle() -> bool:
            proc = self.run("sinfo", "-h", "-o", "%T", check=False)
            return proc.returncode == 0 and proc.stdout.strip() == "idle"
        self._wait_for(idle, 30, "the node to be idle in sinfo", ("slurmctld", "slurmd"))

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Cancel every job, stop the daemons this rig started (by pid), remove its dir."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self._cancel_jobs()
        for name in ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                self._stop_pid(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        self._sweep_jobs()
        shutil.rmtree(self.base, ignore_errors=True)

    def _cancel_jobs(self) -> None:
        with contextlib.suppress(RigError, subprocess.TimeoutExpired):
            ids = self.job_ids()
            if ids:
                self.run("scancel", *ids, check=False)
            deadline = time.monotonic() + 40
            while self.active_job_ids() and time.monotonic() < deadline:
                time.sleep(0.5)

    def stop_started_earlier(self) -> None:
        """Stop a rig another process started (`start` by hand), from what its pids.json says."""
        if self.conf.exists():
            self._cancel_jobs()
        self._reap_leftovers()
        shutil.rmtree(self.base, ignore_errors=True)

    @staticmethod
    def _stop_pid(pid: int, grace: float = 15) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _sweep_jobs(self) -> None:
        """Kill what is left of this rig's jobs: a slurmstepd (its environment is the daemons') and
        a job's own processes (a job id, and this rig's SLURM_CONF); never this process or its
        ancestors (a shell that exported SLURM_CONF has no job id, but be sure)."""
        daemon = f"{DAEMON_MARK}={self.base}".encode()
        conf = f"SLURM_CONF={self.conf}".encode()
        spared = _ancestors()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in spared:
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            in_job = conf in environ and any(v.startswith(b"SLURM_JOB_ID=") for v in environ)
            if daemon in environ or in_job:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)


@contextlib.contextmanager
def slurm_lock(path: Path = LOCK) -> Iterator[None]:
    """Hold /tmp/realslurm.lock (one real Slurm per machine)."""
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"slurmrig: waiting for {path} (another real Slurm is up)", file=sys.stderr)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def running_rig(accounting: bool = False, base: Path = DEFAULT_DIR, first_job_id: int = 1) -> Iterator[SlurmRig]:
    """A started rig under /tmp/realslurm.lock, stopped (and its dir removed) on the way out."""
    with slurm_lock():
        rig = SlurmRig(base, accounting=accounting, first_job_id=first_job_id).start()
        try:
            yield rig
        finally:
            rig.stop()


def main(argv: list[str]) -> int:
    """`start` leaves the daemons running (no lock held: for a person at a terminal) and prints the
    environment to use; `stop` stops what a `start` recorded in the rig's pids.json."""
    import argparse

    ap = argparse.ArgumentParser(prog="slurmrig", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("action", choices=["start", "stop"])
    ap.add_argument("--accounting", action="store_true", help="also MariaDB + slurmdbd (sacct)")
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = ap.parse_args(argv)
    rig = SlurmRig(args.dir, accounting=args.accounting)
    if args.action == "start":
        rig.start()
        print(f"# a Slurm is up ({rig.start_seconds:.1f}s); stop it with: python {__file__} stop")
        print(f"export SLURM_CONF={rig.conf} PATH={STANDIN_BIN}:$PATH")
        return 0
    rig.stop_started_earlier()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

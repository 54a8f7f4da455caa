#!/usr/bin/env python3
"""Record a real NeMo Gym run as a gymwatch test fixture.

Launches `gym env start` (and optionally `gym eval run`) with their stdout/stderr captured to files
in the case dir, samples every file under the case dir every 0.25 s into `timeline.jsonl`
({t, file, size} each time a file appeared or changed size; t = seconds since the recording
started), stops what it started and writes `commands.txt`. What the recorder did and saw (launches,
exit codes, signals, the processes still alive after gym exited) goes to `_driver/events.jsonl`;
the stub policy's output and request log go to `_stub/`.

Only its own processes are ever signalled: each command runs in its own session (process group),
and every child carries the env marker GYMREC_MARKER=<uuid>; leftovers are found by that marker
(psutil) and killed by pid. Real Gym runs on a shared machine are serialized by an exclusive flock
(--lock, default /tmp/realgym.lock): run the recorder as `flock /tmp/realgym.lock ...` (it sees that
its parent holds the lock) or alone (it then waits for the lock and holds it itself):

    flock /tmp/realgym.lock .venv/bin/python scripts/record_run.py --case /tmp/x/case \\
        --gym-venv /tmp/gymwatch-gymvenv --python-bin /root/.pyenv/versions/3.13.0/bin \\
        --fresh-cwd --stub 'python3 {repo}/tests/fixtures/gym-0.4.0-mcqa/stub_openai.py {stub_port}' \\
        --env-start '--resources-server mcqa --model-type openai_model ++policy_base_url=http://127.0.0.1:{stub_port}/v1 \\
                     ++policy_api_key=dummy ++policy_model_name=stub-model +nemo_gym_log_dir={case}/logs' \\
        --until exit --env-timeout 480

Modes (--until):
  exit   wait for `gym env start` to exit by itself (bounded by --env-timeout), then stop what is left;
  ready  wait for `All N / N servers ready`, run `gym eval run` (--eval-run), then SIGINT gym's
         process group (Ctrl-C) and record its shutdown;
  hang   let `gym env start` run --hang-seconds, then SIGINT its process group.

Placeholders in --env-start / --eval-run / --stub: {case} {cwd} {venv} {site} {repo} {stub_port}
{head_port}. `++head_server.host=127.0.0.1 ++head_server.port={head_port}` is appended to both gym
commands (a free port unless --head-port). --hold-head-port silent|accept-close makes the recorder
itself hold that port first (listen and never accept / accept and close at once).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
TICK = 0.25
NOT_SAMPLED_DIRS = {"_driver", "_stub"}
NOT_SAMPLED_FILES = {"timeline.jsonl", "README.md", "truth.json", "commands.txt"}
READY_RE = re.compile(r"All (\d+) / (\d+) servers ready")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.case = Path(args.case).absolute()
        if self.case.exists() and any(self.case.iterdir()):
            sys.exit(f"record_run: {self.case} exists and is not empty")
        self.case.mkdir(parents=True, exist_ok=True)
        self.driver = self.case / "_driver"
        self.stubdir = self.case / "_stub"
        self.driver.mkdir()
        self.venv = Path(args.gym_venv).absolute()
        self.site = next((self.venv / "lib").glob("python3*/site-packages"))
        if args.fresh_cwd:
            self.cwd = Path(tempfile.mkdtemp(prefix="gymrec-cwd-", dir=args.tmp_root))
        else:
            self.cwd = Path(args.cwd).absolute()
            self.cwd.mkdir(parents=True, exist_ok=True)
        self.ray_tmpdir = Path(args.ray_tmpdir) if args.ray_tmpdir else Path(
            tempfile.mkdtemp(prefix="rr", dir=args.tmp_root))
        self.ray_tmpdir.mkdir(parents=True, exist_ok=True)
        self.stub_port = args.stub_port or free_port()
        self.head_port = args.head_port or free_port()
        self.marker = uuid.uuid4().hex
        self.env = dict(os.environ)
        self.env.update({
            "PATH": f"{self.venv / 'bin'}:{args.python_bin}:{os.environ.get('PATH', '')}",
            "UV_PYTHON_DOWNLOADS": "never",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "RAY_TMPDIR": str(self.ray_tmpdir),
            "GYMREC_MARKER": self.marker,
        })
        self.env.pop("VIRTUAL_ENV", None)
        self.t0 = time.monotonic()
        self.unix0 = time.time()
        self.events = open(self.driver / "events.jsonl", "a", encoding="utf-8")  # noqa: SIM115 (whole run)
        self.commands: list[str] = []
        self.procs: dict[str, subprocess.Popen] = {}
        self.sizes: dict[str, int] = {}
        self.timeline: list[dict] = []
        self._stop_sampling = threading.Event()
        self._holder: socket.socket | None = None
        self._holder_stop = threading.Event()

    # --- bookkeeping -------------------------------------------------------------------------
    def t(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def event(self, kind: str, **kw) -> None:
        rec = {"t": self.t(), "unix": round(time.time(), 3), "event": kind, **kw}
        self.events.write(json.dumps(rec, default=str) + "\n")
        self.events.flush()
        print(f"[record_run {rec['t']:8.2f}] {kind} {json.dumps(kw, default=str)[:300]}", file=sys.stderr)

    def fill(self, text: str) -> str:
        return text.format(case=self.case, cwd=self.cwd, venv=self.venv, site=self.site, repo=REPO,
                           stub_port=self.stub_port, head_port=self.head_port)

    # --- timeline ----------------------------------------------------------------------------
    def sample(self) -> None:
        t = self.t()
        for dirpath, dirnames, filenames in os.walk(self.case):
            rel_dir = os.path.relpath(dirpath, self.case)
            if rel_dir == ".":
                dirnames[:] = [d for d in dirnames if d not in NOT_SAMPLED_DIRS]
            dirnames.sort()
            for name in sorted(filenames):
                rel = os.path.normpath(os.path.join(rel_dir, name))
                if rel in NOT_SAMPLED_FILES:
                    continue
                try:
                    size = os.stat(os.path.join(dirpath, name)).st_size
                except FileNotFoundError:
                    continue
                if self.sizes.get(rel) != size:
                    self.sizes[rel] = size
                    self.timeline.append({"t": t, "file": rel, "size": size})

    def _sampler(self) -> None:
        nxt = time.monotonic()
        while not self._stop_sampling.is_set():
            self.sample()
            nxt += TICK
            self._stop_sampling.wait(max(0.0, nxt - time.monotonic()))

    # --- processes ---------------------------------------------------------------------------
    def launch(self, name: str, argv: list[str], stdout: Path, stderr: Path | None, cwd: Path,
               extra_env: dict | None = None) -> subprocess.Popen:
        env = dict(self.env)
        env.update(extra_env or {})
        out = open(stdout, "ab")  # noqa: SIM115 (handed to the child)
        err = open(stderr, "ab") if stderr else subprocess.STDOUT  # noqa: SIM115
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        self.procs[name] = p
        self.event("launch", name=name, pid=p.pid, pgid=os.getpgid(p.pid), argv=argv, cwd=str(cwd),
                   stdout=str(stdout), stderr=str(stderr) if stderr else "(stdout)")
        return p

    def ours(self) -> list[psutil.Process]:
        """Every live process carrying this recording's marker (not the recorder itself)."""
        found = []
        me = os.getpid()
        for p in psutil.process_iter(["pid"]):
            if p.pid == me:
                continue
            try:
                if p.environ().get("GYMREC_MARKER") == self.marker:
                    found.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        return found

    def describe(self, procs: list[psutil.Process]) -> list[dict]:
        out = []
        for p in procs:
            try:
                with p.oneshot():
                    env = p.environ()
                    d = {"pid": p.pid, "ppid": p.ppid(), "pgid": os.getpgid(p.pid), "name": p.name(),
                         "status": p.status(), "cmdline": " ".join(p.cmdline())[:400],
                         "NEMO_GYM_CONFIG_PATH": env.get("NEMO_GYM_CONFIG_PATH")}
                    try:
                        d["listening"] = sorted({f"{c.laddr.ip}:{c.laddr.port}" for c in p.net_connections("inet")
                                                 if c.status == psutil.CONN_LISTEN})
                    except (psutil.AccessDenied, AttributeError):
                        d["listening"] = None
                out.append(d)
            except (psutil.NoSuchProcess, ProcessLookupError):
                pass
        return out

    def kill_leftovers(self, why: str, keep: set[int] = frozenset()) -> None:
        left = [p for p in self.ours() if p.pid not in keep]
        if not left:
            self.event("leftovers", why=why, processes=[])
            return
        self.event("leftovers", why=why, processes=self.describe(left))
        for p in left:
            try:
                p.kill()                       # SIGKILL: nothing more gets written into their logs
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(left, timeout=10)
        self.event("leftovers_killed", signal="SIGKILL", pids=[p.pid for p in left],
                   still_alive=[p.pid for p in alive])

    def wait_exit(self, p: subprocess.Popen, timeout: float) -> int | None:
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def label(self, p: psutil.Process) -> str:
        """Which server (or what) a marked process belongs to."""
        try:
            cmd = " ".join(p.cmdline())
            env = p.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return "?"
        m = re.search(r"tee -a (\S+)\.log", cmd)
        if m:
            return f"{Path(m.group(1)).name} ({'tee' if p.name() == 'tee' else 'server shell'})"
        if env.get("NEMO_GYM_CONFIG_PATH"):
            return f"{env['NEMO_GYM_CONFIG_PATH']} ({p.name()})"
        for name, q in self.procs.items():
            if q.pid == p.pid:
                return name
        return f"{p.name()}: {cmd[:80]}"

    def _watcher(self) -> None:
        """Log every marked process appearing / disappearing (pid, label), every 0.5 s."""
        known: dict[int, str] = {}
        while not self._stop_sampling.is_set():
            now = {p.pid: p for p in self.ours()}
            for pid, p in now.items():
                if pid not in known:
                    known[pid] = self.label(p)
                    self.event("proc_seen", pid=pid, label=known[pid])
            for pid in [q for q in known if q not in now]:
                self.event("proc_gone", pid=pid, label=known.pop(pid))
            self._stop_sampling.wait(0.5)

    # --- port holder -------------------------------------------------------------------------
    def hold_port(self, port: int, mode: str) -> None:
        s = socket.socket()
        s.bind(("127.0.0.1", port))
        s.listen(8)
        self._holder = s
        if mode == "accept-close":
            def loop():
                s.settimeout(0.5)
                while not self._holder_stop.is_set():
                    try:
                        c, _ = s.accept()
                        c.close()
                    except OSError:        # includes the accept timeout
                        pass
            threading.Thread(target=loop, daemon=True).start()
        self.event("port_held", port=port, mode=mode, by="the recorder process itself", pid=os.getpid())

    # --- the run -----------------------------------------------------------------------------
    def gym_argv(self, sub: list[str], text: str) -> list[str]:
        return ["gym", *sub, *shlex.split(self.fill(text)),
                "++head_server.host=127.0.0.1", f"++head_server.port={self.head_port}"]

    def take_lock(self) -> None:
        """Real Gym runs are serialized by an exclusive flock: under `flock LOCK ...` already, or taken here."""
        lock = self.args.lock
        for p in psutil.Process().parents():
            try:
                cmd = p.cmdline()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if cmd and Path(cmd[0]).name == "flock" and lock in cmd:
                self.lock_note = f"under `flock {lock}` (parent pid {p.pid})"
                return
        self._lock_fh = open(lock, "a")  # noqa: SIM115 (held for the whole run)
        print(f"record_run: waiting for the lock {lock} ...", file=sys.stderr)
        fcntl.flock(self._lock_fh, fcntl.LOCK_EX)
        self.lock_note = f"holding an exclusive flock on {lock} itself"

    def run(self) -> int:
        a = self.args
        self.take_lock()
        self.write_versions()
        for stale in (self.ray_tmpdir / "ray_current_cluster", self.ray_tmpdir / "ray" / "ray_current_cluster"):
            if stale.exists():      # only ever inside our own RAY_TMPDIR
                stale.unlink()
                self.event("removed_stale", path=str(stale))
        self.t0, self.unix0 = time.monotonic(), time.time()
        self.event("recording_started", lock=self.lock_note, case=str(self.case), cwd=str(self.cwd), ray_tmpdir=str(self.ray_tmpdir),
                   head_port=self.head_port, stub_port=self.stub_port, marker=self.marker, mode=a.until,
                   unix0=round(self.unix0, 3))
        sampler = threading.Thread(target=self._sampler, daemon=True)
        sampler.start()
        if a.watch_procs:
            threading.Thread(target=self._watcher, daemon=True).start()
        rc = 0
        try:
            rc = self._run()
        finally:
            self.finish(sampler)
        return rc

    def _run(self) -> int:
        a = self.args
        if a.hold_head_port:
            self.hold_port(self.head_port, a.hold_head_port)
        stub = None
        if a.stub:
            self.stubdir.mkdir(exist_ok=True)
            stub_argv = shlex.split(self.fill(a.stub))
            stub_env = {"STUB_LOG": str(self.stubdir / "stub_requests.log")}
            for kv in a.stub_env:
                k, _, v = kv.partition("=")
                stub_env[k] = v
            stub = self.launch("stub", stub_argv, self.stubdir / "stub.stdout.log", None, REPO, stub_env)
            self.stub_env = stub_env
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", self.stub_port)) == 0:
                        break
                time.sleep(0.2)
            else:
                self.event("stub_not_listening")
                return 3
            self.event("stub_listening", port=self.stub_port)

        env_argv = self.gym_argv(["env", "start"], a.env_start)
        envp = self.launch("gym_env_start", env_argv, self.case / "gym_env_start.stdout.log",
                           self.case / "gym_env_start.stderr.log", self.cwd)
        env_rc = None
        if a.until == "exit":
            env_rc = self.wait_exit(envp, a.env_timeout)
            if env_rc is None:
                self.event("env_start_timeout", after=a.env_timeout)
                self.stop(envp)
                env_rc = envp.returncode
            else:
                self.event("exit", name="gym_env_start", rc=env_rc)
        elif a.until == "hang":
            env_rc = self.wait_exit(envp, a.hang_seconds)
            if env_rc is None:
                self.event("still_running", name="gym_env_start", after=a.hang_seconds)
                self.stop(envp)
                env_rc = envp.returncode
            else:
                self.event("exit", name="gym_env_start", rc=env_rc, note="exited before the hang window ended")
        else:  # ready
            ready = self.wait_ready(envp, a.env_timeout)
            if ready:
                self.event("ready_seen", line=ready)
                time.sleep(a.settle)
                if a.eval_run:
                    eval_argv = self.gym_argv(["eval", "run"], a.eval_run)
                    evp = self.launch("gym_eval_run", eval_argv, self.case / "gym_eval_run.stdout.log",
                                      self.case / "gym_eval_run.stderr.log", self.cwd)
                    ev_rc = self.wait_exit(evp, a.eval_timeout)
                    if ev_rc is None:
                        self.event("eval_run_timeout", after=a.eval_timeout)
                        self.stop(evp)
                        ev_rc = evp.returncode
                    self.event("exit", name="gym_eval_run", rc=ev_rc)
                    time.sleep(a.settle)
            else:
                self.event("ready_not_seen", alive=envp.poll() is None)
            if envp.poll() is None:
                self.stop(envp)
            env_rc = envp.returncode

        # what is still alive after gym env start is gone (orphans), recorded before killing them
        time.sleep(a.settle)
        keep = {stub.pid} if stub and stub.poll() is None else set()
        if stub and stub.poll() is None:
            keep |= {c.pid for c in psutil.Process(stub.pid).children(recursive=True)}
        if a.linger:
            left = [p for p in self.ours() if p.pid not in keep]
            self.event("alive_after_gym_exit", processes=self.describe(left))
            if left:
                self.event("linger", seconds=a.linger, note="leftovers left running, then killed")
                deadline = time.monotonic() + a.linger
                while time.monotonic() < deadline and any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                                                          for p in left):
                    time.sleep(0.5)
        self.kill_leftovers("after gym env start exited" + (f" (+ linger {a.linger:g}s)" if a.linger else ""), keep)
        if stub and stub.poll() is None:
            os.killpg(stub.pid, signal.SIGTERM)
            self.event("signal", name="stub", sig="SIGTERM", pgid=stub.pid)
            if self.wait_exit(stub, 10) is None:
                os.killpg(stub.pid, signal.SIGKILL)
                stub.wait()
        return 0

    def wait_ready(self, p: subprocess.Popen, timeout: float) -> str | None:
        out = self.case / "gym_env_start.stdout.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
            m = READY_RE.search(text)
            if m:
                return text[m.start():text.find("\n", m.start())]
            if p.poll() is not None:
                self.event("exit", name="gym_env_start", rc=p.returncode, note="before ready")
                return None
            time.sleep(0.5)
        self.event("ready_timeout", after=timeout)
        return None

    def stop(self, p: subprocess.Popen) -> None:
        """Ctrl-C equivalent: SIGINT to the process group, then SIGTERM / SIGKILL after grace periods."""
        name = next(n for n, q in self.procs.items() if q is p)
        for sig, grace in ((signal.SIGINT, self.args.stop_grace), (signal.SIGTERM, 15), (signal.SIGKILL, 10)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            self.event("signal", name=name, sig=sig.name, pgid=p.pid)
            self.commands.append(f"kill -{sig.name[3:]} -{p.pid}   # t={self.t()}s: {name}")
            if self.wait_exit(p, grace) is not None:
                self.event("exit", name=name, rc=p.returncode, after_signal=sig.name)
                return
        p.wait()

    def finish(self, sampler: threading.Thread) -> None:
        for name, p in self.procs.items():
            if p.poll() is None:
                self.event("still_running_at_end", name=name, pid=p.pid)
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        left = self.ours()
        if left:
            self.kill_leftovers("end of recording")
        self._holder_stop.set()
        if self._holder:
            self._holder.close()
            self.event("port_released", port=self.head_port)
        time.sleep(1.0)
        self._stop_sampling.set()
        sampler.join()
        self.sample()
        with open(self.case / "timeline.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(rec) + "\n" for rec in self.timeline)
        bad = [(f, s, (self.case / f).stat().st_size) for f, s in self.sizes.items()
               if (self.case / f).exists() and (self.case / f).stat().st_size != s]
        self.event("timeline_written", steps=len(self.timeline), files=len(self.sizes), size_mismatches=bad)
        self.write_commands()
        self.event("recording_finished")
        self.events.close()

    # --- side files --------------------------------------------------------------------------
    def write_versions(self) -> None:
        py = self.venv / "bin" / "python"
        code = ("import importlib.metadata as m, sys; print('python', sys.version.split()[0]);"
                "[print(n, m.version(n)) for n in ('nemo-gym','ray','uv','openai','fastapi','uvicorn')]")
        lines = []
        try:
            lines.append(subprocess.run([str(py), "-c", code], capture_output=True, text=True, env=self.env,
                                        timeout=60, check=False).stdout)
        except Exception as exc:  # noqa: BLE001
            lines.append(f"version probe failed: {exc}\n")
        (self.driver / "versions.txt").write_text("".join(lines), encoding="utf-8")

    def write_commands(self) -> None:
        a = self.args
        q = shlex.join
        L = [f"# Recorded by scripts/record_run.py {self.lock_note}; mode --until {a.until}",
             (f"# recording started {time.strftime('%Y-%m-%d %H:%M:%S %z', time.localtime(self.unix0))}"
              f" (timeline t=0; unix {self.unix0:.3f})"),
             f"# cwd for the gym commands: {self.cwd}" + ("  (fresh empty dir made by the recorder)" if a.fresh_cwd else ""),
             (f"export PATH={self.venv / 'bin'}:{a.python_bin}:$PATH UV_PYTHON_DOWNLOADS=never "
              f"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_TMPDIR={self.ray_tmpdir}"),
             "# (every child also got GYMREC_MARKER=<uuid> in its env, to find leftovers by)",
             f"cd {self.cwd}", ""]
        if a.hold_head_port:
            L += [f"# port holder: the recorder process itself binds 127.0.0.1:{self.head_port} and listens "
                  + ("without ever accepting" if a.hold_head_port == "silent" else "accepting and closing every connection at once"),
                  ""]
        for name, p in self.procs.items():
            argv = p.args
            if name == "stub":
                envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.stub_env.items())
                L += ["# stub policy (background, own session; cwd " + str(REPO) + "); output: _stub/stub.stdout.log",
                      f"{envs} {q(argv)}", ""]
            elif name == "gym_env_start":
                how = {"exit": "background, own session; waited for it to exit by itself",
                       "hang": f"background, own session; left running {a.hang_seconds:g}s",
                       "ready": "background, own session; waited for `All N / N servers ready`"}[a.until]
                L += [f"# gym env start ({how}); output: gym_env_start.stdout.log / gym_env_start.stderr.log",
                      q(argv), ""]
            elif name == "gym_eval_run":
                L += ["# gym eval run (foreground, own session); output: gym_eval_run.stdout.log / gym_eval_run.stderr.log",
                      q(argv), ""]
        if self.commands:
            L += ["# stopping (SIGINT = Ctrl-C to the process group; SIGTERM/SIGKILL only if it did not exit)"] + self.commands + [""]
        L += ["# leftovers (processes with the marker still alive after gym env start exited) were listed in",
              "# _driver/events.jsonl (`alive_after_gym_exit`, `leftovers`)"
              + (f", left running {a.linger:g}s more" if a.linger else "") + " and then SIGKILLed by pid", "",
              "# Recorder invocation that produced all of the above:",
              q([sys.executable, *sys.argv]), ""]
        (self.case / "commands.txt").write_text("\n".join(L), encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", required=True, help="new or empty dir: the run dir the fixture becomes")
    ap.add_argument("--gym-venv", required=True)
    ap.add_argument("--python-bin", required=True, help="bin dir of the Python the Gym venv was made with")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--cwd", help="cwd of the gym commands (server venvs and uv cache live under it)")
    g.add_argument("--fresh-cwd", action="store_true", help="a fresh empty cwd (cold venv builds)")
    ap.add_argument("--lock", default="/tmp/realgym.lock",
                    help="exclusive flock serializing real Gym runs (taken unless already under `flock LOCK`)")
    ap.add_argument("--tmp-root", default="/tmp")
    ap.add_argument("--ray-tmpdir", help="default: a fresh short temp dir")
    ap.add_argument("--stub", help="stub policy command (run from the repo root)")
    ap.add_argument("--stub-env", action="append", default=[], help="K=V for the stub's env")
    ap.add_argument("--stub-port", type=int)
    ap.add_argument("--head-port", type=int)
    ap.add_argument("--hold-head-port", choices=["silent", "accept-close"])
    ap.add_argument("--env-start", required=True, help="arguments after `gym env start`")
    ap.add_argument("--eval-run", help="arguments after `gym eval run` (mode ready)")
    ap.add_argument("--until", choices=["exit", "ready", "hang"], required=True)
    ap.add_argument("--env-timeout", type=float, default=900)
    ap.add_argument("--eval-timeout", type=float, default=900)
    ap.add_argument("--hang-seconds", type=float, default=90)
    ap.add_argument("--stop-grace", type=float, default=60, help="seconds after SIGINT before SIGTERM")
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--linger", type=float, default=0,
                    help="after gym env start exited: list what is left (psutil), let it run this long, then kill it")
    ap.add_argument("--watch-procs", action="store_true",
                    help="log each marked process appearing / disappearing (_driver/events.jsonl)")
    args = ap.parse_args()
    return Recorder(args).run()


if __name__ == "__main__":
    sys.exit(main())

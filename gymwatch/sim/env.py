"""The simulated `gym env start`: a head server, a stand-in Ray process, three servers, Gym's
readiness lines and banner; then it waits for SIGTERM and shuts down like Gym 0.4.0.

As in Gym, a server inherits Gym's stdout and stderr, unless `+nemo_gym_log_dir=<dir>` is given:
then its stdout and stderr go, merged, both to `<dir>/<name>.log` (appended) and to Gym's stdout
(Gym runs it as `(<command>) 2>&1 | tee -a <dir>/<name>.log`), so Gym's stdout says in which order
the servers' lines came (the merged view orders the logs by it). `+skip_venv_if_present=true` skips
uv for a server whose venv is there (all but the cold one)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO

from . import lines as L
from .hydra import SITE

ERR = sys.stderr


class Stop(Exception):
    """SIGTERM/SIGINT arrived."""


# Server types whose requirements.txt is only `-e nemo-gym[dev] @ ../../`: on a wheel install with
# the log dir's `set -o pipefail`, their uv step fails though uv succeeded (docs/gym-formats.md §4).
ONLY_GYM_REQUIREMENTS = ("responses_api_agents", "responses_api_models")
_stdout_lock = threading.Lock()


def tee(pipe: IO[bytes], log: Path) -> None:
    """`tee -a <log>`: each line of a server's merged output to its log and to Gym's stdout."""
    with open(log, "ab") as fh:
        for line in iter(pipe.readline, b""):
            fh.write(line)
            fh.flush()
            with _stdout_lock:
                sys.stdout.buffer.write(line)
                sys.stdout.flush()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def servers_for(args) -> list[dict]:
    res = args.get("resources_server", "mcqa")
    model = args.get("model_type", "openai_model")
    agent = args.get("agent_name") or f"{res}_simple_agent"
    out = []
    for name, stype, impl in ((res, "resources_servers", res), (agent, "responses_api_agents", "simple_agent"),
                              ("policy_model", "responses_api_models", model)):
        port = free_port()
        out.append({"config_path": name, "dir_path": f"{SITE}/{stype}/{impl}", "entrypoint": "app.py",
                    "host": "127.0.0.1", "name": impl, "pid": 0, "port": port, "process_name": name,
                    "server_type": stype, "url": f"http://127.0.0.1:{port}"})
    return out


class SimEnv:
    def __init__(self, args):
        self.args = args
        self.speed = args.speed
        self.head_host = args.get("head_server.host", "127.0.0.1")
        self.head_port = int(args.get("head_server.port", "11000"))
        self.fail = args.get("sim_fail_server", "")
        self.cold = args.get("sim_cold_server", args.get("resources_server", "mcqa"))
        self.servers = servers_for(args)
        self.log_dir = args.get("nemo_gym_log_dir")
        self.skip_venv = str(args.get("skip_venv_if_present", "false")).lower() == "true"
        self.procs: dict[str, subprocess.Popen] = {}
        self.ray: subprocess.Popen | None = None
        self.head: ThreadingHTTPServer | None = None
        self.stopping = False
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, _frame):
        if not self.stopping:
            self.stopping = True
            raise Stop()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds * self.speed)

    # --- start ---------------------------------------------------------------------
    def start(self) -> None:
        L.out("NeMo Gym is starting a new Ray cluster...")
        ray_addr = f"127.0.0.1:{random.randint(30000, 45000)}"
        self.ray = subprocess.Popen([sys.executable, "-m", "gymwatch.sim.ray"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        L.out(f"{L.ray_stamp()}\tWARNING authentication_token_setup.py:85 -- Token authentication is enabled "
              "for this Ray cluster.", ERR)
        self.sleep(3)
        L.out(f"{L.ray_stamp()}\tINFO worker.py:2029 -- Started a local Ray instance.", ERR)
        L.out(f"Started Ray cluster at {ray_addr}")
        self._start_head()
        for s in self.servers:
            self._start_server(s, ray_addr)
        L.out("Waiting for head server to spin up")
        L.out("Head server is not up yet (status `connection_error`). Sleeping...")
        self.sleep(1)
        L.out(f'INFO:     127.0.0.1:{random.randint(40000, 60000)} - "GET / HTTP/1.1" 200 OK')
        L.out("Waiting for servers to spin up")
        self._wait_ready()

    def _start_server(self, s: dict, ray_addr: str) -> None:
        name = s["process_name"]
        venv = "cold" if name == self.cold else ("skip" if self.skip_venv else "warm")
        dies = bool(self.log_dir) and venv != "skip" and s["server_type"] in ONLY_GYM_REQUIREMENTS
        cmd = [sys.executable, "-m", "gymwatch.sim.server", name, s["server_type"], str(s["port"]),
               str(self.speed), venv, "1" if name == self.fail else "0", ray_addr,
               s["dir_path"].rsplit("/", 1)[-1], "1" if dies else "0"]
        env = {**os.environ, "NEMO_GYM_CONFIG_PATH": name}
        if not self.log_dir:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, env=env)
        else:
            log = Path(self.log_dir) / f"{name.replace('/', '_')}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 env=env)
            threading.Thread(target=tee, args=(p.stdout, log), daemon=True).start()
        self.procs[name] = p
        s["pid"] = p.pid

    def _start_head(self) -> None:
        servers = self.servers

        class Head(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.startswith("/server_instances"):
                    body = json.dumps(servers).encode()
                elif self.path.startswith("/global_config_dict_yaml"):
                    body = "\n".join(f"{s['process_name']}:\n  port: {s['port']}" for s in servers).encode()
                else:
                    body = b"{}"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.head = ThreadingHTTPServer((self.head_host, self.head_port), Head)
        threading.Thread(target=self.head.serve_forever, daemon=True).start()
        for text in (f"INFO:     Started server process [{os.getpid()}]", "INFO:     Waiting for application startup.",
                     "INFO:     Application startup complete.",
                     f"INFO:     Uvicorn running on http://{self.head_host}:{self.head_port} (Press CTRL+C to quit)"):
            L.out(text, ERR)

    def _up(self, s: dict) -> bool:
        try:
            with urllib.request.urlopen(s["url"] + "/", timeout=0.5):
                return True
        except OSError:
            return False

    def _wait_ready(self) -> None:
        ready: list[str] = []
        poll_count = 0
        total = len(self.servers)
        while True:
            self._check_dead()
            ready += [s["process_name"] for s in self.servers if s["process_name"] not in ready and self._up(s)]
            if len(ready) == total:
                L.out(f"All {total} / {total} servers ready! Polling every 60s")
                for line in L.banner(self.servers):
                    L.out(line)
                return
            if poll_count % 10 == 0:
                waiting = [s["process_name"] for s in self.servers if s["process_name"] not in ready]
                L.out("Checking for HTTP server statuses.")
                L.out(f"{len(ready)} / {total} servers ready. Waiting for servers to spin up: {waiting}")
            poll_count += 1
            self.sleep(3)

    def _check_dead(self) -> None:
        for name, p in self.procs.items():
            if p.poll() is not None:
                # Gym 0.4.0 leaves the other servers running here (they are orphaned).
                L.out("Shutting down Ray cluster spun up by NeMo Gym...")
                self._stop_ray()
                for text in ("Traceback (most recent call last):",
                             '  File "/opt/sim-gym/bin/gym", line 8, in <module>',
                             "    sys.exit(main())",
                             '  File "/opt/sim-gym/site-packages/nemo_gym/cli/env.py", line 299, in poll',
                             "    raise RuntimeError(print_str)",
                             f"RuntimeError: Process `{name}` finished unexpectedly!"):
                    L.out(text, ERR)
                raise SystemExit(1)

    # --- run and stop -----------------------------------------------------------------
    def serve_until_signal(self) -> None:
        while True:
            self._check_dead_after_ready()
            time.sleep(0.2)

    def _check_dead_after_ready(self) -> None:
        pass   # Gym polls every 60 s and only logs; nothing to show in a demo

    def shutdown(self) -> None:
        self.stopping = True
        L.out("Sending interrupt signals to servers...")
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        L.out("Waiting for processes to finish...")
        deadline = time.monotonic() + 1.0
        slow = []
        for name, p in self.procs.items():
            try:
                p.wait(max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                slow.append(name)
                p.kill()
                p.wait()
        if slow:
            L.out(f"Some processes ({', '.join(slow)}) didn't shutdown within the 1s timeout, killing instead.")
        L.out("NeMo Gym finished!")
        L.out("Shutting down Ray cluster spun up by NeMo Gym...")
        self._stop_ray()
        if self.head is not None:
            self.head.shutdown()
            for text in ("INFO:     Shutting down", "INFO:     Waiting for application shutdown.",
                         "INFO:     Application shutdown complete.", f"INFO:     Finished server process [{os.getpid()}]"):
                L.out(text, ERR)

    def _stop_ray(self) -> None:
        if self.ray is not None and self.ray.poll() is None:
            self.ray.kill()
            self.ray.wait()


def run_env(args) -> int:
    env = SimEnv(args)
    try:
        env.start()
        env.serve_until_signal()
    except Stop:
        pass
    env.shutdown()
    return 0

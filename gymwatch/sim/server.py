"""One simulated Gym server process: venv lines, Ray lines, uvicorn lines, then an HTTP server.

`python -m gymwatch.sim.server NAME SERVER_TYPE PORT SPEED VENV FAIL RAY_ADDR IMPL DIES`. VENV: `cold`
(a venv built from scratch), `warm` (uv checks it), `skip` (`+skip_venv_if_present`: no uv). DIES:
Gym 0.4.0's pipefail bug with `+nemo_gym_log_dir` (the shell exits 1 once uv is done: nothing more).
Its output goes to the parent's streams, the `(name) ` prefix on the lines Gym prefixes. The agent
answers POST /run with the trial's outcome."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import lines as L, outcomes

NAME = "server"


def say(text: str, err: bool = True) -> None:
    """A prefixed line. Without +nemo_gym_log_dir, uv's and uvicorn's lines reach gym's stderr;
    the server's own prints (and Ray's connect notice) reach its stdout."""
    L.out(f"({NAME}) {text}", sys.stderr if err else sys.stdout)


def install(venv: str, speed: float, seconds: float) -> None:
    """A cold `uv venv` + `uv pip install`; a child whose command line says `uv pip install` runs meanwhile."""
    say(f"Using CPython {L.PY} interpreter at: {L.PY_BIN}")
    say(f"Creating virtual environment with seed packages at: {venv}")
    say(" + pip==26.3")
    say(f"Activate with: source {venv}/bin/activate")
    marker = subprocess.Popen([sys.executable, "-c", "import time,sys; time.sleep(float(sys.argv[1]))",
                               str(seconds * speed + 5), "uv", "pip", "install", "-r", "requirements.txt"])
    try:
        time.sleep(1.5 * speed)
        say(f"Using Python {L.PY} environment at: {venv}")
        say(f"Resolved {L.PACKAGES} packages in 3.40s")
        for pkg, size in L.DOWNLOADS:
            say(f"Downloading {pkg} ({size})")
        done = list(L.DOWNLOADS)
        random.Random(7).shuffle(done)
        step = (seconds - 4.0) / len(done)
        for pkg, _ in done:
            time.sleep(step * speed)
            say(f" Downloaded {pkg}")
        say(f"Prepared {L.PACKAGES} packages in {seconds - 3:.2f}s")
        time.sleep(1.0 * speed)
        say(f"Installed {L.PACKAGES} packages in 1.04s")
        for pkg in L.INSTALLED:
            say(f" + {pkg}")
    finally:
        marker.kill()
        marker.wait()


class Handler(BaseHTTPRequestHandler):
    speed = 1.0
    n_tasks = 6

    def _send(self, code: int, obj) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._send(200, {"status": "ok", "server": NAME})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        row = json.loads(self.rfile.read(n) or b"{}")
        if self.path != "/run":
            return self._send(404, {"detail": "Not Found"})
        task, rollout = int(row.get("_ng_task_index", 0)), int(row.get("_ng_rollout_index", 0))
        kind = outcomes.outcome(task, rollout, int(row.get("_sim_n_tasks", self.n_tasks)))
        time.sleep(outcomes.duration(task, rollout) * self.speed)
        if kind == "agent_error":
            say("Hit an exception while making a request (try 1): POST http://127.0.0.1/v1/responses", err=False)
            for text in ("Traceback (most recent call last):",
                         '  File "responses_api_agents/simple_agent/app.py", line 112, in run',
                         "    response = await self.server_client.post(...)",
                         "aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected",
                         f'INFO:     127.0.0.1:{self.client_address[1]} - "POST /run HTTP/1.1" 500 Internal Server Error'):
                say(text)
            return self._send(500, {"detail": "ServerDisconnectedError: Server disconnected"})
        prompt = 120 + (task * 37) % 200
        resp = outcomes.response(task, rollout, kind, prompt)
        expected = row.get("expected_answer")
        extracted = outcomes.ANSWER if kind == "ok" else None
        reward = 1.0 if extracted is not None and extracted == expected else 0.0
        self._send(200, {"response": resp, "reward": reward, "extracted_answer": extracted})

    def log_message(self, *a):   # uvicorn's 200 OK lines are filtered in Gym too
        pass


def main(argv: list[str]) -> int:
    global NAME
    NAME, stype, port, speed = argv[0], argv[1], int(argv[2]), float(argv[3])
    setup, fail, ray_addr = argv[4], argv[5] == "1", argv[6]
    impl = argv[7] if len(argv) > 7 else NAME
    dies = len(argv) > 8 and argv[8] == "1"
    venv = os.path.join(os.getcwd(), stype, impl, ".venv")
    if setup == "cold":
        install(venv, speed, 25.0)
    elif setup == "warm":
        say(f"Using CPython {L.PY} interpreter at: {L.PY_BIN}")
        say(f"Creating virtual environment with seed packages at: {venv}")
        say(f"Activate with: source {venv}/bin/activate")
        time.sleep(0.5 * speed)
        say(f"Using Python {L.PY} environment at: {venv}")
        say("Checked 3 packages in 37ms")
    if dies:
        return 1            # `grep -v -F '../..'` selected nothing: `&& python app.py` never ran
    time.sleep(2.0 * speed)
    L.out(f"Connecting to Ray cluster at specified address: {ray_addr}")
    L.out(f"{L.ray_stamp()}\tINFO worker.py:1841 -- Connecting to existing Ray cluster at address: {ray_addr}...",
          sys.stderr)
    L.out(f"{L.ray_stamp()}\tINFO worker.py:2029 -- Connected to Ray cluster.", sys.stderr)
    L.out(L.ULIMIT)
    say("Adding a uvicorn logging filter so that the logs aren't spammed with 200 OK messages. "
        "This is to help errors pop up better and filter out noise.", err=False)
    say(f"INFO:     Started server process [{os.getpid()}]")
    say("INFO:     Waiting for application startup.")
    say("INFO:     Application startup complete.")
    try:
        if fail:
            raise OSError(98, "address already in use")
        httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        say(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address ('127.0.0.1', {port}): "
            f"{exc.strerror}")
        say("INFO:     Waiting for application shutdown.")
        say("INFO:     Application shutdown complete.")
        return 1
    Handler.speed = speed
    say(f"INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        say("INFO:     Shutting down")
        say("INFO:     Finished server process [%d]" % os.getpid())
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        raise SystemExit(130) from None

"""Idle screen CPU: what the live screen costs while nothing in its run changes, in a terminal
and served to a browser tab.

Two runs: a finished one (`aborted_500`, recorded) and a quiet live one (`mixed_ok` replayed up to
its 10th second and left there: the screen says STARTING and its clock ticks every second). Each
is shown at 200x50 in a real pseudo-terminal (`gymwatch attach`), and by a real `gymwatch serve`
to a tab (a websocket client speaking the page's protocol; serve's own CPU is counted with the
screen's). After the screen has drawn and settled, the CPU time of those processes' threads
(/proc/PID/task/*/schedstat) over a window of wall time give the share of a core. Baseline, the same way: a bare
Textual app (one DataTable and a footer) in the same terminal, and under the web driver with
its input and output piped as textual-serve runs it.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

from .common import PY, REPO, row, skipped

SIZE = (200, 50)
WINDOW, SMALL_WINDOW = 10.0, 2.0      # seconds of idle measured
SETTLE, SMALL_SETTLE = 5.0, 1.5       # seconds after the first output before measuring
TARGET = 0.05                         # of a core
FINISHED = REPO / "tests" / "fixtures" / "gym-0.4.0-cases" / "aborted_500"
QUIET_SRC = REPO / "tests" / "fixtures" / "gym-0.4.0-cases" / "mixed_ok"


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "TEXTUAL_ANIMATIONS": "none", "TERM": "xterm-256color",
            "GYMWATCH_NO_PROCESS_CHECK": "1"}


def _cpu(pids: list[int]) -> float:
    """CPU seconds of these processes' threads: the scheduler's nanoseconds on a CPU (utime and
    stime count 10 ms ticks, too coarse for an idle process over seconds)."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass           # a thread that ended meanwhile
    return total / 1e9


def _share(pids: list[int], window: float) -> float:
    c0, t0 = _cpu(pids), time.monotonic()
    time.sleep(window)
    return (_cpu(pids) - c0) / (time.monotonic() - t0)


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def in_terminal(argv: list[str], settle: float, window: float) -> float:
    """The share of a core `argv` uses idle on a 200x50 pseudo-terminal whose output is read."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=_env(), cwd=str(REPO),
                            start_new_session=True)
    os.close(slave)
    seen = threading.Event()

    def drain() -> None:
        while True:
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return
            seen.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not seen.wait(60):
            raise RuntimeError(f"{argv[2:4]} drew nothing in 60 s")
        time.sleep(settle)
        if proc.poll() is not None:
            raise RuntimeError(f"{argv[2:4]} exited {proc.returncode}")
        return _share([proc.pid], window)
    finally:
        _end(proc)
        os.close(master)


def bare_piped(settle: float, window: float) -> float:
    """The bare app as textual-serve runs a screen: the web driver, input and output piped."""
    env = {**_env(), "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver", "TEXTUAL_FPS": "60",
           "TEXTUAL_COLOR_SYSTEM": "truecolor", "COLUMNS": str(SIZE[0]), "ROWS": str(SIZE[1])}
    proc = subprocess.Popen([PY, "-m", "benchmarks.bench_idle", "bare"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(REPO),
                            start_new_session=True)
    seen = threading.Event()

    def drain() -> None:
        while proc.stdout.read1(65536):
            seen.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not seen.wait(60):
            raise RuntimeError("the bare app drew nothing in 60 s")
        time.sleep(settle)
        return _share([proc.pid], window)
    finally:
        _end(proc)


async def _tab(port: int, settle: float, window: float, serve_pid: int) -> float:
    import aiohttp
    import psutil

    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(f"http://127.0.0.1:{port}/ws?width={SIZE[0]}&height={SIZE[1]}")
        await ws.send_str(json.dumps(["resize", {"width": SIZE[0], "height": SIZE[1]}]))
        drew = asyncio.Event()

        async def read() -> None:
            while True:
                msg = await ws.receive()
                if msg.type == aiohttp.WSMsgType.BINARY:
                    drew.set()
                elif msg.type != aiohttp.WSMsgType.TEXT:
                    return

        reader = asyncio.create_task(read())
        await asyncio.wait_for(drew.wait(), 60)
        await asyncio.sleep(settle)
        screens = psutil.Process(serve_pid).children(recursive=True)
        if not screens:
            raise RuntimeError("serve started no screen for the tab")
        pids = [serve_pid] + [p.pid for p in screens]
        share = await asyncio.get_running_loop().run_in_executor(None, _share, pids, window)
        await ws.close()
        reader.cancel()
        return share


def served(run: Path, settle: float, window: float) -> float:
    """The share of a core `gymwatch serve RUN` and the screen it started for one open tab use."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([PY, "-m", "gymwatch", "serve", str(run), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(), cwd=str(REPO),
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("gymwatch serve did not come up") from None
                time.sleep(0.1)
        return asyncio.run(_tab(port, settle, window, proc.pid))
    finally:
        _end(proc)


def quiet_live_run(dst: Path) -> Path:
    """mixed_ok replayed up to its 10th second, then left as it is (servers starting)."""
    subprocess.run([PY, "-m", "gymwatch", "replay", str(QUIET_SRC), str(dst), "--speed", "100", "--until", "10"],
                   check=True, capture_output=True, env=_env(), cwd=str(REPO), timeout=120)
    return dst


def _pct(x: float) -> str:
    return f"{x * 100:.1f}% of a core"


def run(small: bool) -> list[dict]:
    settle, window = (SMALL_SETTLE, SMALL_WINDOW) if small else (SETTLE, WINDOW)
    target = f"<= {TARGET * 100:.0f}% of a core"
    out: list[dict] = []
    try:
        base_term = in_terminal([PY, "-m", "benchmarks.bench_idle", "bare"], settle, window)
        base_served = bare_piped(settle, window)
    except Exception as exc:  # noqa: BLE001
        return [skipped("idle screen CPU", f"baseline: {exc}"[:200], target)]
    with tempfile.TemporaryDirectory(prefix="gymwatch-idle-") as tmp:
        runs = {}
        try:
            runs["finished run"] = Path(shutil.copytree(FINISHED, Path(tmp) / "finished"))
            if not small:
                runs["quiet live run"] = quiet_live_run(Path(tmp) / "quiet")
        except Exception as exc:  # noqa: BLE001
            return [skipped("idle screen CPU", f"inputs: {exc}"[:200], target)]
        for label, path in runs.items():
            for mode, base in (("terminal", base_term), ("served", base_served)):
                name = f"idle screen CPU, {mode} ({label}, {SIZE[0]}x{SIZE[1]})"
                try:
                    if mode == "terminal":
                        v = in_terminal([PY, "-m", "gymwatch", "attach", str(path)], settle, window)
                        note = "gymwatch attach on a pseudo-terminal"
                    else:
                        v = served(path, settle, window)
                        note = "gymwatch serve and the screen it started for one open tab"
                except Exception as exc:  # noqa: BLE001
                    out.append(skipped(name, str(exc)[:200], target))
                    continue
                out.append(row(name, _pct(v), _pct(base), round(v / base, 2) if base > 0 else None, target,
                               v <= TARGET, f"{note}, {window:g} s after {settle:g} s settled; baseline: "
                                            f"a bare Textual app (a DataTable, a footer), the same way"))
    return out


def bare() -> None:
    from textual.app import App
    from textual.widgets import DataTable, Footer

    class Bare(App):
        BINDINGS = [("q", "quit", "Quit")]

        def compose(self):
            yield DataTable()
            yield Footer()

        def on_mount(self) -> None:
            self.query_one(DataTable).add_columns("Task", "Roll", "Att", "Status", "Reward", "Tokens", "Failure")

    Bare().run()


if __name__ == "__main__":
    if sys.argv[1:] == ["bare"]:
        bare()
    else:
        for r in run("--small" in sys.argv):
            print(json.dumps(r))

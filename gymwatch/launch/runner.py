"""`gymwatch run` / `gymwatch demo`: prepare the run dir, write the manifest, start gym and the
launch driver, then open the screen or (headless) wait and print the report."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import psutil

from ..core.layout import BOTH, ENV, EVAL, MANIFEST_NAME
from ..core.procs import pid_alive
from . import manifest as mf
from .driver import LAUNCH_LOG
from .plan import ENV_ONLY, ENV_THEN_EVAL, ROLLOUTS_NAME, Plan
from .spawn import gym_env, planned, read_status, spawn
from .startup import CAN_COLLECT, NEVER, collect_stage, progress_line, timeout_summary


class RunRefused(Exception):
    """The run dir cannot take a new run (one line for the user)."""


def prepare_dir(plan: Plan) -> None:
    d = plan.run_dir
    if (d / MANIFEST_NAME).exists():
        raise RunRefused(f"{d} already holds a gymwatch run: attach it with `gymwatch attach {d}` or pick another --run-dir")
    for p in (plan.output, d / ROLLOUTS_NAME):
        if p is not None and p.exists() and p.stat().st_size > 0:
            raise RunRefused(f"{d} already holds rollouts ({p}): pick a new --run-dir (or --output)")
    d.mkdir(parents=True, exist_ok=True)
    plan.cwd.mkdir(parents=True, exist_ok=True)
    if plan.output is not None:
        plan.output.parent.mkdir(parents=True, exist_ok=True)


def launch(plan: Plan, startup_timeout: Optional[float] = None, kill_on_timeout: bool = False,
           extra: Optional[dict] = None, run_id: Optional[str] = None) -> dict:
    """Start the run; returns the manifest (written before this returns)."""
    prepare_dir(plan)
    run_id = run_id or mf.new_run_id()
    env = gym_env(run_id)
    data = mf.build(run_id, plan.gym_version, plan.head, plan.output, plan.logs_dir,
                    mf.log_offsets(plan.logs_dir), {"mode": plan.mode, **(extra or {})})
    data["files"]["launch_log"] = str(plan.run_dir / LAUNCH_LOG)
    first = ENV if plan.env_args else BOTH
    entry = spawn(first, plan.argv(ENV if plan.env_args else EVAL), plan.run_dir, plan.cwd, env)
    data["processes"].append(entry)
    if plan.mode == ENV_THEN_EVAL:
        data["processes"].append(planned(EVAL, plan.argv(EVAL), plan.run_dir, plan.cwd))
    mf.write(plan.run_dir, data)
    driver_plan = {"cwd": str(plan.cwd), "startup_timeout": startup_timeout, "kill_on_timeout": kill_on_timeout,
                   "eval_argv": plan.argv(EVAL) if plan.mode == ENV_THEN_EVAL else None}
    with open(plan.run_dir / LAUNCH_LOG, "ab") as log:
        drv = subprocess.Popen([sys.executable, "-m", "gymwatch.launch.driver", str(plan.run_dir)],
                               stdin=subprocess.PIPE, stdout=log, stderr=log, env=env, cwd=plan.cwd,
                               start_new_session=True)
    drv.stdin.write(json.dumps(driver_plan).encode())
    drv.stdin.close()
    try:
        ctime = psutil.Process(drv.pid).create_time()
    except psutil.Error:
        ctime = None
    with mf.editing(plan.run_dir) as fresh:
        fresh["driver"] = {"pid": drv.pid, "create_time": ctime}
        data = fresh
    return data


# --- watching without a screen -----------------------------------------------------------
def _entry(data: dict, roles: tuple[str, ...]) -> dict:
    for p in data.get("processes") or []:
        if isinstance(p, dict) and p.get("role") in roles:
            return p
    return {}


def _ended(e: dict) -> bool:
    """A started process that is gone (status file or pid check)."""
    if not isinstance(e.get("pid"), int):
        return False
    if e.get("status_file") and "returncode" in read_status(e["status_file"]):
        return True
    return not pid_alive(e["pid"], e.get("create_time"))


def watch_session(run_dir: Path):
    """The session a headless watch polls: timed by the wall clock, so that the report after it has
    the times it saw (each server's startup steps, when results came)."""
    from ..core.session import RunSession

    return RunSession.open(str(run_dir), check_processes=False, clock=time.time)


def wait_headless(run_dir: Path, startup_timeout: Optional[float], say=None, poll: float = 0.5,
                  session=None) -> str:
    """Wait until the run reaches a point a script can report on. Returns why it stopped waiting:
    `collected`, `ready` (env only: ready to collect), `startup_ended` (gym died, or gave up on
    the model endpoints, before that), `timeout`. `session`: the one to poll (`watch_session()`)."""
    say = say or (lambda s: print(s, file=sys.stderr, flush=True))
    session = session or watch_session(run_dir)
    # The driver times --startup-timeout from the manifest's creation: so does this wait, else a
    # driver stopping the run at its timeout looks like gym ending on its own.
    created_at = float(mf.load(run_dir).get("created") or time.time())
    last, all_ready_at, stage, why = "", None, "", ""
    while True:
        data = mf.load(run_dir)
        session.poll()
        state = session.state
        line = progress_line(state)
        if line != last:
            say(f"gymwatch: {line}")
            last = line
        if state.parent.all_ready is not None and all_ready_at is None:
            all_ready_at = time.monotonic()
        if stage != CAN_COLLECT:        # once ready to collect, it stays so (no more probes of the head)
            stage, why = collect_stage(state, str(data.get("head") or ""),
                                       time.monotonic() - (all_ready_at or time.monotonic()))
        parent, collector = _entry(data, (ENV, BOTH)), _entry(data, (EVAL, BOTH))
        mode = data.get("mode")
        if collector and _ended(collector):
            return "collected"
        if mode == ENV_ONLY and stage == CAN_COLLECT:
            return "ready"
        if startup_timeout and stage != CAN_COLLECT and time.time() - created_at > startup_timeout:
            say(timeout_summary(state, time.time() - created_at, why))
            return "timeout"
        if stage == NEVER or (_ended(parent) and stage != CAN_COLLECT):
            if stage == NEVER:
                say(f"gymwatch: {why}")
            return "startup_ended"
        if mode == ENV_THEN_EVAL and not isinstance(collector.get("pid"), int) and _ended(data.get("driver") or {}):
            time.sleep(0.5)   # the driver may have just started eval: re-check once
            if not isinstance(_entry(mf.load(run_dir), (EVAL,)).get("pid"), int):
                say(f"gymwatch: gym eval run was not started; see {run_dir / LAUNCH_LOG}")
                return "startup_ended"
        time.sleep(poll)


def after_driver_kill(run_dir: Path, say, timeout: float = 90.0) -> None:
    """--kill-on-timeout: the driver stops the run (it does so even when gymwatch is gone). Wait for
    it, show what it did, and sweep whatever is left (a driver that died first)."""
    from .stop import stop_run

    drv = mf.load(run_dir).get("driver") or {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(drv.get("pid") or -1, drv.get("create_time")):
        time.sleep(0.2)
    try:
        lines = (run_dir / LAUNCH_LOG).read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    start = next((i for i, ln in enumerate(lines) if "--kill-on-timeout" in ln), len(lines))
    for ln in lines[start:]:
        say(ln)
    if is_live(run_dir):
        stop_run(run_dir, say=say)


def report(run_dir: Path, fmt: str, watched=None) -> tuple[str, int]:
    """The core's report of the run, with per-server process facts attached. `watched`: the state a
    watch of the run made (`wait_headless`): the report keeps the times it saw, which a read after
    the fact cannot know."""
    from ..core.session import read_run
    from ..report import render
    from .procfacts import fill

    session = read_run(str(run_dir))
    fill(session.reducer, session.layout.manifest)
    if watched is not None:
        session.reducer.carry_times(watched)
    return render(session.state, fmt)


def is_live(run_dir: Path) -> bool:
    from .stop import marked

    try:
        data = mf.load(run_dir)
    except ValueError:
        return False
    return bool(marked(str(data["run_id"])))


def open_screen(run_dir: Path, head: str, debug: bool = False, poll: bool = False) -> Optional[int]:
    """Open the live screen; None when there is no terminal to open it on."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("gymwatch: no terminal: watching without a screen", file=sys.stderr)
        return None
    from ..tui.app import run_app  # here: the launcher's headless paths never load Textual
    args = argparse.Namespace(path=str(run_dir), logs=None, poll=poll, head=f"http://{head}", debug=debug)
    return run_app(args)


def ask_on_quit(run_dir: Path, on_quit: str) -> None:
    """After the screen closes on a live run: stop it or leave it running."""
    from .stop import stop_run

    if not is_live(run_dir):
        return
    choice = on_quit
    if choice == "ask":
        choice = "leave"
        if sys.stdin.isatty():
            try:
                ans = input("The Gym run is still running. [s]top it or [l]eave it running? [l] ").strip().lower()
            except EOFError:
                ans = ""
            choice = "stop" if ans.startswith("s") else "leave"
    if choice == "stop":
        stop_run(run_dir)
    else:
        print(f"left running. Re-attach: gymwatch attach {run_dir}   Stop: gymwatch stop {run_dir}")

"""The detached launch driver: waits until the run is ready to collect (every server ready, and
from Gym 0.5 the model endpoints answering), then starts `gym eval run --no-serve`; enforces
--startup-timeout. It runs in its own session with the run marker, so it outlives a killed
gymwatch and `gymwatch stop` sweeps it.

Started as `python -m gymwatch.launch.driver RUN_DIR` with a JSON plan on stdin (the eval
argv may hold secrets, so it is never written to disk)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ..core.layout import BOTH, ENV, EVAL
from ..core.procs import pid_alive
from ..core.session import RunSession
from . import manifest as mf
from .spawn import SpawnError, spawn
from .startup import CAN_COLLECT, NEVER, collect_stage, timeout_summary

POLL = 0.5
LAUNCH_LOG = "gymwatch-launch.log"


def log(run_dir: Path, text: str) -> None:
    stamp = time.strftime("%H:%M:%S")
    with open(run_dir / LAUNCH_LOG, "a", encoding="utf-8") as fh:
        for line in text.splitlines():
            fh.write(f"{stamp} {line}\n")


def _parent(manifest: dict) -> dict:
    for p in manifest.get("processes") or []:
        if isinstance(p, dict) and p.get("role") in (ENV, BOTH):
            return p
    return {}


def drive(run_dir: Path, plan: dict) -> int:
    manifest = mf.load(run_dir)
    parent = _parent(manifest)
    head = str(manifest.get("head") or mf.DEFAULT_HEAD)
    timeout = plan.get("startup_timeout")
    created_at = float(manifest.get("created") or time.time())
    session = RunSession.open(str(run_dir), check_processes=False)
    timed_out, all_ready_at = False, None
    while True:
        session.poll()
        state = session.state
        if state.parent.all_ready is not None and all_ready_at is None:
            all_ready_at = time.time()
            log(run_dir, f"all servers ready after {all_ready_at - created_at:.0f}s")
        stage, why = collect_stage(state, head, time.time() - (all_ready_at or time.time()))
        if stage == CAN_COLLECT:
            if plan.get("eval_argv"):
                log(run_dir, f"ready to collect after {time.time() - created_at:.0f}s: {why}")
            break
        gone = not pid_alive(parent.get("pid") or -1, parent.get("create_time"))
        if stage == NEVER or gone:
            session.poll(final=True)
            what = why if stage == NEVER else (
                "gym ended before all servers were ready" if state.parent.all_ready is None
                else f"gym ended before the run was ready to collect ({why})")
            log(run_dir, what + ("; gym eval run not started" if plan.get("eval_argv") else ""))
            return 1
        if timeout and not timed_out and time.time() - created_at > timeout:
            timed_out = True
            log(run_dir, timeout_summary(state, time.time() - created_at, why))
            if plan.get("kill_on_timeout"):
                from .stop import stop_run
                log(run_dir, "--kill-on-timeout: stopping the run")
                stop_run(run_dir, say=lambda s: log(run_dir, s))
                return 2
        time.sleep(POLL)
    argv = plan.get("eval_argv")
    if not argv:
        return 0
    try:
        entry = spawn(EVAL, argv, run_dir, Path(plan["cwd"]), dict(os.environ))
    except SpawnError as exc:
        log(run_dir, f"cannot start gym eval run: {exc}")
        return 1
    mf.set_process(run_dir, entry)
    log(run_dir, f"started gym eval run (pid {entry['pid']})")
    return 0


def main(argv: list[str]) -> int:
    run_dir = Path(argv[0])
    plan = json.loads(sys.stdin.read() or "{}")
    try:
        return drive(run_dir, plan)
    except Exception as exc:  # noqa: BLE001 - detached: leave a trace in the launch log
        log(run_dir, f"driver error: {type(exc).__name__}: {exc}")
        return 3


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

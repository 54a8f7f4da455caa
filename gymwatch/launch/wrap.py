"""A tiny parent for one gym process: records its pid, then its exit code, in a status file.

Run as `python -m gymwatch.launch.wrap STATUS_FILE -- argv...` in its own session
(the launcher's start_new_session), so gym stays in the same process group. It
survives gymwatch being killed, forwards SIGTERM/SIGINT/SIGHUP to gym, and only
writes `returncode` once gym has ended (negative: killed by that signal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def write_status(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m gymwatch.launch.wrap STATUS_FILE -- argv...", file=sys.stderr)
        return 2
    status_path, cmd = argv[0], argv[2:]
    try:
        child = subprocess.Popen(cmd)
    except OSError as exc:
        write_status(status_path, {"pid": None, "returncode": 127, "error": str(exc), "ended": time.time()})
        print(f"gymwatch: cannot start {cmd[0]}: {exc}", file=sys.stderr)
        return 127

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    info = {"pid": child.pid, "wrapper_pid": os.getpid(), "started": time.time()}
    write_status(status_path, info)
    while True:
        try:
            rc = child.wait()
            break
        except InterruptedError:
            continue
    info.update(returncode=rc, ended=time.time())
    write_status(status_path, info)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

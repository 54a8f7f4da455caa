"""Shared bits of the benchmarks: rows, subprocess measurement, percentiles."""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable


def row(name: str, value: Any, baseline: Any, ratio: Optional[float], target: str,
        ok: Optional[bool] = None, note: str = "") -> dict:
    """One line of the table. `ratio` = value / baseline (both measured in this run)."""
    out = {"name": name, "value": value, "baseline": baseline, "ratio": ratio, "target": target}
    if ok is not None:
        out["ok"] = ok
    if note:
        out["note"] = note
    return out


def skipped(name: str, why: str, target: str = "") -> dict:
    return row(name, "not measured", "", None, target, None, why)


def installed_copy(dest: Path) -> Path:
    """A copy of the gymwatch package under `dest` with its bytecode compiled, as `pip install`
    leaves it; a child run with `cwd=dest` imports it. This machine sets PYTHONDONTWRITEBYTECODE,
    so the repo's editable gymwatch is compiled from source at each start (~0.05 s), while the
    baselines' standard library has its bytecode."""
    shutil.copytree(REPO / "gymwatch", dest / "gymwatch", ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(dest / "gymwatch", quiet=1)
    return dest


@dataclass
class Proc:
    wall: float        # seconds
    cpu: float         # user + sys seconds
    maxrss_mb: float   # peak resident set size (VmHWM; nan when the child died before atexit)
    code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False


def run_measured(args: list[str], stdout_path: Optional[Path] = None, timeout: float = 600,
                 env: Optional[dict] = None, cwd: Optional[Path] = None) -> Proc:
    """Run a Python child (`args` = [PY, "-m", MOD, ...] or [PY, "-c", CODE, ...]) and measure it:
    wall, CPU (its own rusage via os.wait4) and peak RSS (its VmHWM, see _hwm.py)."""
    out = open(stdout_path, "wb") if stdout_path else subprocess.PIPE
    e = dict(os.environ)
    e.setdefault("PYTHONPATH", str(REPO))
    if env:
        e.update(env)
    fd, hwm_path = tempfile.mkstemp(prefix="gymwatch-hwm-")
    os.close(fd)
    e["GYMWATCH_BENCH_HWM"] = hwm_path
    if args[0] == PY and args[1] in ("-m", "-c"):
        args = [PY, "-m", "benchmarks._hwm", *args[1:]]
    t0 = time.perf_counter()
    p = subprocess.Popen(args, stdout=out, stderr=subprocess.PIPE, env=e, cwd=str(cwd or REPO))
    try:
        stdout, stderr, timed_out = _communicate(p, timeout)
        if timed_out:
            p.kill()
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        if stdout_path:
            out.close()
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    try:
        with open(hwm_path, encoding="ascii") as fh:
            rss = float(fh.read().strip() or "nan")
    except (OSError, ValueError):
        rss = float("nan")
    finally:
        os.unlink(hwm_path)
    return Proc(wall, ru.ru_utime + ru.ru_stime, rss, code, stdout or b"", stderr or b"", timed_out)


def _communicate(p: subprocess.Popen, timeout: float) -> tuple[bytes, bytes, bool]:
    # Read the pipes without reaping the child (os.wait4 does that, to get its rusage).
    import selectors

    sel = selectors.DefaultSelector()
    bufs: dict[int, list[bytes]] = {}
    for f in (p.stdout, p.stderr):
        if f is not None:
            sel.register(f, selectors.EVENT_READ)
            bufs[f.fileno()] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    while sel.get_map():
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        for key, _ in sel.select(min(left, 1.0)):
            chunk = os.read(key.fd, 1 << 16)
            if not chunk:
                sel.unregister(key.fileobj)
            else:
                bufs[key.fd].append(chunk)
    out = b"".join(bufs.get(p.stdout.fileno(), [])) if p.stdout else b""
    err = b"".join(bufs.get(p.stderr.fileno(), [])) if p.stderr else b""
    return out, err, timed_out


def child_json(module: str, *args: str, timeout: float = 600,
               installed: Optional[Path] = None) -> tuple[dict, Proc]:
    """Run `python -m benchmarks.<module> ARGS` that prints JSON objects on stdout; the last one
    counts. A child killed at `timeout` gives its last line so far, with "timed_out": true.
    `installed`: an `installed_copy`, the child's cwd: it imports gymwatch from there."""
    proc = run_measured([PY, "-m", f"benchmarks.{module}", *args], timeout=timeout,
                        env={"TEXTUAL_ANIMATIONS": "none"}, cwd=installed)
    lines = [ln for ln in proc.stdout.decode("utf-8", "replace").splitlines() if ln.startswith("{")]
    if proc.timed_out and lines:
        return {**json.loads(lines[-1]), "timed_out": True}, proc
    if proc.code != 0 or not lines:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{module} exited {proc.code}: {' | '.join(tail) or 'no output'}")
    return json.loads(lines[-1]), proc


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(q / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def fmt_s(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def fmt_mb(x: float) -> str:
    return f"{x:.0f} MB"

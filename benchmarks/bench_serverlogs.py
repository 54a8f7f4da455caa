"""Reading server logs: the report's read and the live screen's catch-up, vs a bare line loop.

The log is what a long-running Gym server writes (tests/fixtures' server logs, scaled): after its
start lines, `(policy_model) `-prefixed uvicorn access lines, Ray-style lines with timestamps
(`[2026-12-01 06:36:06,330 I 12 34] ...` and `2026-12-01 06:36:06,330\\tINFO worker.py:...`),
rare warnings, model retries and a traceback now and then.

Baseline: a bare Python loop over the same file (text mode, as the report reads text) that tests
each line for two markers, its own process. Measured: `RunSession` over a run holding that log
(`read_run`, the report's path; and the live screen's budgeted polls, 0.1 s each, until nothing is
behind), each its own process, timed inside it (not its imports), best of two. Both children
report how many lines they saw, and gymwatch's model must know the log's last line and count
every traceback.

`python -m benchmarks.bench_serverlogs child MODE RUN` runs one measured child.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

from .common import PY, child_json, fmt_s, row, run_measured

FULL_MB, SMALL_MB = 256, 8
TARGET = 2.0          # x the bare loop
SERVER = "policy_model"
START = [
    "Connecting to Ray cluster at specified address: 127.0.0.1:39603",
    "2026-12-01 06:00:00,100\tINFO worker.py:1841 -- Connecting to existing Ray cluster at address: 127.0.0.1:39603...",
    f"({SERVER}) Disabling a uvicorn access logging so that the logs aren't spammed with 200 OK messages.",
    f"({SERVER}) INFO:     Started server process [4242]",
    f"({SERVER}) INFO:     Waiting for application startup.",
    f"({SERVER}) INFO:     Application startup complete.",
    f"({SERVER}) INFO:     Uvicorn running on http://127.0.0.1:12907 (Press CTRL+C to quit)",
]
TRACEBACK = [f"({SERVER}) Traceback (most recent call last):",
             f'({SERVER})   File "/venv/lib/python3.13/site-packages/aiohttp/client.py", line 1234, in _request',
             f"({SERVER})     raise ClientResponseError(",
             f"({SERVER}) aiohttp.client_exceptions.ClientResponseError: 500, message='Internal Server Error'"]
BASELINE = ("import sys, time\n"
            "t = time.perf_counter(); n = hits = 0\n"
            "with open(sys.argv[1], encoding='utf-8', errors='replace') as fh:\n"
            "    for line in fh:\n"
            "        n += 1\n"
            "        if 'Traceback' in line or 'ERROR' in line:\n"
            "            hits += 1\n"
            "print('{\"seconds\": %r, \"lines\": %d, \"hits\": %d}' % (time.perf_counter() - t, n, hits))\n")


def _block(rng: random.Random, n: int, clock: list[int]) -> tuple[str, int]:
    out, tracebacks = [], 0
    for i in range(n):
        clock[0] += rng.randint(1, 40)
        ms = clock[0]
        ts = f"2026-12-01 {6 + ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"
        r = rng.random()
        if r < 0.62:
            line = (f'({SERVER}) INFO:     127.0.0.1:{40000 + i % 20000} - "POST /v1/responses HTTP/1.1" '
                    f'200 OK')
        elif r < 0.87:
            line = (f"({SERVER}) [{ts} I {1000 + i % 50} {2000 + i % 70}] core_worker.cc:{100 + i % 900}: "
                    f"task {i:x} finished in {rng.random():.3f}s, {rng.randint(1, 900)} objects")
        elif r < 0.97:
            line = f"{ts}\tINFO worker.py:{i % 2000} -- placement group {i:x} ready for actor {rng.randint(1, 9999)}"
        elif r < 0.995:
            line = (f"({SERVER}) /venv/lib/python3.13/site-packages/vllm/x.py:{i % 400}: UserWarning: "
                    f"Standard error is 0 for task {i}")
        elif r < 0.9995:
            line = (f"({SERVER}) [model_retry url=http://127.0.0.1:18999/v1/responses status=500 "
                    f"kind=http_error try={i % 3 + 1} max_tries=3]")
        else:
            out.extend(TRACEBACK)
            tracebacks += 1
            continue
        out.append(line)
    return "".join(ln + "\n" for ln in out), tracebacks


def make_run(root: Path, megabytes: int) -> dict:
    """A run dir with `logs/policy_model.log` of about `megabytes` MB; what it holds."""
    logs = root / "logs"
    logs.mkdir(parents=True)
    rng, clock = random.Random(16), [0]
    path = logs / f"{SERVER}.log"
    size, lines, tracebacks = 0, len(START), 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("".join(ln + "\n" for ln in START))
        while size < megabytes << 20:
            text, tb = _block(rng, 20_000, clock)
            fh.write(text)
            size += len(text)
            lines += text.count("\n")
            tracebacks += tb
        last = f"({SERVER}) INFO:     127.0.0.1:1 - \"POST /v1/responses HTTP/1.1\" 200 OK  (the last line)"
        fh.write(last + "\n")
    (root / "gym_env_start.stdout.log").write_text("Waiting for servers to spin up\nAll 1 / 1 servers ready! Polling every 60s\n")
    return {"log": str(path), "bytes": path.stat().st_size, "lines": lines + 1, "tracebacks": tracebacks,
            "last": last[len(SERVER) + 3:]}


def child(mode: str, run: str) -> None:
    from gymwatch.core.session import RunSession

    t = time.perf_counter()
    session = RunSession.open(run, check_processes=False)
    polls = 1
    if mode == "live":
        session.poll(budget=0.1)
        while session.behind:
            session.poll(budget=0.1)
            polls += 1
    else:
        session.poll(final=True)
    took = time.perf_counter() - t
    s = session.state.servers[SERVER]
    tail = session.tailers[next(p for p in session.tailers if p.name == f"{SERVER}.log")]
    print(json.dumps({"seconds": took, "lines": tail.lineno, "last": s.last_line, "errors": s.error_count,
                      "polls": polls}))


def _best(fn, n: int = 2) -> dict:
    return min((fn() for _ in range(n)), key=lambda d: d["seconds"])


def run(small: bool) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="gymwatch-bench-logs-") as tmp:
        root = Path(tmp) / "run"
        g = make_run(root, SMALL_MB if small else FULL_MB)

        def bare() -> dict:
            p = run_measured([PY, "-c", BASELINE, g["log"]])
            return json.loads(p.stdout.decode().strip().splitlines()[-1])

        base = _best(bare)
        got = {mode: _best(lambda mode=mode: child_json("bench_serverlogs", "child", mode, str(root))[0])
               for mode in ("report", "live")}
    size = f"{g['bytes'] / 2**20:.0f} MB, {g['lines'] / 1e6:.2f}M lines"
    out = []
    for mode, label in (("report", "the report's read"), ("live", "live catch-up, 0.1 s polls")):
        d = got[mode]
        wrong = [what for what, ok in (("lines", d["lines"] == g["lines"] == base["lines"]),
                                       ("last line", d["last"] == g["last"]),
                                       ("tracebacks", d["errors"] >= g["tracebacks"])) if not ok]
        ratio = d["seconds"] / base["seconds"]
        note = (f"{g['bytes'] / 2**20 / d['seconds']:.0f} MB/s; baseline {g['bytes'] / 2**20 / base['seconds']:.0f} "
                f"MB/s" + (f"; {d['polls']} polls" if mode == "live" else "")
                + (f"; WRONG: {', '.join(wrong)}" if wrong else ""))
        out.append(row(f"server logs: {label} ({size})", fmt_s(d["seconds"]), fmt_s(base["seconds"]),
                       round(ratio, 2), f"<= {TARGET:g}x", ratio <= TARGET and not wrong, note))
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        for r in run("--small" in sys.argv):
            print(r)

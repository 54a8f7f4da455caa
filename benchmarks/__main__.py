"""`python -m benchmarks [--small] [--record]`: generate inputs, measure, print the table.

Every figure is a ratio against a baseline measured in the same run. Inputs live in a temp
dir that is removed after; nothing is written into the repo unless `--record`, which rewrites
the table in benchmarks/README.md (between the BEGIN/END markers).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from . import bench_idle, bench_ingest, bench_live, bench_screen
from .common import REPO, skipped
from .gen import make_run

README = Path(__file__).resolve().parent / "README.md"
BEGIN, END = "<!-- BEGIN TABLE -->", "<!-- END TABLE -->"
OTHERS = (("bench_serverlogs", "server logs"), ("bench_logindex", "log index"), ("bench_browse", "browse"),
          ("bench_diff", "diff"), ("bench_charts", "charts"))


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def table(rows: list[dict]) -> str:
    head = ["figure", "value", "baseline", "ratio", "target", "met", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratio = r.get("ratio")
        cells = [r.get("name", ""), _fmt(r.get("value")), _fmt(r.get("baseline")),
                 f"{ratio:.2f}x" if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) else _fmt(ratio),
                 _fmt(r.get("target")), _fmt(r.get("ok")), _fmt(r.get("note"))]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def machine(cmd: str) -> str:
    return (f"Machine: {os.cpu_count()} CPUs (nproc), {platform.machine()}, Python {platform.python_version()}, "
            f"load average at start {os.getloadavg()[0]:.1f}; date {datetime.datetime.now():%Y-%m-%d %H:%M}; "
            f"command `{cmd}`.")


def record(text: str) -> None:
    old = README.read_text(encoding="utf-8") if README.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in old or END not in old:
        old = old.rstrip("\n") + f"\n\n{BEGIN}\n{END}\n"
    a, rest = old.split(BEGIN, 1)
    _, b = rest.split(END, 1)
    README.write_text(f"{a}{BEGIN}\n{text}\n{END}{b}", encoding="utf-8")


def _others(small: bool) -> list[dict]:
    out = []
    for mod, label in OTHERS:
        try:
            m = importlib.import_module(f"benchmarks.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name == f"benchmarks.{mod}":
                out.append(skipped(f"{label}: benchmarks/{mod}.py", "not there yet"))
                continue
            out.append(skipped(f"{label}: benchmarks/{mod}.py", f"import failed: {exc}"))
            continue
        try:
            out.extend(m.run(small))
        except Exception as exc:  # noqa: BLE001 - one broken section does not hide the others
            out.append(skipped(f"{label}: benchmarks/{mod}.py", f"{type(exc).__name__}: {exc}"[:200]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="small inputs: a quick smoke run (figures not meaningful)")
    ap.add_argument("--record", action="store_true", help="rewrite the table in benchmarks/README.md")
    ap.add_argument("--only", action="append", choices=("ingest", "live", "screen", "idle", "others"),
                    help="run only these sections (repeatable)")
    args = ap.parse_args(argv)
    only = set(args.only or ("ingest", "live", "screen", "idle", "others"))
    cmd = "python -m benchmarks" + (" --small" if args.small else "") + "".join(f" --only {o}" for o in args.only or ())
    header = machine(cmd)
    print(header, file=sys.stderr, flush=True)
    rows: list[dict] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gymwatch-bench-") as tmp:
        big = None
        if only & {"ingest", "screen"}:
            n = bench_ingest.SMALL_ROWS if args.small else bench_ingest.FULL_ROWS
            big = make_run(Path(tmp) / "run", n)
        sections = [("ingest", lambda: bench_ingest.run(args.small, big)),
                    ("live", lambda: bench_live.run(args.small)),
                    ("screen", lambda: bench_screen.run(args.small, big.root if big else None, big.rows if big else 0)),
                    ("idle", lambda: bench_idle.run(args.small)),
                    ("others", lambda: _others(args.small))]
        for name, fn in sections:
            if name not in only:
                continue
            print(f"... {name}", file=sys.stderr, flush=True)
            try:
                rows.extend(fn())
            except Exception as exc:  # noqa: BLE001
                rows.append(skipped(name, f"{type(exc).__name__}: {exc}"[:200]))
    text = f"{header}\n\n{table(rows)}\n\n(total {time.perf_counter() - t0:.0f} s)"
    print(text, flush=True)
    if args.record:
        record(text)
        print(f"\nrecorded in {README.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run a Python target and write its peak RSS (VmHWM) to $GYMWATCH_BENCH_HWM at exit.

`ru_maxrss` of a child is no good here: on Linux a child started by a big parent (subprocess
uses vfork) inherits the parent's high-water mark. VmHWM is the child's own address space.

    python -m benchmarks._hwm -m gymwatch report RUN --format json
    python -m benchmarks._hwm -c CODE ARGS...
"""

from __future__ import annotations

import atexit
import os
import runpy
import sys


def vm_hwm_mb() -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _write() -> None:
    path = os.environ.get("GYMWATCH_BENCH_HWM")
    if path:
        with open(path, "w", encoding="ascii") as fh:
            fh.write(f"{vm_hwm_mb():.1f}\n")


def main() -> None:
    atexit.register(_write)
    how, target, *rest = sys.argv[1:]
    if how == "-m":
        sys.argv = [target, *rest]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    elif how == "-c":
        sys.argv = ["-c", *rest]
        exec(compile(target, "<bench>", "exec"), {"__name__": "__main__"})
    else:
        raise SystemExit(f"usage: python -m benchmarks._hwm -m MODULE ARGS | -c CODE ARGS (got {how})")


if __name__ == "__main__":
    main()

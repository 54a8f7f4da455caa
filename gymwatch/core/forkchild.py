"""A forked helper child: part of the work of a process that does nothing else meanwhile (no
threads), done on another core with everything already imported (core/rowsfork.py, the JSON
report's writer, the runs browser's workers)."""

from __future__ import annotations

import os
from typing import Callable


def fork_child(work: Callable[[], object]) -> int:
    """The pid of a forked child that runs `work` and leaves by `os._exit` only: status 0 when
    `work` returned, 1 when it raised. No atexit handler runs in it and no buffer it inherited is
    flushed a second time. OSError when the fork failed."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        work()
        code = 0
    finally:
        os._exit(code)

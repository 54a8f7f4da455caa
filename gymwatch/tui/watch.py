"""Change hints for the live screen: watchfiles over the run's dirs, or a queue in tests.

A change source is a callable `paths -> async iterator`; every item it yields (even an
empty one) makes the app poll the session. Events are hints only: the session re-reads
each file from its byte offset, so a missed or coalesced event costs nothing but latency.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import AsyncIterator, Callable, Optional

ChangeSource = Callable[[list[Path]], AsyncIterator[object]]
NETWORK_FS = {"nfs", "nfs4", "lustre", "gpfs", "cifs", "smbfs", "smb3", "9p", "ceph", "glusterfs"}
DEBOUNCE_MS = 150
RUST_TIMEOUT_MS = 250     # with yield_on_timeout: wake at least ~4 times a second
POLL_DELAY_MS = 250
POLLING = "polling"       # what `describe()` says of a watcher that polls (the summary says it too)


def fs_type(path: Path) -> str:
    """The filesystem type of the mount holding `path` ("" when unknown)."""
    try:
        import psutil
        parts = psutil.disk_partitions(all=True)
    except Exception:   # noqa: BLE001 - no psutil or no /proc: assume local
        return ""
    real = os.path.realpath(path)
    best, kind = "", ""
    for p in parts:
        mp = p.mountpoint.rstrip("/") or "/"
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
            best, kind = mp, p.fstype
    return kind


def is_network_fs(kind: str) -> bool:
    k = kind.lower()
    return k in NETWORK_FS or k.startswith(("smb", "fuse", "nfs"))


def needs_polling(paths: list[Path]) -> bool:
    return any(is_network_fs(fs_type(p)) for p in paths)


def watchfiles_source(force_polling: bool = False) -> ChangeSource:
    """awatch over `paths` (recursive), polling on network filesystems or when forced."""

    async def source(paths: list[Path]) -> AsyncIterator[object]:
        from watchfiles import awatch

        polling = force_polling or needs_polling(paths)
        async for changes in awatch(*paths, debounce=DEBOUNCE_MS, rust_timeout=RUST_TIMEOUT_MS,
                                    yield_on_timeout=True, force_polling=polling,
                                    poll_delay_ms=POLL_DELAY_MS, recursive=True):
            yield changes

    source.polling = force_polling   # type: ignore[attr-defined]
    return source


def queue_source(queue: "asyncio.Queue[object]") -> ChangeSource:
    """Tests: every item put on the queue is one change hint."""

    async def source(paths: list[Path]) -> AsyncIterator[object]:
        while True:
            yield await queue.get()

    return source


def describe(source: ChangeSource, paths: list[Path]) -> str:
    forced: Optional[bool] = getattr(source, "polling", None)
    if forced is None:
        return "hints: injected"
    return POLLING if forced or needs_polling(paths) else "inotify"

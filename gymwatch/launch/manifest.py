"""The run manifest (`gymwatch-manifest.json`): written atomically before the screen opens,
updated (under a lock) when a planned process starts. Read by core/layout.py."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import time
from pathlib import Path
from typing import Iterator, Optional

from ..core.layout import MANIFEST_NAME
from .spawn import MARKER_VAR

VERSION = 1
DEFAULT_HEAD = "127.0.0.1:11000"


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


def manifest_path(run_dir: Path) -> Path:
    return run_dir / MANIFEST_NAME


def build(run_id: str, gym_version: str, head: str, output: Optional[Path], logs_dir: Optional[Path],
          log_offsets: dict[str, int], extra: Optional[dict] = None) -> dict:
    data = {
        "version": VERSION, "run_id": run_id, "created": time.time(), "gym_version": gym_version,
        "head": head,
        "files": {"output": str(output) if output else None, "logs_dir": str(logs_dir) if logs_dir else None},
        "processes": [], "log_offsets": log_offsets, "marker": f"{MARKER_VAR}={run_id}",
    }
    data.update(extra or {})
    return data


def write(run_dir: Path, data: dict) -> None:
    path = manifest_path(run_dir)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def load(run_dir: Path) -> dict:
    path = manifest_path(run_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{run_dir}: no readable {MANIFEST_NAME} ({exc})") from None
    if not isinstance(data, dict) or not data.get("run_id"):
        raise ValueError(f"{path}: not a gymwatch manifest")
    return data


@contextlib.contextmanager
def editing(run_dir: Path) -> Iterator[dict]:
    """Read-modify-write the manifest under an exclusive lock."""
    with open(run_dir / ".gymwatch-manifest.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = load(run_dir)
        yield data
        write(run_dir, data)


def set_process(run_dir: Path, entry: dict) -> None:
    """Replace the entry of the same role (a planned one) or append."""
    with editing(run_dir) as data:
        procs = data.setdefault("processes", [])
        for i, p in enumerate(procs):
            if isinstance(p, dict) and p.get("role") == entry["role"]:
                procs[i] = entry
                break
        else:
            procs.append(entry)


def log_offsets(logs_dir: Optional[Path]) -> dict[str, int]:
    """Where this run begins in each `<server>.log` of a reused +nemo_gym_log_dir."""
    out: dict[str, int] = {}
    if logs_dir is None or not logs_dir.is_dir():
        return out
    for entry in os.scandir(logs_dir):
        if entry.name.endswith(".log") and entry.is_file():
            out[entry.name[:-4]] = entry.stat().st_size
    return out

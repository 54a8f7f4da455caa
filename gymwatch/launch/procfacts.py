"""Per-server process facts from psutil: alive, CPU, RSS, children, and installing (a live
`uv pip install` below it). Gym's server wrappers carry NEMO_GYM_CONFIG_PATH=<server name>."""

from __future__ import annotations

import re
from typing import Optional

import psutil

from ..core.layout import BOTH, ENV
from ..core.procs import pid_alive

_NAME_RE = re.compile(r"NEMO_GYM_CONFIG_PATH='?([\w.\-/]+)")


def _server_name(p: psutil.Process) -> Optional[str]:
    try:
        m = _NAME_RE.search(" ".join(p.cmdline()))
        if m:
            return m.group(1)
        return p.environ().get("NEMO_GYM_CONFIG_PATH")
    except (psutil.Error, OSError):
        return None


def _installing(procs: list[psutil.Process]) -> bool:
    for p in procs:
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        words = [c.rsplit("/", 1)[-1] for c in cmd[:6]]
        if "uv" in words and "pip" in cmd and "install" in cmd:   # uv itself, or a stand-in naming it
            return True
    return False


def facts(proc: psutil.Process, interval: Optional[float] = None) -> dict:
    """alive / cpu_percent / rss / children / installing for one server process tree."""
    try:
        kids = proc.children(recursive=True)
        tree = [proc, *kids]
        rss = 0
        cpu = 0.0
        for p in tree:
            try:
                rss += p.memory_info().rss
                cpu += p.cpu_percent(interval)
            except psutil.Error:
                continue
        return {"pid": proc.pid, "alive": True, "cpu_percent": round(cpu, 1), "rss": rss,
                "children": len(kids), "installing": _installing(tree)}
    except psutil.Error:
        return {"pid": proc.pid, "alive": False}


def server_processes(manifest: dict) -> dict[str, dict]:
    """Facts for each server started by the run's gym parent, keyed by server name."""
    out: dict[str, dict] = {}
    for e in manifest.get("processes") or []:
        if not isinstance(e, dict) or e.get("role") not in (ENV, BOTH) or not isinstance(e.get("pid"), int):
            continue
        if not pid_alive(e["pid"], e.get("create_time")):
            continue
        try:
            children = psutil.Process(e["pid"]).children()
        except psutil.Error:
            continue
        for child in children:
            name = _server_name(child)
            if name:
                out[name] = facts(child)
    return out


def fill(reducer, manifest: Optional[dict]) -> None:
    """Hand each server's process facts to the reducer (it records `Server.process`)."""
    if manifest:
        reducer.process_facts(server_processes(manifest))

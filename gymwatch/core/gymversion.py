"""Which Gym version wrote a run, from what the run itself shows (docs/gym-formats.md, "Telling
the version"), and the version-dependent defaults gymwatch needs (Gym's spin-up limit).

Exact when something names the version: the manifest of a run gymwatch launched, uv's package
list of a cold venv build (` + nemo-gym==0.7.0`), or Gym's own install beside a `site-packages`
path the run's config names. Otherwise a range bounded by features of the output; no single
feature decides.
"""

from __future__ import annotations

import glob
import os
from typing import Optional

from . import gymlines as gl
from .model import K_AGENT, K_ENVIRONMENT, RunState

Version = tuple[int, int]
KNOWN_FIRST, KNOWN_LAST = (0, 4), (0, 7)     # the Gym versions gymwatch knows the output of

# sign -> (first version whose output has it, last version whose output has it, in words)
SIGNS: dict[str, tuple[Optional[Version], Optional[Version], str]] = {
    "launch_line": ((0, 7), None, "`Starting X from venv` lines"),
    "venv_lock": ((0, 7), None, "venv setup locks"),
    "pool_capacity": ((0, 7), None, "aiohttp pool capacity lines"),
    "spinup_limit": ((0, 7), None, "a spin-up limit"),
    "route_failures": ((0, 7), None, "route_failures_to_sidecar"),
    "task_latency": ((0, 7), None, "per-task latency lines"),
    "access_log_off": ((0, 6), None, "access logging turned off"),
    "found_progress": ((0, 6), None, "`Found N / M rollouts` progress"),
    "health_check": ((0, 6), None, "Gym's rollout health check"),
    "endpoint_wait": ((0, 5), None, "a model-endpoint wait"),
    "server_access_log": (None, (0, 5), "servers' access-log lines"),
    "no_launch_line": (None, (0, 6), "no `Starting X from venv` lines"),
}
SPINUP_DEFAULT = 600.0          # server_spinup_timeout_seconds when not set (Gym 0.7+)
SPINUP_FROM = (0, 7)


def version(state: RunState) -> tuple[str, str]:
    """(version, what it is based on): "0.7.0", or a range like "0.6+" / "0.4-0.5"; ("", why)
    when nothing tells."""
    exact = _exact(state)
    if exact is not None:
        return exact
    lo, hi, basis = bounds(state)
    if lo is None and hi is None:
        return "", "nothing in the run's output names or bounds its Gym version"
    if hi is not None and lo is not None and lo > hi:
        hi = None        # the signs disagree: trust the features that only newer versions have
    return _range(lo, hi), "from its output: " + ", ".join(basis)


def bounds(state: RunState) -> tuple[Optional[Version], Optional[Version], list[str]]:
    lo: Optional[Version] = None
    hi: Optional[Version] = None
    basis = []
    for name, ev in sorted(state.gym_signs.items(), key=lambda kv: kv[0]):
        if name not in SIGNS:
            continue
        first, last, words = SIGNS[name]
        if first is not None and (lo is None or first > lo):
            lo = first
        if last is not None and (hi is None or last < hi):
            hi = last
        basis.append(f"{words} ({ev.where()})")
    kinds = {s.kind for s in state.servers.values()}
    if K_ENVIRONMENT in kinds:
        lo = max(lo or (0, 7), (0, 7))
        basis.append("environment servers")
    elif K_AGENT in kinds and state.parent.all_ready is not None:
        hi = min(hi or (0, 6), (0, 6))     # from 0.7 every agent comes with an environment server
        basis.append("agents without environment servers")
    return lo, hi, basis


def _exact(state: RunState) -> Optional[tuple[str, str]]:
    info = state.info
    if info.gym_version and info.gym_version != "unknown":
        return info.gym_version, "recorded when gymwatch launched the run"
    ev = state.gym_signs.get("package")
    if ev is not None:
        m = gl.GYM_PACKAGE_RE.match(gl.split_prefix(ev.text)[1])
        if m:
            return m.group(1), f"uv's package list at {ev.where()}"
    if info.gym_site:
        hits = sorted(glob.glob(os.path.join(glob.escape(info.gym_site), "nemo_gym-*.dist-info")))
        if hits:
            name = os.path.basename(hits[-1])
            return name[len("nemo_gym-"):-len(".dist-info")], f"Gym's install at {info.gym_site}"
    return None


def _range(lo: Optional[Version], hi: Optional[Version]) -> str:
    first = lo or KNOWN_FIRST
    if hi is None:
        return f"{_v(first)}+"
    return _v(first) if first == hi else f"{_v(first)}-{_v(hi)}"


def _v(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def at_least(state: RunState, v: Version) -> Optional[bool]:
    """Whether the run's Gym is at least `v`: True / False, or None when unknown."""
    exact = _exact(state)
    if exact is not None:
        try:
            major, minor = (int(x) for x in exact[0].split(".")[:2])
        except ValueError:
            return None
        return (major, minor) >= v
    lo, hi, _ = bounds(state)
    if lo is not None and lo >= v:
        return True
    if hi is not None and hi < v and (lo is None or lo <= hi):
        return False
    return None


def spinup_limit(state: RunState) -> Optional[float]:
    """Gym's spin-up limit in seconds: as configured, else Gym's default for its version; None
    when there is none (before 0.7, or set to 0)."""
    configured = state.info.spinup_limit
    if configured is not None:
        return configured if configured > 0 else None
    return SPINUP_DEFAULT if at_least(state, SPINUP_FROM) else None

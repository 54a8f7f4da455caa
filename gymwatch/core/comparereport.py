"""Gym's own comparison of two runs: `gym eval compare`'s `compare_report.json` (Gym 0.7+;
docs/gym-formats.md, "Gym's comparison of two runs").

Gym writes it into the candidate run's directory by default; it compares the runs' aggregate
metrics files, not their trials. gymwatch reads the few figures it can set beside its own: the
mean reward of each side and Gym's interval for their difference, and the tasks Gym calls
flipped. Everything else in the file is left alone.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

REPORT_FILE = "compare_report.json"
MEAN_REWARD = "mean/reward"
MAX_REPORT_BYTES = 64 << 20


class BadReport(Exception):
    """The file cannot be used: the message says why in a few words."""


@dataclass(frozen=True)
class GymFlips:
    mode: str                                   # binary / continuous / unavailable
    reason: str
    common_tasks: int
    baseline_only_tasks: int
    candidate_only_tasks: int
    pass_to_fail: tuple[int, ...]
    fail_to_pass: tuple[int, ...]
    changed: tuple[int, ...]                    # continuous mode: every task whose mean moved
    scores: dict[int, tuple[float, float]]      # each listed task's baseline / candidate mean
    tied: Optional[int]
    unchanged: Optional[int]


@dataclass(frozen=True)
class GymComparison:
    """One agent's block (`comparisons[]`), the candidate being the first (and in 0.7, only) one."""
    baseline_agent: str
    candidate_agent: str
    baseline_mean: Optional[float]
    candidate_mean: Optional[float]
    delta: Optional[float]
    delta_interval: Optional[tuple[float, float]]
    flips: Optional[GymFlips]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class GymCompareReport:
    path: str
    schema_version: str
    nemo_gym_version: str
    generated_at: str
    baseline: str                               # the rollouts files as Gym named them
    candidate: str
    candidates: int
    comparisons: tuple[GymComparison, ...]
    warnings: tuple[str, ...]


def beside(dirs: list[Path]) -> list[Path]:
    """The reports in these directories (each once)."""
    out: list[Path] = []
    for d in dirs:
        p = d / REPORT_FILE
        if p not in out and p.is_file():
            out.append(p)
    return out


def read(path: Path) -> GymCompareReport:
    """Raises BadReport when the file cannot be read as a comparison of two runs."""
    try:
        if os.path.getsize(path) > MAX_REPORT_BYTES:
            raise BadReport(f"larger than {MAX_REPORT_BYTES >> 20} MB")
        obj = json.loads(path.read_bytes())
    except OSError as exc:
        raise BadReport(exc.strerror or type(exc).__name__) from None
    except ValueError as exc:
        raise BadReport(f"invalid JSON ({str(exc)[:80]})") from None
    except RecursionError:
        raise BadReport("nested too deep to read") from None
    if not isinstance(obj, dict):
        raise BadReport("not a JSON object")
    baseline, candidates = _dict(obj.get("baseline")), obj.get("candidates")
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
        raise BadReport("no candidate run (candidates[])")
    base_path, cand_path = _str(baseline.get("rollouts_jsonl_fpath")), _str(candidates[0].get("rollouts_jsonl_fpath"))
    if not base_path or not cand_path:
        raise BadReport("the runs compared are not named (rollouts_jsonl_fpath)")
    return GymCompareReport(
        path=str(path), schema_version=_str(obj.get("schema_version")),
        nemo_gym_version=_str(obj.get("nemo_gym_version")), generated_at=_str(obj.get("generated_at")),
        baseline=base_path, candidate=cand_path, candidates=len(candidates),
        comparisons=tuple(_comparison(c) for c in _list(obj.get("comparisons")) if isinstance(c, dict)),
        warnings=tuple(w for w in _list(obj.get("warnings")) if isinstance(w, str)))


def _comparison(c: dict[str, Any]) -> GymComparison:
    row = next((r for r in _list(c.get("metrics")) if isinstance(r, dict) and r.get("metric") == MEAN_REWARD), {})
    base = _dict(row.get("baseline"))
    cands = _list(row.get("candidates"))
    cand = _dict(cands[0]) if cands else {}
    low, high = _num(cand.get("delta_ci_low")), _num(cand.get("delta_ci_high"))
    flips, agents = _list(c.get("flips")), _list(c.get("candidate_agents"))
    return GymComparison(
        baseline_agent=_str(c.get("baseline_agent")), candidate_agent=_str(agents[0]) if agents else "",
        baseline_mean=_shown(base), candidate_mean=_shown(cand), delta=_num(cand.get("delta")),
        delta_interval=(low, high) if low is not None and high is not None else None,
        flips=_flips(flips[0]) if flips and isinstance(flips[0], dict) else None,
        notes=tuple(n for n in _list(c.get("notes")) if isinstance(n, str)))


def _flips(f: dict[str, Any]) -> GymFlips:
    listed = [x for x in _list(f.get("flips")) if isinstance(x, dict) and _int(x.get("task_index")) is not None]

    def tasks(direction: str) -> tuple[int, ...]:
        return tuple(x["task_index"] for x in listed if x.get("direction") == direction)
    scores = {x["task_index"]: (b, c) for x in listed
              if (b := _num(x.get("baseline_score"))) is not None and (c := _num(x.get("candidate_score"))) is not None}
    return GymFlips(
        mode=_str(f.get("mode")) or "unavailable", reason=_str(f.get("reason")),
        common_tasks=_int(f.get("common_task_count")) or 0,
        baseline_only_tasks=_int(f.get("baseline_only_task_count")) or 0,
        candidate_only_tasks=_int(f.get("candidate_only_task_count")) or 0,
        pass_to_fail=tasks("pass_to_fail"), fail_to_pass=tasks("fail_to_pass"), changed=tasks("changed"),
        scores=scores, tied=_int(f.get("tied_count")), unchanged=_int(f.get("unchanged_count")))


def _shown(v: dict[str, Any]) -> Optional[float]:
    """The value Gym shows and takes its delta from: the mean across repeats when recorded."""
    across = _num(v.get("mean_across_repeats"))
    return across if across is not None else _num(v.get("value"))


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _str(x: Any) -> str:
    return x if isinstance(x, str) else ""


def _num(x: Any) -> Optional[float]:
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    return None


def _int(x: Any) -> Optional[int]:
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else None

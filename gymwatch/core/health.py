"""Gym's own rollout health check (Gym 0.6+): `rollout_verdicts.jsonl` and `quality_summary.json`,
written beside the rollouts after a finished collection (docs/gym-formats.md, "Gym's health check").

gymwatch shows Gym's verdict beside its own and says where they disagree; it never takes Gym's
verdict for its own: without observability every rollout is `unobserved`, never-ran ones included.
"""

from __future__ import annotations

import json
from typing import Optional, TypeGuard

from .model import H_HEALTHY, H_UNHEALTHY, HEALTH_VERDICTS, T_COMPLETED, T_FAILED, T_NEVER_RAN, GymHealth, HealthTotals
from .records import ROLLOUT_KEY, TASK_KEY, BadLine, load_object

VERDICTS_FILE = "rollout_verdicts.jsonl"
SUMMARY_FILE = "quality_summary.json"
MAX_CHECKS = 8


def verdict_row(raw: bytes) -> tuple[tuple[int, int], GymHealth]:
    """One line of rollout_verdicts.jsonl. Raises BadLine when it cannot be used."""
    obj = load_object(raw)
    task, rollout = obj.get(TASK_KEY), obj.get(ROLLOUT_KEY)
    if not _index(task) or not _index(rollout):
        raise BadLine(f"no usable {TASK_KEY} / {ROLLOUT_KEY}")
    verdict = obj.get("verdict")
    if verdict not in HEALTH_VERDICTS:
        raise BadLine(f"verdict is {_short(repr(verdict))}, not one of {', '.join(HEALTH_VERDICTS)}")
    findings = obj["findings"] if isinstance(obj.get("findings"), list) else []
    checks: list[str] = []
    detail = ""
    for f in findings:
        if isinstance(f, dict) and isinstance(f.get("check"), str):
            if f["check"] not in checks and len(checks) < MAX_CHECKS:
                checks.append(f["check"])
            if not detail:
                detail = _detail(f.get("detail"))
    return (task, rollout), GymHealth(verdict, tuple(checks), detail)


def summary_totals(data: bytes) -> HealthTotals:
    """quality_summary.json's run verdict counts. Raises BadLine when it has none."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise BadLine(f"invalid JSON ({_short(str(exc))})") from None
    run = obj.get("run") if isinstance(obj, dict) else None
    verdicts = run.get("verdicts") if isinstance(run, dict) else None
    if not isinstance(verdicts, dict) or not any(_index(verdicts.get(k)) for k in HEALTH_VERDICTS):
        raise BadLine("no run verdict counts (run.verdicts)")
    counts = [verdicts[k] if _index(verdicts.get(k)) else 0 for k in HEALTH_VERDICTS]
    return HealthTotals(*counts)  # type: ignore[arg-type]  # one count per field, in order


def disagreement(status: str, gym: Optional[GymHealth]) -> str:
    """Why Gym's verdict and gymwatch's status disagree, in a few words ("" when they agree or
    there is nothing to compare)."""
    if gym is None:
        return ""
    if status == T_NEVER_RAN and gym.verdict != H_UNHEALTHY:
        return f"Gym calls it {gym.verdict}; the model was never called"
    if status == T_COMPLETED and gym.verdict == H_UNHEALTHY:
        return "completed, but Gym calls it unhealthy"
    if status == T_FAILED and gym.verdict == H_HEALTHY:
        return "failed, but Gym calls it healthy"
    return ""


def _detail(detail: object) -> str:
    if isinstance(detail, dict):
        reason = detail.get("reason")
        if isinstance(reason, str):
            return _short(reason)
        return _short(", ".join(f"{k}={v}" for k, v in detail.items()))
    return ""


def _index(v: object) -> TypeGuard[int]:
    return type(v) is int and v >= 0


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


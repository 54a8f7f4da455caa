"""Gym's own `gym eval compare` report, when one sits beside run B (Gym's default place) or A,
set beside gymwatch's statistics, and where the two disagree.

They measure different things, and the disagreements say which: Gym reads each run's aggregate
metrics (every row it kept, trials gymwatch found never ran included, with the reward recorded for
them), compares the two runs' means with a Welch interval across repeats, and calls a task flipped
when its mean crosses 0.5; gymwatch pairs the trials both runs scored, resamples tasks, and calls a
task flipped when every paired trial passed in one run and failed in the other.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath
from typing import Any, Optional

from .core import comparereport
from .core.comparereport import BadReport, GymCompareReport, GymComparison
from .core.model import T_NEVER_RAN, RunState

AGREE = 0.0005          # figures shown to 3 decimals: closer than this they agree


def rollouts_of(path: str) -> Optional[Path]:
    from .core.layout import NotARun, discover

    try:
        return discover(path).rollouts
    except (NotARun, OSError):
        return None


def same_run(named: str, rollouts: Optional[Path]) -> bool:
    """Gym names a run by its rollouts file: the same file, or (the runs were moved or copied since)
    a file of the same name in a directory of the same name."""
    if rollouts is None or not named:
        return False
    if os.path.realpath(named) == os.path.realpath(rollouts):
        return True
    p = PurePath(named)
    return p.name == rollouts.name and p.parent.name == rollouts.parent.name


def find(path_a: str, path_b: str, a: RunState, b: RunState, ours: dict[str, Any],
         tasks: dict[int, dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The JSON `gym_compare`: None when no report is beside either run."""
    ra, rb = rollouts_of(path_a), rollouts_of(path_b)
    dirs = [d for r, root in ((rb, b.root), (ra, a.root)) for d in ((r.parent,) if r else ()) + (Path(root),)]
    found = comparereport.beside(dirs)
    if not found:
        return None
    unmatched: list[dict[str, Any]] = []
    for path in found:
        try:
            report = comparereport.read(path)
        except BadReport as exc:
            unmatched.append(empty(str(path), error=f"unreadable: {exc}"))
            continue
        if same_run(report.baseline, ra) and same_run(report.candidate, rb):
            return set_beside(report, a, b, ours, tasks)
        if same_run(report.baseline, rb) and same_run(report.candidate, ra):
            unmatched.append(empty(report.path, report, "it compares the runs the other way round "
                                   "(baseline B, candidate A): not set beside this diff"))
        else:
            unmatched.append(empty(report.path, report, f"it compares {_label(report.baseline)} with "
                                   f"{_label(report.candidate)}, not A with B"))
    return unmatched[0]


def _label(named: str) -> str:
    p = PurePath(named)
    return f"{p.parent.name}/{p.name}" if p.parent.name else p.name


def empty(path: str, report: Optional[GymCompareReport] = None, note: Optional[str] = None,
          error: Optional[str] = None) -> dict[str, Any]:
    return {"path": path, "nemo_gym_version": report.nemo_gym_version or None if report else None,
            "generated_at": report.generated_at or None if report else None,
            "baseline": report.baseline if report else None, "candidate": report.candidate if report else None,
            "agent": None, "a_mean": None, "b_mean": None, "mean_difference": None, "interval": None,
            "interval_method": None, "flip_mode": None, "flip_note": None, "common_tasks": None,
            "a_only_tasks": None, "b_only_tasks": None, "pass_to_fail": [], "fail_to_pass": [], "tied": None,
            "unchanged": None, "notes": [], "compared": False, "note": note, "error": error,
            "disagreements": [], "flip_disagreements": []}


def _pick(report: GymCompareReport, a: RunState, b: RunState) -> Optional[GymComparison]:
    if len(report.comparisons) == 1:
        return report.comparisons[0]
    agents = a.agent_names | b.agent_names
    mine = [c for c in report.comparisons if c.baseline_agent in agents or c.candidate_agent in agents]
    return mine[0] if len(mine) == 1 else None


def set_beside(report: GymCompareReport, a: RunState, b: RunState, ours: dict[str, Any],
               tasks: dict[int, dict[str, Any]]) -> dict[str, Any]:
    out = empty(report.path, report)
    c = _pick(report, a, b)
    if c is None:
        out["note"] = (f"Gym compared {len(report.comparisons)} agents separately; gymwatch pairs every trial "
                       "whatever its agent: not set beside this diff")
        return out
    out.update(agent=c.baseline_agent or None, a_mean=c.baseline_mean, b_mean=c.candidate_mean,
               mean_difference=c.delta, interval=list(c.delta_interval) if c.delta_interval else None,
               interval_method="welch_across_repeats" if c.delta_interval else None,
               notes=list(c.notes), compared=True)
    if c.flips is not None:
        f = c.flips
        out.update(flip_mode=f.mode, flip_note=f.reason or None, common_tasks=f.common_tasks,
                   a_only_tasks=f.baseline_only_tasks, b_only_tasks=f.candidate_only_tasks,
                   pass_to_fail=list(f.pass_to_fail), fail_to_pass=list(f.fail_to_pass), tied=f.tied,
                   unchanged=f.unchanged)
    out["disagreements"], out["flip_disagreements"] = disagreements(out, c, a, b, ours, tasks)
    return out


def disagreements(g: dict[str, Any], c: GymComparison, a: RunState, b: RunState, ours: dict[str, Any],
                  tasks: dict[int, dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    said: list[str] = []
    for side, state in (("A", a), ("B", b)):
        never = sorted({t.task_index for t in state.trials.values()
                        if t.status == T_NEVER_RAN and t.withheld_reward is not None})
        n = sum(1 for t in state.trials.values() if t.status == T_NEVER_RAN and t.withheld_reward is not None)
        if n:
            said.append(f"Gym scores {n} trial{'s' if n != 1 else ''} of {side} that never ran "
                        f"({_tasks(never)}) with the reward recorded for them; gymwatch counts them apart")
    if g["common_tasks"] is not None and g["flip_mode"] != "unavailable" and g["common_tasks"] != ours["paired_tasks"]:
        said.append(f"tasks compared: Gym {g['common_tasks']} (in both runs' metrics), "
                    f"gymwatch {ours['paired_tasks']} (with a trial both runs scored)")
    if c.delta is not None and ours["mean_difference"] is not None and abs(c.delta - ours["mean_difference"]) >= AGREE:
        said.append(f"mean difference: Gym {c.delta:+.3f} (each run's mean over its own rows), "
                    f"gymwatch {ours['mean_difference']:+.3f} (over paired trials)")
    said += _significance(c, ours)
    flips: list[dict[str, Any]] = []
    if c.flips is not None and c.flips.mode == "binary" and ours["rewards"] == "binary":
        mine = {f["task_index"]: f["flip"] for f in ours["flipped"]}
        gyms = {t: "pass_to_fail" for t in c.flips.pass_to_fail} | {t: "fail_to_pass" for t in c.flips.fail_to_pass}
        for t in sorted(set(mine) | set(gyms)):
            if mine.get(t) != gyms.get(t):
                flips.append({"task_index": t, "gym": gyms.get(t), "gymwatch": mine.get(t),
                              "gym_scores": list(c.flips.scores[t]) if t in c.flips.scores else None,
                              "paired": tasks.get(t, {}).get("paired", 0)})
        for who, other, key in (("Gym", "gymwatch", "gym"), ("gymwatch", "Gym", "gymwatch")):
            for direction, words in (("pass_to_fail", "passed -> failed"), ("fail_to_pass", "failed -> passed")):
                ts = [f["task_index"] for f in flips if f[key] == direction]
                if ts:
                    said.append(f"flipped {words} by {who}'s rule, not by {other}'s: {_tasks(ts)}")
    return said, flips


def _significance(c: GymComparison, ours: dict[str, Any]) -> list[str]:
    if c.delta_interval is None:
        return []
    glo, ghi = c.delta_interval
    gym = f"Gym's interval [{glo:+.3f}, {ghi:+.3f}] (Welch, across repeats)"
    if ours["interval"] is None:
        return [f"{gym}; gymwatch gives none ({ours['no_interval']})"] if ours["no_interval"] else []
    lo, hi = ours["interval"]
    g_excl, o_excl = glo > 0 or ghi < 0, lo > 0 or hi < 0
    if g_excl == o_excl:
        return []
    return [f"{gym} {'excludes' if g_excl else 'includes'} 0; gymwatch's [{lo:+.3f}, {hi:+.3f}] "
            f"(tasks resampled) {'excludes' if o_excl else 'includes'} 0"]


def _tasks(ts: list[int], most: int = 12) -> str:
    shown = ", ".join(str(t) for t in ts[:most]) + (f", ... ({len(ts)} in all)" if len(ts) > most else "")
    return f"task{'s' if len(ts) != 1 else ''} {shown}"


# --- words ---------------------------------------------------------------------------------
def lines(g: dict[str, Any]) -> list[str]:
    """Gym's figures and the disagreements, one a line (text and screen), for `gym_compare`."""
    head = f"Gym's own comparison ({g['path']}" + (f", nemo-gym {g['nemo_gym_version']}" if g["nemo_gym_version"] else "") + ")"
    if g["error"]:
        return [head, f"  {g['error']}"]
    if not g["compared"]:
        return [head, f"  {g['note']}"]
    out = [head]
    if g["mean_difference"] is not None:
        means = f"mean reward {_num(g['a_mean'])} (A) -> {_num(g['b_mean'])} (B); " if g["a_mean"] is not None else ""
        ci = f" [{g['interval'][0]:+.3f}, {g['interval'][1]:+.3f}] (Welch, across repeats)" if g["interval"] else \
            " (no interval)"
        out.append(f"  {means}difference {g['mean_difference']:+.3f}{ci}")
    if g["flip_mode"] == "binary":
        out.append(f"  {g['common_tasks']} tasks in both: {len(g['pass_to_fail'])} passed -> failed, "
                   f"{len(g['fail_to_pass'])} failed -> passed, {g['tied']} tied, {g['unchanged']} unchanged")
    elif g["flip_mode"]:
        out.append(f"  {g['common_tasks']} tasks in both; flips: {g['flip_mode']}"
                   + (f" ({g['flip_note']})" if g["flip_note"] else ""))
    if g["disagreements"]:
        out.append("  where Gym and gymwatch disagree:")
        out += [f"    - {d}" for d in g["disagreements"]]
    else:
        out.append("  Gym and gymwatch agree (tasks, mean difference, its significance, flipped tasks)")
    return out


def _num(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.3f}"

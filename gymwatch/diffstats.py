"""`gymwatch diff`'s statistics: runs A and B paired on (task, rollout) where both scored it.

A trial is scored when it completed with a reward. A trial one side did not score (it failed,
never ran, went missing or is not in that run) is counted apart, never as a zero: a run that lost
trials is not thereby worse at the task.

- per task: its paired trials, the mean reward of each side over them and the change (B - A);
  worse / better / same by the change's sign; with 0/1 rewards, flipped when every paired trial
  passed in A and failed in B (or the other way);
- for the run: the mean difference over all paired trials with a 95% interval that resamples
  tasks (stats.task_bootstrap, or stats.clustered_normal past stats.BOOTSTRAP_MAX_TASKS tasks),
  none below MIN_TASKS tasks; with 0/1 rewards, McNemar's exact p over the trials that disagree;
- the verdict line a person can quote.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional

from . import stats
from .core.model import RunState, Trial, scored as is_scored

MIN_TASKS = 10          # below this an interval over tasks means little: none is given
SAME = 1e-12            # a change smaller than this is float noise: the task stayed the same


def scored(t: Optional[Trial]) -> Optional[float]:
    """The trial's reward when it counts (completed with a reward, not masked), else None."""
    return t.reward if t is not None and is_scored(t) else None


@dataclass
class TaskPairs:
    """One task's paired trials, and what the two runs scored alone."""
    paired: int = 0
    sum_a: float = 0.0
    sum_b: float = 0.0
    binary: bool = True             # every paired reward is 0 or 1
    a_all_pass: bool = True
    a_all_fail: bool = True
    b_all_pass: bool = True
    b_all_fail: bool = True
    a_only: int = 0
    b_only: int = 0

    def add(self, ra: float, rb: float) -> None:
        self.paired += 1
        self.sum_a += ra
        self.sum_b += rb
        self.binary = self.binary and ra in (0.0, 1.0) and rb in (0.0, 1.0)
        self.a_all_pass, self.a_all_fail = self.a_all_pass and ra == 1.0, self.a_all_fail and ra == 0.0
        self.b_all_pass, self.b_all_fail = self.b_all_pass and rb == 1.0, self.b_all_fail and rb == 0.0

    @property
    def change(self) -> float:
        return (self.sum_b - self.sum_a) / self.paired

    def direction(self) -> Optional[str]:
        if not self.paired:
            return None
        return "same" if abs(self.change) < SAME else "worse" if self.change < 0 else "better"

    def flip(self, binary_run: bool = True) -> Optional[str]:
        """Only when the whole run's rewards are 0 or 1: with graded rewards a task's 1.0 -> 0.0
        is a big change, not a pass turned into a fail."""
        if not self.paired or not self.binary or not binary_run:
            return None
        if self.a_all_pass and self.b_all_fail:
            return "pass_to_fail"
        if self.a_all_fail and self.b_all_pass:
            return "fail_to_pass"
        return None

    def json(self, binary_run: bool) -> dict[str, Any]:
        n = self.paired
        return {"paired": n, "a_paired_mean": self.sum_a / n if n else None,
                "b_paired_mean": self.sum_b / n if n else None, "change": self.change if n else None,
                "direction": self.direction(), "flip": self.flip(binary_run), "a_only": self.a_only, "b_only": self.b_only}


@dataclass
class Pairing:
    tasks: dict[int, TaskPairs] = field(default_factory=dict)
    only_a: int = 0           # paired trials that passed in A alone (0/1 rewards)
    only_b: int = 0
    a_only: dict[str, int] = field(default_factory=dict)   # scored in A alone, by B's status
    b_only: dict[str, int] = field(default_factory=dict)
    neither: int = 0

    def task(self, index: int) -> TaskPairs:
        t = self.tasks.get(index)
        if t is None:
            t = self.tasks[index] = TaskPairs()
        return t


# Every trial key of either run, by task: (task, [(rollout, trial in A, trial in B)]), a trial None
# where that run does not have it; tasks and rollouts in order.
Joined = list[tuple[int, list[tuple[int, Optional[Trial], Optional[Trial]]]]]


def join(a: RunState, b: RunState) -> Joined:
    """The two runs' trials side by side. Each run's trials are walked in the order they were made
    (its dict's), not looked up key by key in sorted order: trials made in completion order lie
    scattered over the heap in key order, and a sorted walk waits on memory at every trial."""
    by_task: dict[int, tuple[dict[int, Trial], dict[int, Trial]]] = {}
    for side, state in enumerate((a, b)):
        for (task, rollout), t in state.trials.items():
            sides = by_task.get(task)
            if sides is None:
                sides = by_task[task] = ({}, {})
            sides[side][rollout] = t
    out: Joined = []
    for task in sorted(by_task):
        in_a, in_b = by_task[task]
        out.append((task, [(r, in_a.get(r), in_b.get(r)) for r in sorted(in_a.keys() | in_b.keys())]))
    return out


def pair(joined: Joined) -> Pairing:
    out = Pairing()
    for task, trials in joined:
        for _, ta, tb in trials:
            ra, rb = scored(ta), scored(tb)
            if ra is not None and rb is not None:
                out.task(task).add(ra, rb)
                out.only_a += ra == 1.0 and rb == 0.0
                out.only_b += ra == 0.0 and rb == 1.0
            elif ra is not None:
                out.task(task).a_only += 1
                _count(out.a_only, tb)
            elif rb is not None:
                out.task(task).b_only += 1
                _count(out.b_only, ta)
            else:
                out.neither += 1
    return out


def _count(by_status: dict[str, int], other: Optional[Trial]) -> None:
    status = "absent" if other is None else other.status
    by_status[status] = by_status.get(status, 0) + 1


def paired_stats(joined: Joined) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The run's figures (the JSON `stats`) and each task's (merged into the JSON `tasks[]`), from
    `join()`'s trials."""
    p = pair(joined)
    paired = [t for t in p.tasks.values() if t.paired]
    n = sum(t.paired for t in paired)
    binary = bool(paired) and all(t.binary for t in paired)
    tasks = {i: t.json(binary) for i, t in p.tasks.items()}
    directions = Counter(t["direction"] for t in tasks.values())
    out: dict[str, Any] = {
        "paired_trials": n, "paired_tasks": len(paired),
        "unpaired": {"a_only": sum(p.a_only.values()), "b_only": sum(p.b_only.values()), "neither": p.neither,
                     "a_only_b_status": dict(sorted(p.a_only.items())),
                     "b_only_a_status": dict(sorted(p.b_only.items()))},
        "rewards": None if not paired else "binary" if binary else "graded",
        "a_mean": None, "b_mean": None, "mean_difference": None,
        "confidence": stats.CONFIDENCE, "interval": None, "interval_method": None, "no_interval": None,
        "resamples": None, "seed": None,
        "test": None, "p_value": None, "discordant": None,
        "tasks_worse": directions.get("worse", 0), "tasks_better": directions.get("better", 0),
        "tasks_same": directions.get("same", 0),
        "flipped": sorted(({"task_index": i, "flip": t["flip"], "paired": t["paired"]}
                           for i, t in tasks.items() if t["flip"]),
                          key=lambda f: (f["flip"] != "pass_to_fail", f["task_index"])),
    }
    if n:
        out["a_mean"] = sum(t.sum_a for t in paired) / n
        out["b_mean"] = sum(t.sum_b for t in paired) / n
        out["mean_difference"] = out["b_mean"] - out["a_mean"]
        _interval(out, [t.sum_b - t.sum_a for t in paired], [t.paired for t in paired])
    if binary:
        out.update(test="mcnemar_exact", p_value=stats.mcnemar_exact(p.only_a, p.only_b),
                   discordant={"a_passed_only": p.only_a, "b_passed_only": p.only_b})
    out["verdict"] = verdict_line(out)
    return out, tasks


def _interval(out: dict[str, Any], sums: list[float], counts: list[int]) -> None:
    k = len(sums)
    if k < MIN_TASKS:
        out["no_interval"] = f"{k} task{'s' if k != 1 else ''} scored in both runs, {MIN_TASKS} needed"
    elif k <= stats.BOOTSTRAP_MAX_TASKS:
        out.update(interval=list(stats.task_bootstrap(sums, counts)), interval_method="task_bootstrap",
                   resamples=stats.RESAMPLES, seed=stats.SEED)
    else:
        out.update(interval=list(stats.clustered_normal(sums, counts)), interval_method="clustered_normal")


# --- words ---------------------------------------------------------------------------------
def signed(x: float) -> str:
    return f"{0.0 if abs(x) < 0.0005 else x:+.3f}"     # never "-0.000"


def interval_text(s: dict[str, Any]) -> str:
    if s["interval"] is not None:
        lo, hi = s["interval"]
        return f"[{signed(lo)}, {signed(hi)}]"
    return f"(no interval: {s['no_interval']})" if s["no_interval"] else ""


def verdict_line(s: dict[str, Any]) -> str:
    """"B is worse on 7 of 50 tasks, better on 2; mean -0.080 [-0.130, -0.030]"."""
    if not s["paired_trials"]:
        return "no trial was scored in both runs: nothing to compare"
    k = s["paired_tasks"]
    head = f"B is worse on {s['tasks_worse']} of {k} task{'s' if k != 1 else ''}, better on {s['tasks_better']}"
    return f"{head}; mean {signed(s['mean_difference'])} {interval_text(s)}".rstrip()


def p_text(p: float) -> str:
    return "< 0.0001" if p < 0.0001 else f"{p:.4f}" if p < 0.01 else f"{p:.2f}"


def method_text(s: dict[str, Any]) -> str:
    """How the interval was made, in a user's words."""
    if s["interval_method"] == "task_bootstrap":
        return f"95% interval: {s['resamples']} resamples of the tasks, seed {s['seed']}"
    if s["interval_method"] == "clustered_normal":
        return "95% interval: normal, standard error clustered by task"
    return ""


def unpaired_text(s: dict[str, Any]) -> str:
    u = s["unpaired"]

    def why(by: dict[str, int], side: str) -> str:
        return f" ({side}: " + ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in by.items()) + ")" if by else ""
    text = (f"counted apart: {u['a_only']} scored in A only{why(u['a_only_b_status'], 'B')}, "
            f"{u['b_only']} in B only{why(u['b_only_a_status'], 'A')}")
    return text + (f"; {u['neither']} scored in neither" if u["neither"] else "")


def flip_text(f: dict[str, Any]) -> str:
    word = "passed in A, failed in B" if f["flip"] == "pass_to_fail" else "failed in A, passed in B"
    return f"task {f['task_index']}: {word} ({f['paired']} paired trial{'s' if f['paired'] != 1 else ''})"


def flipped_line(s: dict[str, Any], most: int = 12) -> str:
    """'flipped: tasks 3, 11, 27 passed -> failed; task 8 failed -> passed' ('' for graded rewards)."""
    if s["rewards"] != "binary":
        return ""
    parts = []
    for flip, words in (("pass_to_fail", "passed -> failed"), ("fail_to_pass", "failed -> passed")):
        ts = [str(f["task_index"]) for f in s["flipped"] if f["flip"] == flip]
        if ts:
            shown = ", ".join(ts[:most]) + (f", ... ({len(ts)} in all)" if len(ts) > most else "")
            parts.append(f"task{'s' if len(ts) != 1 else ''} {shown} {words}")
    return "flipped: " + "; ".join(parts) if parts else "no task flipped"


def summary_lines(s: dict[str, Any]) -> list[str]:
    """The statistics under the verdict line, one fact a line (text and screen)."""
    if not s["paired_trials"]:
        return [unpaired_text(s)]
    out = [f"{s['paired_trials']} paired trials, {s['paired_tasks']} tasks ({s['tasks_same']} the same): "
           f"mean {s['a_mean']:.3f} (A) -> {s['b_mean']:.3f} (B)"]
    if s["interval_method"]:
        out.append(method_text(s))
    if s["test"] == "mcnemar_exact":
        d = s["discordant"]
        out.append(f"McNemar exact (0/1 rewards): {d['a_passed_only']} passed in A only, "
                   f"{d['b_passed_only']} in B only; p = {p_text(s['p_value'])}")
    elif s["rewards"] == "graded":
        out.append("rewards not all 0 or 1: no exact test, no flipped tasks")
    out.append(unpaired_text(s))
    return out

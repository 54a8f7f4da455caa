"""What the charts show, computed from the model in memory (never a second read of the run): results
over time (throughput), how rewards spread per agent and per task, how many tokens a trial took.

Views draw these (gymwatch/charts.py as text, the screen as plots); nothing here draws.

**When a result came.** A trial's time is when gymwatch saw its latest result arrive (a row, a
failure row, a collector line naming it failed: `Trial.arrived`, the run's clock) when the run was
watched; a run read after the fact has no such times, and then its rows' `response.created_at`
(when the model answered, `Trial.answered_at`) stand in: failure rows and lines have none. A screen opened on a
run already collecting saw only the later results arrive: the earlier ones are placed by when the
model answered them when the two clocks agree (those answers all came before the first arrival
gymwatch saw, by at most AGREE apart); not in a replay, whose clock is not the recording's.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Iterable, Optional

from .model import T_COMPLETED, T_FAILED, T_NEVER_RAN, RunState, Trial

SEEN, ANSWERED = "seen", "answered"     # the two times a result can have (module docstring)
RESULTS = (T_COMPLETED, T_FAILED, T_NEVER_RAN)
BASE = 10.0              # seconds a throughput bucket spans before it is merged to fit (a short run's pause shows)
# The widths a merged bucket may span (a multiple of BASE each): a label a person reads at once.
NICE = (10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0, 43200.0,
        86400.0)
AGREE = 24 * 3600.0       # the longest a run's earlier answers may precede what gymwatch saw arrive
SLACK = 60.0              # ... and how far after it one may seem to (clock skew, a row written late)
MAX_VALUE_BINS = 12      # rewards with at most this many distinct values: a bin each (0/1 rewards: two)
BINS = 10                # else this many bins of equal width


def time_basis(trials: Iterable[Trial]) -> str:
    """SEEN when any result was seen arriving, else ANSWERED when any row says when the model
    answered, else ''."""
    answered = False
    for t in trials:
        if t.arrived is not None:
            return SEEN
        answered = answered or t.answered_at is not None
    return ANSWERED if answered else ""


def result_time(t: Trial, basis: str) -> Optional[float]:
    return t.arrived if basis == SEEN else t.answered_at if basis == ANSWERED else None


# --- throughput ------------------------------------------------------------------------------
@dataclass(slots=True)
class Bucket:
    start: float               # epoch seconds (the basis' clock)
    completed: int = 0
    failed: int = 0
    never_ran: int = 0

    @property
    def total(self) -> int:
        return self.completed + self.failed + self.never_ran


@dataclass(slots=True)
class Throughput:
    basis: str                                  # SEEN / ANSWERED / '' (no result has a time)
    width: float = BASE                         # seconds a bucket spans
    buckets: list[Bucket] = field(default_factory=list)   # consecutive, from the first result's
    untimed: dict[str, int] = field(default_factory=dict)  # results with no time, by status
    mixed: bool = False         # (SEEN) the results before gymwatch looked placed by their answers

    @property
    def peak(self) -> int:
        return max((b.total for b in self.buckets), default=0)

    def merged(self, most: int) -> "Throughput":
        """The same results in at most `most` buckets, each as wide as one of NICE (or a whole
        number of days)."""
        if len(self.buckets) <= most:
            return self
        least = self.width * math.ceil(len(self.buckets) / most)
        width = next((w for w in NICE if w >= least), math.ceil(least / NICE[-1]) * NICE[-1])
        k = round(width / self.width)
        out = Throughput(self.basis, self.width * k, [], dict(self.untimed), self.mixed)
        for i in range(0, len(self.buckets), k):
            part = self.buckets[i:i + k]
            out.buckets.append(Bucket(part[0].start, sum(b.completed for b in part), sum(b.failed for b in part),
                                      sum(b.never_ran for b in part)))
        return out


def throughput(state: RunState) -> Throughput:
    """Results per BASE seconds (views merge them to fit): completed, failed and never-ran trials by
    when their result came."""
    trials = state.trials.values()
    basis = time_basis(trials)
    out = Throughput(basis)
    times: dict[str, list[float]] = {T_COMPLETED: [], T_FAILED: [], T_NEVER_RAN: []}
    arrived = basis == SEEN
    for t in trials:
        got = times.get(t.status)
        if got is None:
            continue
        at = t.arrived if arrived else t.answered_at
        if at is None:
            out.untimed[t.status] = out.untimed.get(t.status, 0) + 1
        else:
            got.append(at)
    if not any(times.values()):
        return out
    if basis == SEEN and out.untimed:
        _earlier_answers(trials, times, out)
    timed = [v for v in times.values() if v]
    for v in timed:
        v.sort()
    first = math.floor(min(v[0] for v in timed) / BASE) * BASE
    n = int((max(v[-1] for v in timed) - first) // BASE) + 1
    edges = [first + (i + 1) * BASE for i in range(n)]
    per = {status: _counts(v, edges) for status, v in times.items()}
    out.buckets = [Bucket(first + i * BASE, per[T_COMPLETED][i], per[T_FAILED][i], per[T_NEVER_RAN][i])
                   for i in range(n)]
    return out


def _earlier_answers(trials: Iterable[Trial], times: dict[str, list[float]], out: Throughput) -> None:
    """Results there before gymwatch looked, placed by when the model answered them, when that
    clock agrees with the one that timed the arrivals (the module docstring)."""
    first_seen = min(min(v) for v in times.values() if v)
    earlier = [(t.status, t.answered_at) for t in trials if t.status in times and t.arrived is None
               and t.answered_at is not None]
    if not earlier or not first_seen - AGREE <= max(at for _, at in earlier) <= first_seen + SLACK:
        return
    for status, at in earlier:
        times[status].append(at)
        out.untimed[status] -= 1
        if not out.untimed[status]:
            del out.untimed[status]
    out.mixed = True


def _counts(ordered: list[float], edges: list[float]) -> list[int]:
    """How many of the sorted values fall below each edge and at or above the one before."""
    out, lo = [], 0
    for edge in edges:
        hi = bisect.bisect_left(ordered, edge, lo)
        out.append(hi - lo)
        lo = hi
    out[-1] += len(ordered) - lo
    return out


# --- distributions ---------------------------------------------------------------------------
@dataclass(slots=True)
class Bin:
    lo: float
    hi: float               # a bin of one value has lo == hi
    count: int = 0


@dataclass(slots=True)
class Spread:
    """How a set of values spreads: bins, with the total and what is left out."""

    title: str
    n: int = 0
    bins: list[Bin] = field(default_factory=list)

    @property
    def peak(self) -> int:
        return max((b.count for b in self.bins), default=0)


def binned(title: str, values: list[float], whole: bool = False) -> Spread:
    """`values` in bins: a bin a value when there are few distinct ones, else BINS of equal width
    from the least to the greatest (`whole`: bin edges on whole numbers, for counts)."""
    out = Spread(title, len(values))
    if not values:
        return out
    ordered = sorted(values)
    distinct = set(ordered) if len(set(ordered[:: max(1, len(ordered) // 64)])) <= MAX_VALUE_BINS else ()
    if distinct and len(distinct) <= MAX_VALUE_BINS:
        values_at = sorted(distinct)
        counts = _counts(ordered, values_at[1:] + [math.inf])
        out.bins = [Bin(v, v, n) for v, n in zip(values_at, counts, strict=True)]
        return out
    lo, hi = ordered[0], ordered[-1]
    step = (hi - lo) / BINS
    if whole:
        step = max(1.0, math.ceil(step))
    edges = [lo + (i + 1) * step for i in range(BINS)]
    out.bins = [Bin(lo + i * step, lo + (i + 1) * step, n) for i, n in enumerate(_counts(ordered, edges))]
    while out.bins and out.bins[-1].count == 0:       # (whole steps can overshoot the greatest)
        out.bins.pop()
    return out


def agent_of(state: RunState, t: Trial) -> str:
    """The agent a trial ran on: its row's `agent_ref.name`, else the run's one agent."""
    return t.agent or state.info.agent or "(agent unknown)"


def rewards_by_agent(state: RunState) -> list[Spread]:
    """The rewards of each agent's completed trials."""
    by: dict[str, list[float]] = {}
    default = agent_of(state, Trial(0, 0))
    for t in state.trials.values():
        if t.status == T_COMPLETED and t.reward is not None:
            agent = t.agent or default
            got = by.get(agent)
            if got is None:
                got = by[agent] = []
            got.append(t.reward)
    return [binned(agent, by[agent]) for agent in sorted(by)]


def task_means(state: RunState) -> Spread:
    """The mean reward of each task over its completed trials: how many tasks always pass, never
    pass, or sometimes do."""
    sums: dict[int, list[float]] = {}
    for t in state.trials.values():
        if t.status == T_COMPLETED and t.reward is not None:
            s = sums.setdefault(t.task_index, [0.0, 0.0])
            s[0] += t.reward
            s[1] += 1
    return binned("mean reward per task", [round(a / n, 6) for a, n in sums.values()])


def tokens_per_trial(state: RunState) -> list[Spread]:
    """Input and output tokens of each trial that ran (never-ran trials, all zeros, are left out)."""
    inp = [float(t.input_tokens) for t in state.trials.values()
           if t.input_tokens is not None and t.status != T_NEVER_RAN]
    out = [float(t.output_tokens) for t in state.trials.values()
           if t.output_tokens is not None and t.status != T_NEVER_RAN]
    return [binned("input tokens per trial", inp, whole=True), binned("output tokens per trial", out, whole=True)]

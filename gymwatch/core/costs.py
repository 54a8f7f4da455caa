"""Cost and speed per agent, from the model in memory: input and output tokens in total and per
trial (p50 / p90 / max), how long a trial took (p50 / p90), and the trials far off their peers.

A trial's duration is Gym's own where it records one (`ng_perf.total_latency_ms`, Gym 0.7 with
observability on). Elsewhere it is estimated from when results came (core/figures.py's times): with
the collector running `concurrency` trials at once, a trial that ended at the i-th result began
about when the (i - concurrency)-th ended (its slot freed), so the estimate is the time between the
two. That is exact for a steady pipeline, tells nothing about one trial, and needs the concurrency
(Gym's `num_samples_in_parallel`), and is the collector's, so the same for every agent it ran:
estimated durations flag no trial.

Outliers (core/quantiles.py's rule, per agent, among the trials that ran): output tokens far above
the agent's typical (a runaway generation), and a Gym-recorded duration far above its peers'.
Never-ran trials (no model call, every count 0) are counted in the totals and left out of the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from . import figures
from .model import T_NEVER_RAN, RunState, TrialKey
from .quantiles import FAR_RATIO, Typical, quantile

GYM, ESTIMATED = "gym", "estimated"      # where durations come from (Cost.duration_from)
MAX_OUTLIERS = 20                        # kept per agent and kind (the count says how many in all)
TOKENS, SLOW = "tokens", "slow"          # what an outlier is far above its peers in


@dataclass(slots=True)
class Percentiles:
    n: int
    p50: float
    p90: float
    max: float

    @staticmethod
    def of(ordered: list) -> Optional["Percentiles"]:
        """Of numbers sorted ascending."""
        if not ordered:
            return None
        return Percentiles(len(ordered), float(quantile(ordered, 0.5) or 0), float(quantile(ordered, 0.9) or 0),
                           float(ordered[-1]))

    def to_json(self) -> dict:
        return {"n": self.n, "p50": self.p50, "p90": self.p90, "max": self.max}


@dataclass(slots=True)
class Outlier:
    key: TrialKey
    kind: str            # TOKENS / SLOW
    value: float         # its output tokens, or its seconds
    typical: float       # the agent's median of the same

    def to_json(self) -> dict:
        return {"task_index": self.key[0], "rollout_index": self.key[1], "kind": self.kind, "value": self.value,
                "typical": self.typical}


@dataclass(slots=True)
class Cost:
    agent: str
    trials: int = 0                     # its trials with a result (a row or a failure)
    ran: int = 0                        # ... of which ran (not never-ran)
    input_tokens: int = 0               # totals
    output_tokens: int = 0
    input: Optional[Percentiles] = None     # per trial that ran
    output: Optional[Percentiles] = None
    duration: Optional[Percentiles] = None  # seconds
    duration_from: str = ""             # GYM / ESTIMATED / '' (unknown)
    outliers: list[Outlier] = field(default_factory=list)
    outlier_counts: dict[str, int] = field(default_factory=dict)   # by kind, all of them

    def to_json(self) -> dict:
        pct = lambda p: p.to_json() if p is not None else None      # noqa: E731
        return {"agent": self.agent, "trials": self.trials, "trials_ran": self.ran,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "input_tokens_per_trial": pct(self.input), "output_tokens_per_trial": pct(self.output),
                "duration_s": pct(self.duration), "duration_from": self.duration_from or None,
                "outliers": [o.to_json() for o in self.outliers], "outlier_counts": dict(self.outlier_counts)}


class _Tally:
    """One agent's trials, in one pass over the run's (a 100k-trial run: its figures in one read)."""

    __slots__ = ("trials", "ran", "input_total", "output_total", "inputs", "outputs", "output_keys",
                 "latencies", "latency_keys")

    def __init__(self) -> None:
        self.trials = self.ran = self.input_total = self.output_total = 0
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.output_keys: list[TrialKey] = []
        self.latencies: list[float] = []
        self.latency_keys: list[TrialKey] = []


def costs(state: RunState) -> list[Cost]:
    """Cost and speed of each agent, by name."""
    tallies: dict[str, _Tally] = {}
    results, default = figures.RESULTS, state.info.agent or "(agent unknown)"
    for key, t in state.trials.items():
        status = t.status
        if status not in results:
            continue
        agent = t.agent or default
        g = tallies.get(agent)
        if g is None:
            g = tallies[agent] = _Tally()
        g.trials += 1
        g.ran += 1
        inp, out = t.input_tokens, t.output_tokens
        if status == T_NEVER_RAN:
            g.ran -= 1
            g.input_total += inp or 0
            g.output_total += out or 0
            continue
        if inp is not None:
            g.inputs.append(inp)
        if out is not None:
            g.outputs.append(out)
            g.output_keys.append(key)
        latency = t.latency
        if latency is not None:
            g.latencies.append(latency)
            g.latency_keys.append(key)
    estimated = _estimated_durations(state) if not any(g.latencies for g in tallies.values()) else None
    return [_cost(agent, tallies[agent], estimated) for agent in sorted(tallies)]


def _cost(agent: str, g: _Tally, estimated: Optional[Percentiles]) -> Cost:
    c = Cost(agent, trials=g.trials, ran=g.ran, input_tokens=g.input_total + sum(g.inputs),
             output_tokens=g.output_total + sum(g.outputs))
    c.input = Percentiles.of(sorted(g.inputs))
    outs = sorted(g.outputs)
    c.output = Percentiles.of(outs)
    _flag(c, TOKENS, g.output_keys, g.outputs, outs)
    if g.latencies:
        durations = sorted(g.latencies)
        c.duration, c.duration_from = Percentiles.of(durations), GYM
        _flag(c, SLOW, g.latency_keys, g.latencies, durations)
    elif estimated is not None:
        c.duration, c.duration_from = estimated, ESTIMATED
    return c


def _flag(c: Cost, kind: str, keys: list[TrialKey], values: list, ordered: list) -> None:
    """The trials among `keys` (with `values`) far above the typical of `ordered` (the same values, sorted)."""
    least = FAR_RATIO * (quantile(ordered, 0.5) or 0)
    if not ordered or ordered[-1] < least:
        return      # none can be (and the spread need not be found)
    typical = Typical(ordered)
    threshold = typical.threshold()
    if threshold is None or ordered[-1] < threshold:
        return
    far = sorted(((k, float(v)) for k, v in zip(keys, values, strict=True) if v >= threshold and typical.far_above(v)),
                 key=lambda kv: (-kv[1], kv[0]))
    if far:
        c.outlier_counts[kind] = len(far)
        c.outliers.extend(Outlier(k, kind, v, typical.median) for k, v in far[:MAX_OUTLIERS])


def _estimated_durations(state: RunState) -> Optional[Percentiles]:
    """Trial durations estimated from when results came (the module docstring), when Gym recorded
    none: a property of the collector's pipeline, so the same for every agent it ran; None without
    its concurrency."""
    c = state.info.concurrency
    trials = state.trials.values()
    basis = figures.time_basis(trials) if c and c >= 1 else ""
    if not basis:
        return None
    arrived = basis == figures.SEEN
    results = figures.RESULTS
    times = [at for t in trials if t.status in results and (at := t.arrived if arrived else t.answered_at) is not None]
    times.sort()
    return Percentiles.of(sorted(b - a for a, b in zip(times, times[c:], strict=False)))   # each time, the c-th after it

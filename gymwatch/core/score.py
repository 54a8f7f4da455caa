"""What a run's score is worth: its denominator (the trials the mean reward is over, of those
expected, and why the others are not in it), Gym's own score beside it (its aggregate metrics'
`key_metrics`, with the counts Gym computed them over: the file is decoded here), whether Gym's
score leaves the failed trials out (their failures routed to the sidecar), and whether Gym's
health verdict vouches for anything (not when it could observe too little).

Gym's aggregate metrics (docs/gym-formats.md §6): a JSON list, one entry per agent, with
`agent_ref`, `key_metrics`, `agent_metrics` (with `coverage/masked_rollouts` when it masked rows)
and, from 0.6, `repeat_level_metrics`: one entry per rollout index with `sample_count` (the tasks
that repeat has a row of) and `missing_count` (those it lacks, of the tasks any of them has)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Optional

import msgspec
from msgspec import Struct, field

from .model import (
    SRC_FAILURE_ROW,
    T_COMPLETED,
    T_FAILED,
    T_MISSING,
    T_NEVER_RAN,
    T_PENDING,
    Evidence,
    GymScore,
    RunState,
)

MAX_KEY_METRICS = 40        # of one agent's key metrics kept (a benchmark names a handful)
MOSTLY = 0.5                # a share of unobserved trials above this: Gym's health verdict vouches for nothing


@dataclass(frozen=True, slots=True)
class Denominator:
    """How many of the run's trials its mean reward is over, and what became of the others."""

    expected: Optional[int]     # rows in the materialized inputs (None: unknown)
    trials: int                 # trials known
    scored: int                 # completed with a reward and not masked: the mean is over these
    masked: int                 # completed, but Gym masked them (`mask_sample`)
    unrewarded: int             # completed without a reward
    failed: int
    never_ran: int              # their recorded 0.0 is withheld
    missing: int
    pending: int
    mean: Optional[float]
    routed: int = 0             # failed or never ran by a row of the failures sidecar (Gym's score leaves them out)
    routed_file: str = ""       # ... that file
    counted_by_gym: int = 0     # never ran by a row of the rollouts file, with a recorded reward (Gym counts it)

    @property
    def out_of(self) -> int:
        return max(self.expected or 0, self.trials)

    @property
    def not_scored(self) -> int:
        return self.out_of - self.scored


def denominator(state: RunState) -> Denominator:
    """One pass over the trials (a report's head is made of a few such: 100k trials each)."""
    n = {T_FAILED: 0, T_NEVER_RAN: 0, T_MISSING: 0, T_PENDING: 0}
    rewards: list[float] = []
    masked = unrewarded = routed = counted = 0
    files: set[str] = set()
    for t in state.trials.values():
        status = t.status
        if status == T_COMPLETED:       # model.scored(), written out: this walks every trial
            if t.reward is not None and not t.masked:
                rewards.append(t.reward)
            elif t.masked:
                masked += 1
            else:
                unrewarded += 1
            continue
        n[status] += 1
        if t.source == SRC_FAILURE_ROW and t.status in (T_FAILED, T_NEVER_RAN):
            routed += 1
            if t.evidence is not None:
                files.add(t.evidence.file)
        elif t.status == T_NEVER_RAN and t.withheld_reward is not None:
            counted += 1
    mean = sum(rewards) / len(rewards) if rewards else None
    return Denominator(state.expected_total, len(state.trials), len(rewards), masked, unrewarded,
                       n[T_FAILED], n[T_NEVER_RAN], n[T_MISSING], n[T_PENDING], mean,
                       routed, min(files) if files else "", counted)


def words(d: Denominator) -> str:
    """`0.620 over 180 of 200 expected; 20 not scored (10 failed, 5 never ran, 3 missing, 2 masked)`."""
    of = f"{d.expected} expected" if d.expected is not None and d.expected >= d.trials else f"{d.trials} trials"
    head = f"{d.mean:.3f}" if d.mean is not None else "no mean reward"
    out = f"{head} over {d.scored} of {of}"
    if d.not_scored:
        why = [f"{k} {name}" for k, name in ((d.failed, "failed"), (d.never_ran, "never ran"),
                                             (d.missing, "missing"), (d.masked, "masked"),
                                             (d.unrewarded, "without a reward"), (d.pending, "pending"))
               if k]
        unseen = d.out_of - d.trials      # expected, but not known to any file read so far
        if unseen > 0:
            why.append(f"{unseen} not seen")
        out += f"; {d.not_scored} not scored ({', '.join(why)})"
    return out


# --- Gym's own score ---------------------------------------------------------------------------
class _Counts(Struct):
    sample_count: Any = None
    missing_count: Any = None


class _Coverage(Struct):
    masked: Any = field(name="coverage/masked_rollouts", default=None)


class _Entry(Struct):
    agent_ref: Any = None
    key_metrics: Any = None
    agent_metrics: Optional[_Coverage] = None
    repeat_level_metrics: Optional[list[_Counts]] = None


_ENTRIES = msgspec.json.Decoder(list[_Entry])


def gym_scores(data: bytes, file: str) -> list[GymScore]:
    """The entries of Gym's aggregate metrics file (`file`: its name relative to the run). Only
    the few keys read are made into objects (the per-task groups, the histograms are skipped).
    ValueError when `data` is not one whole JSON document (still being written)."""
    try:
        entries = [(e.agent_ref, e.key_metrics, e.agent_metrics.masked if e.agent_metrics else None,
                    [(r.sample_count, r.missing_count) for r in e.repeat_level_metrics or ()])
                   for e in _ENTRIES.decode(data)]
    except msgspec.DecodeError:
        entries = _plain(json.loads(data))     # NaN (Gym 0.4-0.6's json.dump), or another shape
    ev = Evidence(file, 1)
    return [s for s in (_score(*e, ev) for e in entries) if s is not None]


def _plain(obj: Any) -> list[tuple]:
    """`gym_scores`' entries from the file decoded whole."""
    if not isinstance(obj, list):
        return []
    out = []
    for e in obj:
        if not isinstance(e, dict):
            continue
        cover = e.get("agent_metrics")
        repeats = e.get("repeat_level_metrics")
        out.append((e.get("agent_ref"), e.get("key_metrics"),
                    cover.get("coverage/masked_rollouts") if isinstance(cover, dict) else None,
                    [(r.get("sample_count"), r.get("missing_count")) for r in repeats if isinstance(r, dict)]
                    if isinstance(repeats, list) else []))
    return out


def _score(ref: Any, metrics: Any, masked: Any, repeats: list[tuple[Any, Any]], ev: Evidence) -> Optional[GymScore]:
    key: dict[str, float] = {}
    if isinstance(metrics, dict):
        for k, v in metrics.items():
            if len(key) < MAX_KEY_METRICS and isinstance(k, str) and _number(v):
                key[k] = float(v)
    samples = [s for s, _ in repeats if _count(s)]
    missing = [m for _, m in repeats if _count(m)]
    if not key and not samples:
        return None
    name = ref.get("name") if isinstance(ref, dict) else None
    agent = name if isinstance(name, str) else ""
    return GymScore(agent, key, sum(samples) if samples else None, sum(missing) if missing else None,
                    masked if _count(masked) else None, ev)


def _number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


def gym_score_words(g: GymScore, limit: int = 6) -> str:
    """`mcqa_simple_agent: mean/reward 0.5, pass@1[avg-of-2]/accuracy 50 ... over 6 rows (0 missing)`."""
    shown = ", ".join(f"{k} {v:g}" for k, v in list(g.key_metrics.items())[:limit])
    more = f" (+{len(g.key_metrics) - limit} more)" if len(g.key_metrics) > limit else ""
    counts = ""
    if g.sample_count is not None:
        counts = f" over {g.sample_count} rows"
        extra = [f"{g.missing_count} missing from a repeat"] if g.missing_count else []
        extra += [f"{g.masked} masked left out"] if g.masked else []
        counts += f" ({', '.join(extra)})" if extra else ""
    name = f"{g.agent}: " if g.agent else ""
    return f"{name}{shown}{more}{counts}"


# --- what Gym's numbers leave out, and what they vouch for -------------------------------------
def left_out_words(state: RunState, d: Denominator) -> str:
    """'' unless Gym's score leaves out trials whose failures it routed to the sidecar: it is
    computed from the rollouts file alone."""
    if not d.routed:
        return ""
    rows = sum(g.sample_count for g in state.gym_scores if g.sample_count is not None)
    over = f" (its counts: {rows} rows)" if state.gym_scores and rows else ""
    s = "s" if d.routed != 1 else ""
    return (f"Gym's own score leaves out the {d.routed} trial{s} whose failure{s} it routed to {d.routed_file}: "
            f"it is over the rows that came back{over}, not the {d.out_of} "
            f"{'expected' if d.expected is not None else 'trials'}")


def withheld_words(state: RunState, d: Denominator) -> str:
    """'' unless Gym's score counts trials that never ran, with the reward recorded for them."""
    if not state.gym_scores or not d.counted_by_gym:
        return ""
    n = d.counted_by_gym
    return (f"Gym's own score counts the {n} trial{'s' if n != 1 else ''} that never ran, with the reward "
            "recorded for them; gymwatch's mean withholds them")


def health_vouches(state: RunState) -> bool:
    """Does Gym's health verdict say anything of this run? Not when it could not observe most
    trials (without Gym's observability every check but three is `unobserved`)."""
    h = state.health_totals
    return h is None or not h.checked or h.unobserved <= MOSTLY * h.checked


def health_words(state: RunState) -> str:
    """'' unless Gym's health check judged most trials unobserved: then what that means."""
    h = state.health_totals
    if health_vouches(state) or h is None:
        return ""
    return (f"Gym's health check vouches for nothing here: it could not observe {h.unobserved} of its {h.checked} "
            "trials; to turn Gym's observability on, run with +observability_enabled=true (and "
            "+model_call_capture_dir=<dir> for its checks of model calls)")


"""The arithmetic behind `gymwatch diff`'s statistics, in pure Python (gymwatch depends on neither
numpy nor scipy; the tests check every function here against scipy).

- `task_bootstrap()`: a percentile interval for a mean difference over paired trials, resampling
  whole tasks (clusters): rollouts of one task share its difficulty, so they are not independent
  draws, and resampling trials one by one would give an interval too narrow.
- `clustered_normal()`: the normal interval with the task-clustered standard error, which is what
  that bootstrap tends to when tasks are many; used past `BOOTSTRAP_MAX_TASKS`.
- `mcnemar_exact()`: McNemar's exact test on the pairs that disagree (0/1 rewards).
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist
from typing import Sequence

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 37                    # fixed: the same two runs always give the same interval
BOOTSTRAP_MAX_TASKS = 2000   # past this, resampling costs seconds and the normal interval is as good
EXACT_MAX_PAIRS = 2000       # McNemar in whole numbers up to here, in logarithms past it


def percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of sorted values, linearly interpolated (numpy's default)."""
    h = (len(ordered) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])


def bootstrap_means(sums: Sequence[float], counts: Sequence[int], resamples: int = RESAMPLES,
                    seed: int = SEED) -> list[float]:
    """sum(sums) / sum(counts) of each resample of the tasks, drawn with replacement.

    `sums[i]`: task i's summed differences (B - A) over its paired trials, `counts[i]` (>= 1) how
    many it has. Each task is one complex number (sum + count·j), so one resample is a single
    `sum()` over `random.choices` and both totals come out of it together."""
    tasks = [complex(s, n) for s, n in zip(sums, counts, strict=True)]
    rng = random.Random(seed)
    k = len(tasks)
    means = []
    for _ in range(resamples):
        total = sum(rng.choices(tasks, k=k))
        means.append(total.real / total.imag)
    return means


def task_bootstrap(sums: Sequence[float], counts: Sequence[int], resamples: int = RESAMPLES,
                   seed: int = SEED, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile interval of `bootstrap_means()`."""
    means = sorted(bootstrap_means(sums, counts, resamples, seed))
    tail = (1 - confidence) / 2
    return percentile(means, tail), percentile(means, 1 - tail)


def clustered_normal(sums: Sequence[float], counts: Sequence[int],
                     confidence: float = CONFIDENCE) -> tuple[float, float]:
    """mean ± z·SE, the SE clustered by task (the ratio estimator's, with k/(k-1))."""
    k, n = len(sums), sum(counts)
    mean = sum(sums) / n
    spread = math.fsum((s - mean * c) ** 2 for s, c in zip(sums, counts, strict=True))
    se = math.sqrt(k / (k - 1) * spread) / n
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    return mean - z * se, mean + z * se


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided p of McNemar's exact test: of the n pairs where one run passed and the other
    failed, `only_a` passed in A alone; under "no difference" that count is Binomial(n, 1/2)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    return min(1.0, 2 * _half_binomial_cdf(min(only_a, only_b), n))


def _half_binomial_cdf(m: int, n: int) -> float:
    """P(X <= m) for X ~ Binomial(n, 1/2), m <= n / 2."""
    if n <= EXACT_MAX_PAIRS:
        return sum(math.comb(n, i) for i in range(m + 1)) / 2 ** n
    # from C(n, m) down: each term is the one before times i / (n - i + 1), so the sum is over
    # ratios and only C(n, m) / 2^n is taken from logarithms
    first = math.lgamma(n + 1) - math.lgamma(m + 1) - math.lgamma(n - m + 1) - n * math.log(2)
    total, term = 0.0, 1.0
    for i in range(m, -1, -1):
        total += term
        term *= i / (n - i + 1)
        if term < total * 1e-17:
            break
    return min(1.0, math.exp(first) * total)

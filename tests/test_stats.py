"""gymwatch/stats.py against references: scipy (binomtest, bootstrap, sem, norm), numpy's
percentile, the exact bootstrap distribution of a tiny case enumerated, and hand-computed cases."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import numpy as np
import pytest
from scipy import stats as sp

from gymwatch import stats


@pytest.mark.parametrize("only_a, only_b", [
    (0, 1), (1, 0), (3, 0), (0, 7), (5, 5), (6, 5), (12, 30), (100, 130), (600, 700),    # whole numbers
    (1000, 1001), (1500, 1600), (2100, 1900), (40000, 40900), (49000, 51000),             # logarithms
])
def test_mcnemar_exact_is_scipys_binomial_test(only_a, only_b):
    want = sp.binomtest(only_a, only_a + only_b, 0.5, alternative="two-sided").pvalue
    assert stats.mcnemar_exact(only_a, only_b) == pytest.approx(want, rel=1e-8, abs=1e-300)


def test_mcnemar_exact_by_hand():
    assert stats.mcnemar_exact(0, 0) == 1.0                  # no pair disagrees: nothing against "same"
    assert stats.mcnemar_exact(3, 0) == 2 * (1 / 8)           # P(X <= 0) of Binomial(3, 1/2), both tails
    assert stats.mcnemar_exact(7, 1) == 2 * (1 + 8) / 256     # P(X <= 1) of Binomial(8, 1/2) = 9/256
    assert stats.mcnemar_exact(4, 4) == 1.0


def test_percentile_is_numpys_linear():
    rng = random.Random(3)
    for n in (1, 2, 5, 100, 2000):
        xs = sorted(rng.gauss(0, 1) for _ in range(n))
        for q in (0.0, 0.025, 0.5, 0.975, 1.0):
            assert stats.percentile(xs, q) == pytest.approx(float(np.percentile(xs, q * 100)), abs=1e-12)


def tasks(k: int, seed: int = 5) -> tuple[list[float], list[int]]:
    """k tasks with 1, 2 or 4 paired trials each; each trial's difference is -1, 0 or +1."""
    rng = random.Random(seed)
    counts = [rng.choice([1, 2, 4]) for _ in range(k)]
    sums = [float(sum(rng.choice([-1, -1, 0, 0, 1]) for _ in range(n))) for n in counts]
    return sums, counts


def test_the_bootstrap_is_scipys_paired_bootstrap_of_whole_tasks():
    """scipy resamples the tasks' (sum, count) pairs together (paired=True) and takes the ratio of
    the totals; its interval (20,000 resamples) and ours (2,000, another generator) agree within
    their Monte Carlo error."""
    sums, counts = tasks(40)
    ours = stats.task_bootstrap(sums, counts)
    ref = sp.bootstrap((np.array(sums), np.array(counts, dtype=float)),
                       lambda s, c, axis=-1: s.sum(axis=axis) / c.sum(axis=axis), paired=True, vectorized=True,
                       n_resamples=20000, method="percentile", confidence_level=0.95,
                       rng=np.random.default_rng(1))
    se = ref.standard_error
    assert ours[0] == pytest.approx(ref.confidence_interval.low, abs=0.2 * se)
    assert ours[1] == pytest.approx(ref.confidence_interval.high, abs=0.2 * se)
    assert ours[0] < sum(sums) / sum(counts) < ours[1]


def test_the_bootstrap_draws_the_exact_bootstrap_distribution():
    """Five tasks: all 5^5 equally likely resamples enumerated give the exact distribution of the
    resampled mean; the draws follow it (largest gap between the two CDFs, 20,000 draws)."""
    sums, counts = [2.0, -1.0, 0.0, -3.0, 1.0], [2, 1, 4, 4, 1]
    exact = Counter(round(sum(sums[i] for i in pick) / sum(counts[i] for i in pick), 12)
                    for pick in itertools.product(range(5), repeat=5))
    drawn = Counter(round(m, 12) for m in stats.bootstrap_means(sums, counts, resamples=20000))
    assert set(drawn) <= set(exact)
    gap, ce, cd = 0.0, 0.0, 0.0
    for x in sorted(exact):
        ce += exact[x] / 5 ** 5
        cd += drawn[x] / 20000
        gap = max(gap, abs(ce - cd))
    assert gap < 0.015


def test_the_bootstrap_is_the_same_every_time_and_its_seed_matters():
    sums, counts = tasks(30)
    assert stats.task_bootstrap(sums, counts) == stats.task_bootstrap(list(sums), list(counts))
    assert stats.task_bootstrap(sums, counts) != stats.task_bootstrap(sums, counts, seed=stats.SEED + 1)


def test_the_unit_resampled_is_the_task():
    """Ten rollouts of a task that all agree carry one task's worth of evidence: the interval is the
    one of the task means (the same resamples), and wider than resampling the trials one by one."""
    rng = random.Random(9)
    means = [rng.choice([-1.0, 0.0, 0.0, 1.0]) for _ in range(30)]
    by_task = stats.task_bootstrap([10 * m for m in means], [10] * 30)
    of_means = stats.task_bootstrap(means, [1] * 30)
    assert by_task == pytest.approx(of_means, abs=1e-12)
    trials = np.repeat(means, 10)
    one_by_one = sp.bootstrap((trials,), np.mean, n_resamples=5000, method="percentile",
                              rng=np.random.default_rng(2)).confidence_interval
    assert (by_task[1] - by_task[0]) > 2.5 * (one_by_one.high - one_by_one.low)


def test_clustered_normal_is_the_usual_interval_with_one_trial_a_task():
    rng = random.Random(4)
    d = [rng.gauss(0.1, 1) for _ in range(200)]
    lo, hi = stats.clustered_normal(d, [1] * 200)
    z = sp.norm.ppf(0.975)
    assert lo == pytest.approx(np.mean(d) - z * sp.sem(d), rel=1e-12)
    assert hi == pytest.approx(np.mean(d) + z * sp.sem(d), rel=1e-12)


def test_clustered_normal_is_what_the_task_bootstrap_tends_to():
    sums, counts = tasks(3000, seed=11)
    lo, hi = stats.clustered_normal(sums, counts)
    blo, bhi = stats.task_bootstrap(sums, counts)
    se = (hi - lo) / (2 * 1.959964)
    assert blo == pytest.approx(lo, abs=0.15 * se) and bhi == pytest.approx(hi, abs=0.15 * se)


def test_no_task_no_interval_arithmetic_errors():
    """One task: the normal interval has no spread to estimate (k - 1 = 0); the caller never asks
    (diffstats.MIN_TASKS), and the bootstrap of one task is that task's mean."""
    assert stats.task_bootstrap([3.0], [4]) == (0.75, 0.75)
    with pytest.raises(ZeroDivisionError):
        stats.clustered_normal([3.0], [4])
    assert math.isfinite(stats.clustered_normal([3.0, 1.0], [4, 4])[0])

"""Percentiles and the robust rule for "far above the typical": pure arithmetic over a list of numbers.

Percentiles interpolate linearly between the two nearest ranks (numpy's and pandas' default,
Gym's own `perf_summary` too). "Far above" is the rule README's "Cost and speed" states:
a value more than FAR_Z robust z-scores above the median (the z-score of Iglewicz and Hoaglin,
0.6745 * (x - median) / MAD, MAD the median absolute deviation) AND at least FAR_RATIO times the
median, among at least MIN_PEERS values. The ratio keeps a tight spread (MAD near 0, most trials
alike) from flagging every trial a little above it; the peer count keeps a handful of trials from
defining "typical".
"""

from __future__ import annotations

import bisect
import math
from typing import Optional, Sequence

FAR_Z = 3.5
FAR_RATIO = 2.0
MIN_PEERS = 8
_Z_SCALE = 0.6745     # the normal distribution's MAD / sigma: the z-score of a MAD away is 0.6745


def quantile(ordered: Sequence[float], q: float) -> Optional[float]:
    """The q-th quantile (0 <= q <= 1) of values sorted ascending; None for none."""
    n = len(ordered)
    if n == 0:
        return None
    pos = q * (n - 1)
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(ordered: Sequence[float]) -> Optional[float]:
    return quantile(ordered, 0.5)


def mad(ordered: Sequence[float], center: float) -> float:
    """The median absolute deviation from `center` of values sorted ascending, found without
    making the deviations: they are two ascending runs (below the center, nearest first; then
    above it), and a rank of their union is found by halving (a 100k-trial run allocates nothing)."""
    n = len(ordered)
    if n == 0:
        return 0.0
    i = bisect.bisect_left(ordered, center)

    def below(k: int) -> float:          # the k-th smallest deviation below the center
        return center - ordered[i - 1 - k]

    def above(k: int) -> float:
        return ordered[i + k] - center

    half = (n - 1) / 2
    lo, hi = _kth(below, i, above, n - i, int(half)), _kth(below, i, above, n - i, int(math.ceil(half)))
    return float(lo + hi) / 2


def _kth(a, na: int, b, nb: int, k: int) -> float:
    """The k-th smallest (0-based) of two ascending sequences given by index (`a(j)`, `na` long)."""
    while True:
        if na == 0:
            return b(k)
        if nb == 0:
            return a(k)
        if k == 0:
            return min(a(0), b(0))
        step = (k + 1) // 2
        ia, ib = min(step, na), min(step, nb)
        if a(ia - 1) <= b(ib - 1):
            a, na, k = (lambda j, f=a, d=ia: f(j + d)), na - ia, k - ia
        else:
            b, nb, k = (lambda j, f=b, d=ib: f(j + d)), nb - ib, k - ib


class Typical:
    """What is typical of a set of values (its median and MAD), and which values are far above it."""

    __slots__ = ("median", "mad", "n", "_least", "_above")

    def __init__(self, ordered: Sequence[float]):
        self.n = len(ordered)
        self.median = median(ordered) or 0.0
        self.mad = mad(ordered, self.median) if self.n else 0.0
        # far above: at least FAR_RATIO times the median, and more than FAR_Z robust z-scores above it
        self._least = FAR_RATIO * self.median
        self._above = self.median + FAR_Z * self.mad / _Z_SCALE

    def far_above(self, x: float) -> bool:
        return self.n >= MIN_PEERS and x >= self._least and x > self._above

    def threshold(self) -> Optional[float]:
        """The least value far above the typical (None: too few values to tell)."""
        return max(self._above, self._least) if self.n >= MIN_PEERS else None

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
    """The median absolute deviation from `center` of values sorted ascending."""
    i = bisect.bisect_left(ordered, center)
    # the deviations below the center, nearest first, then those above: two ascending runs, which
    # sorted() merges in one pass
    below = [center - v for v in reversed(ordered[:i])]
    return median(sorted(below + [v - center for v in ordered[i:]])) or 0.0


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

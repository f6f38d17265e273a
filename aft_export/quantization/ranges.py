"""Activation ranges computed batch by batch, in memory that does not grow with the data.

Calibration sees one batch of activations at a time and keeps only a fixed-size
summary per tensor, so its peak memory is one batch's activations whatever the
number of calibration images:

- **minmax**: the running minimum and maximum (NaN ignored).
- **percentile**: a histogram of ``|x|`` with :data:`PERCENTILE_BINS` bins on a
  power-of-two grid: the bin width is the smallest power of two ``w`` with
  ``PERCENTILE_BINS * w > max|x|``. When a batch brings a larger ``|x|`` the width
  doubles as often as needed and adjacent bins merge, which is exact on such a grid,
  so the histogram depends on the data only, never on how it was batched. The
  threshold is the lower edge of the bin holding the ``p``-th percentile of ``|x|``
  (at most one bin below it), never above ``max|x|``.
- **entropy**: TensorRT's KL-divergence calibration as NVIDIA published it ("8-bit
  inference with TensorRT", GTC 2017, s7310): a histogram of ``|x|`` with 2048 bins
  over ``[0, max|x|]`` (so two passes: the maximum first, then the histogram), then
  for every candidate ``i`` from 128 to 2048 bins: the reference distribution P is
  ``bin[0 .. i-1]`` with the outliers ``sum(bin[i:])`` added to ``P[i-1]``; the
  candidate Q is ``bin[0 .. i-1]`` merged into 128 levels and expanded back, each
  level's count spread evenly over the bins of that level that are non-zero (empty
  bins stay empty); the threshold is ``(m + 0.5) * bin_width`` for the ``i = m``
  with the least ``KL(P || Q)``.

All thresholds are symmetric for percentile and entropy (``[-t, t]``), as TensorRT's
int8 is; minmax keeps ``(min, max)`` and the quantiser makes it symmetric.
"""

from __future__ import annotations

import math

import numpy as np

from aft_export.errors import AFTExportError

PERCENTILE_BINS = 4096  # the data fills between half and all of them
ENTROPY_BINS = 2048  # TensorRT's histogram
ENTROPY_LEVELS = 128  # int8's positive levels


def _finite_abs_max(a: np.ndarray, name: str) -> float:
    """max |a| ignoring NaN; an infinite activation cannot be calibrated."""
    if a.size == 0:
        return 0.0
    m = float(np.nanmax(np.abs(a))) if not np.isnan(a).all() else 0.0
    if math.isinf(m):
        raise AFTExportError(f"calibration: {name} takes an infinite value; the fp32 graph overflows on these images")
    return m


def _abs_values(a: np.ndarray) -> np.ndarray:
    a = np.abs(np.asarray(a, dtype=np.float32).ravel())
    return a[~np.isnan(a)]


class MinMax:
    """The running minimum and maximum of a tensor."""

    def __init__(self) -> None:
        self.lo, self.hi = math.inf, -math.inf

    def update(self, a: np.ndarray) -> None:
        a = np.asarray(a)
        if a.size == 0 or np.isnan(a).all():
            return
        self.lo = min(self.lo, float(np.nanmin(a)))
        self.hi = max(self.hi, float(np.nanmax(a)))

    def update_range(self, lo, hi) -> None:
        """Merge a batch's (min, max), e.g. reduced inside the graph."""
        for v in (lo, hi):
            v = float(v)
            if not math.isnan(v):
                self.lo, self.hi = min(self.lo, v), max(self.hi, v)

    def result(self) -> tuple[float, float]:
        return (0.0, 0.0) if self.lo > self.hi else (self.lo, self.hi)


class AbsHistogram:
    """A histogram of ``|x|`` on a power-of-two grid of ``bins`` bins that widens as
    larger values arrive (see the module docstring); fixed memory, batching-independent."""

    def __init__(self, bins: int = PERCENTILE_BINS) -> None:
        if bins < 2 or bins & (bins - 1):
            raise ValueError("bins must be a power of two")
        self.bins = bins
        self.counts = np.zeros(bins, dtype=np.int64)
        self.exponent: int | None = None  # bin width 2**exponent; None while every value seen is 0
        self.amax = 0.0

    @property
    def width(self) -> float:
        return 0.0 if self.exponent is None else math.ldexp(1.0, self.exponent)

    def _exponent_for(self, amax: float) -> int:
        # the smallest k with bins * 2**k > amax: frexp gives amax/bins = m * 2**e, 0.5 <= m < 1
        return math.frexp(amax / self.bins)[1]

    def update(self, a: np.ndarray, name: str = "a tensor") -> None:
        a = _abs_values(a)
        if a.size == 0:
            return
        amax = _finite_abs_max(a, name)
        if amax > 0:
            k = self._exponent_for(max(amax, self.amax))
            if self.exponent is None:  # every earlier value was 0: it stays in bin 0
                self.exponent = k
            elif k > self.exponent:
                factor = 1 << (k - self.exponent)
                if factor >= self.bins:
                    merged = np.array([self.counts.sum()])
                else:
                    merged = self.counts.reshape(-1, factor).sum(axis=1)
                self.counts = np.zeros(self.bins, dtype=np.int64)
                self.counts[: len(merged)] = merged
                self.exponent = k
            self.amax = max(self.amax, amax)
        if self.exponent is None:
            self.counts[0] += a.size
            return
        idx = np.floor(np.ldexp(a, -self.exponent)).astype(np.int64)  # exact: a power-of-two scale
        self.counts += np.bincount(idx, minlength=self.bins)

    def percentile(self, pct: float) -> float:
        """The lower edge of the bin that holds the ``pct``-th percentile of ``|x|``
        (the ``ceil(pct/100 * n)``-th smallest value); ``max|x|`` for 100."""
        total = int(self.counts.sum())
        if total == 0 or self.amax == 0:
            return 0.0
        if pct >= 100:
            return self.amax
        rank = max(1, math.ceil(pct / 100.0 * total))
        idx = int(np.searchsorted(np.cumsum(self.counts), rank))
        return min(idx * self.width, self.amax)


def fixed_abs_histogram(a: np.ndarray, amax: float, bins: int = ENTROPY_BINS) -> np.ndarray:
    """Counts of ``|a|`` in ``bins`` equal bins over ``[0, amax]`` (the last one closed),
    for one batch; values above ``amax`` (none when ``amax`` is the data's maximum) are
    counted in the last bin."""
    a = _abs_values(a)
    if amax <= 0:
        return np.bincount(np.zeros(a.size, np.int64), minlength=bins)
    idx = np.minimum((a.astype(np.float64) * (bins / amax)).astype(np.int64), bins - 1)
    return np.bincount(idx, minlength=bins)


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """KL(P || Q) of two count vectors, each normalised to sum 1; infinite where Q is 0
    and P is not."""
    p = np.asarray(p, np.float64)
    q = np.asarray(q, np.float64)
    p, q = p / p.sum(), q / q.sum()
    mask = p > 0
    if (q[mask] == 0).any():
        return math.inf
    return float(np.sum(p[mask] * np.log(p[mask] / q[mask])))


def expand_levels(counts: np.ndarray, levels: int) -> np.ndarray:
    """Q of TensorRT's algorithm: ``counts`` merged into ``levels`` levels (bin ``j`` of
    ``n`` goes to level ``floor(j * levels / n)``), each level's sum spread evenly over
    its non-zero bins; empty bins stay empty."""
    counts = np.asarray(counts, np.float64)
    n = len(counts)
    starts = -(-np.arange(levels) * n // levels)  # first bin of each level: ceil(l * n / levels)
    nonzero = (counts > 0).astype(np.float64)
    sums = np.add.reduceat(counts, starts)
    sizes = np.add.reduceat(nonzero, starts)
    per_bin = np.divide(sums, sizes, out=np.zeros_like(sums), where=sizes > 0)
    return np.repeat(per_bin, np.diff(np.append(starts, n))) * nonzero


def entropy_threshold(counts: np.ndarray, amax: float, levels: int = ENTROPY_LEVELS) -> float:
    """TensorRT's KL-divergence threshold for a histogram of ``|x|`` with equal bins
    over ``[0, amax]`` (see the module docstring)."""
    counts = np.asarray(counts, np.int64)
    n = len(counts)
    if amax <= 0 or counts.sum() == 0:
        return 0.0
    if n <= levels:
        return amax
    width = amax / n
    tail = np.concatenate([np.cumsum(counts[::-1])[::-1], [0]])  # tail[i] = sum(counts[i:])
    best, best_i = math.inf, n
    for i in range(levels, n + 1):
        p = counts[:i].astype(np.float64)
        p[i - 1] += tail[i]
        q = expand_levels(counts[:i], levels)
        if not q.any():
            continue
        div = kl_divergence(p, q)
        if div < best:
            best, best_i = div, i
    return min((best_i + 0.5) * width, amax)

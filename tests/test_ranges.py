"""Streaming activation ranges: running min/max, |x| histograms, TensorRT's KL entropy,
against values worked out by hand on small, known distributions."""

import math

import numpy as np
import pytest

from aft_export.errors import AFTExportError
from aft_export.quantization.ranges import (AbsHistogram, MinMax, entropy_threshold, expand_levels, fixed_abs_histogram,
                               kl_divergence)  # fmt: skip


def test_minmax_runs_over_batches_and_ignores_nan():
    m = MinMax()
    assert m.result() == (0.0, 0.0)  # nothing seen
    m.update(np.array([[1.0, -2.0], [0.5, np.nan]], np.float32))
    m.update(np.array([3.0, 0.0], np.float32))
    m.update_range(np.float32(-5), np.float32(np.nan))
    assert m.result() == (-5.0, 3.0)


def test_abs_histogram_on_a_power_of_two_grid_widens_exactly():
    """bins=4: |x| in {0.5, 1.5, 3} gives width 1 (the smallest 2**k with 4 * 2**k > 3):
    counts [1, 1, 0, 1]. Then 7 arrives: width 2 (4 * 2 > 7), bins merge pairwise to
    [2, 1, 0, 0] and 7 lands in bin 3: [2, 1, 0, 1]."""
    h = AbsHistogram(bins=4)
    h.update(np.array([0.5, -1.5, 3.0], np.float32))
    assert h.width == 1.0 and h.counts.tolist() == [1, 1, 0, 1]
    h.update(np.array([-7.0, np.nan], np.float32))
    assert h.width == 2.0 and h.counts.tolist() == [2, 1, 0, 1] and h.amax == 7.0
    # an exact power of two as the maximum: 4 * 1 > 4 fails, so the width is 2, not 1
    g = AbsHistogram(bins=4)
    g.update(np.array([4.0], np.float32))
    assert g.width == 2.0 and g.counts.tolist() == [0, 0, 1, 0]


def test_abs_histogram_does_not_depend_on_the_batching():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(10_000) * np.exp(rng.uniform(-3, 3, 10_000))).astype(np.float32)
    whole = AbsHistogram(bins=64)
    whole.update(x)
    for order in (np.arange(x.size), np.argsort(np.abs(x)), np.argsort(-np.abs(x))):
        h = AbsHistogram(bins=64)
        for part in np.array_split(x[order], 37):
            h.update(part)
        assert h.width == whole.width and np.array_equal(h.counts, whole.counts)
    # zeros first: they stay in bin 0 until a non-zero value sets the grid
    z = AbsHistogram(bins=4)
    z.update(np.zeros(5, np.float32))
    z.update(np.array([3.0], np.float32))
    assert z.counts.tolist() == [5, 0, 0, 1]


def test_percentile_is_the_lower_edge_of_the_bin_of_the_rank():
    """|x| = 0.5, 1.5, 3, 7 on width 2: the 50th percentile is the 2nd value (1.5, bin 0:
    edge 0), the 75th the 3rd (3, bin 1: edge 2), the 100th the maximum."""
    h = AbsHistogram(bins=4)
    h.update(np.array([0.5, 1.5, 3.0, 7.0], np.float32))
    assert h.percentile(50) == 0.0 and h.percentile(75) == 2.0 and h.percentile(100) == 7.0
    assert AbsHistogram().percentile(99) == 0.0


def test_percentile_of_a_gaussian_within_a_bin():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(200_000).astype(np.float32)
    h = AbsHistogram()
    for part in np.array_split(x, 50):
        h.update(part)
    ordered = np.sort(np.abs(x))
    at = ordered[math.ceil(0.99 * x.size) - 1]
    assert at - h.width <= h.percentile(99) <= at
    assert abs(at - 2.5758) < 0.02  # the 99th percentile of |N(0, 1)|


def test_infinite_activation_is_refused():
    with pytest.raises(AFTExportError, match="infinite"):
        AbsHistogram().update(np.array([1.0, np.inf], np.float32), "x")


def test_fixed_histogram_counts_the_maximum_in_the_last_bin():
    assert fixed_abs_histogram(np.array([0.0, -1.0, 2.0, 4.0], np.float32), 4.0, bins=4).tolist() == [1, 1, 1, 1]
    assert fixed_abs_histogram(np.zeros(3, np.float32), 0.0, bins=4).tolist() == [3, 0, 0, 0]


def test_q_is_merged_into_levels_and_spread_over_non_zero_bins():
    """The example of NVIDIA's GTC 2017 talk (s7310): P = [1 0 2 3 5 3 1 7] in 2 levels
    is [6, 16]; expanded over the non-zero bins of each level: [2 0 2 2 4 4 4 4]."""
    assert expand_levels(np.array([1, 0, 2, 3, 5, 3, 1, 7]), 2).tolist() == [2, 0, 2, 2, 4, 4, 4, 4]
    # 3 bins in 2 levels: bin j goes to level floor(2j / 3): bins 0, 1 | bin 2
    assert expand_levels(np.array([8, 2, 1]), 2).tolist() == [5, 5, 1]


def test_kl_divergence_by_hand():
    assert kl_divergence([1, 1], [1, 3]) == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3))
    assert kl_divergence([2, 2], [1, 1]) == 0.0
    assert kl_divergence([1, 1], [1, 0]) == math.inf
    assert kl_divergence([1, 0], [1, 1]) == pytest.approx(math.log(2))


def test_entropy_threshold_by_hand():
    """counts [8, 2, 1, 1] of width 1 (max 4), 2 levels. Candidates, KL(P || Q):
    i=2: P = [8, 2+2], Q = [8, 2]: 2/3 ln(5/6) + 1/3 ln(5/3) = 0.0487;
    i=3: P = [8, 2, 1+1], Q = [5, 5, 1]: 0.1891;
    i=4: P = [8, 2, 1, 1], Q = [5, 5, 1, 1]: 2/3 ln(8/5) + 1/6 ln(2/5) = 0.1606.
    So i = 2 and the threshold is (2 + 0.5) * 1."""
    assert kl_divergence([8, 4], [8, 2]) == pytest.approx(2 / 3 * math.log(5 / 6) + 1 / 3 * math.log(5 / 3))
    assert kl_divergence([8, 2, 1, 1], [5, 5, 1, 1]) == pytest.approx(2 / 3 * math.log(8 / 5) + 1 / 6 * math.log(2 / 5))
    assert entropy_threshold(np.array([8, 2, 1, 1]), 4.0, levels=2) == 2.5
    # an outlier beyond an empty bin: cutting at the empty bin is infinite, so i=4 (Q = P)
    # wins, and the threshold (4.5) is clamped to the maximum
    assert entropy_threshold(np.array([4, 4, 0, 1]), 4.0, levels=2) == 4.0
    assert entropy_threshold(np.zeros(2048, np.int64), 0.0) == 0.0


def test_entropy_of_a_uniform_body_with_an_outlier_is_the_body_edge():
    """|U(-1, 1)| with one value at 10: 2048 bins of width 10/2048; the body's edge 1
    lies in bin 204. Cutting inside the body folds body mass into the top bin; cutting
    past bin 204 puts the outlier into an empty bin (infinite KL); so i = 205 and the
    threshold is 205.5 * 10 / 2048."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 200_000).astype(np.float32)
    x[123] = 10.0
    counts = sum(fixed_abs_histogram(part, 10.0) for part in np.array_split(x, 7))
    assert entropy_threshold(counts, 10.0) == pytest.approx(205.5 * 10 / 2048)

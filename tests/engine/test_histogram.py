"""Upstream histogram tests (``pkg/recommender/util/histogram_test.go``,
``decaying_histogram_test.go``, ``histogram_options_test.go``), with their exact
numbers."""

import math

import numpy as np
import pytest

from recommender.engine.gomath import go_log, go_pow_int, go_pow_int8_loop
from recommender.engine.histogram import (
    HistogramBatch,
    exponential_options,
    linear_options,
)

EPS = 1e-15
T0 = 1234567890.0  # decaying_histogram_test.go: startTime = time.Unix(1234567890, 0)
HOUR = 3600.0
ROW = np.array([0])


def plain(max_value=10.0, size=1.0, eps=EPS):
    return HistogramBatch(linear_options(max_value, size, eps), 1)


def decaying():
    return HistogramBatch(linear_options(10.0, 1.0, EPS), 1, half_life_s=HOUR)


def add(h, value, weight):
    h.add_cells(
        ROW, h.options.find_bucket(np.array([value])), np.array([float(weight)])
    )


def sub(h, value, weight):
    h.subtract_step(
        ROW, h.options.find_bucket(np.array([value])), np.array([float(weight)])
    )


def dadd(h, value, weight, t):
    h.add_step(
        ROW,
        h.options.find_bucket(np.array([value])),
        weight * h.decay_factors(ROW, np.array([t])),
    )


def pct(h, p):
    return float(h.percentile(ROW, p)[0])


def empty(h):
    return bool(h.is_empty(ROW)[0])


def test_percentiles_of_empty_histogram_are_zero():  # 1 TestPercentilesEmptyHistogram
    h = plain()
    for p in (-0.5, 0.0, 0.5, 1.0, 1.5):
        assert pct(h, p) == 0.0


def test_percentiles_are_upper_bucket_edges():  # 2 TestPercentiles
    h = plain()
    for i in range(1, 5):
        add(h, i, i)
    expected = {
        0.0: 2,
        0.1: 2,
        0.2: 3,
        0.3: 3,
        0.4: 4,
        0.5: 4,
        0.6: 4,
        0.7: 5,
        0.8: 5,
        0.9: 5,
        1.0: 5,
    }
    for p, want in expected.items():
        assert pct(h, p) == want, p


def test_percentile_out_of_bounds():  # 3 TestPercentileOutOfBounds
    h = plain(1.0, 0.1)
    add(h, 0.1, 0.1)
    add(h, 0.2, 0.2)
    assert pct(h, -0.1) == pytest.approx(0.2)
    assert pct(h, 1.1) == pytest.approx(0.3)
    add(h, 0.0, 0.1)
    add(h, 1.0, 0.2)
    assert pct(h, -0.1) == pytest.approx(0.1)
    assert pct(h, 1.1) == pytest.approx(1.0)  # start of the open last bucket


def test_empty_after_subtracting_below_epsilon():  # 4 TestEmptyHistogram
    eps = 1e-4
    h = plain(1.0, 0.1, eps)
    add(h, 0.1, 2.5 * eps)
    assert not empty(h)
    sub(h, 0.1, eps)
    assert not empty(h)
    sub(h, 0.1, eps)
    assert empty(h)


def test_non_empty_on_epsilon_addition():  # 5 TestNonEmptyOnEpsilonAddition
    eps = 1e-4
    h = plain(10.0, 1.0, eps)
    add(h, 9.9, 3 * eps)
    assert not empty(h)
    add(h, 0.1, 0.3 * eps)
    assert not empty(h)
    add(h, 999.9, 0.3 * eps)
    assert not empty(h)


def test_merge_adds_weights():  # 6 TestHistogramMerge
    h1, h2, want = plain(), plain(), plain()
    for v in (1, 2):
        add(h1, v, 1)
    for v in (2, 3):
        add(h2, v, 1)
    for v, w in ((1, 1), (2, 2), (3, 1)):
        add(want, v, w)
    h1.merge_row(0, h2, 0)
    np.testing.assert_array_equal(h1.weight, want.weight)
    assert (h1.min_bucket[0], h1.max_bucket[0]) == (1, 3)


def test_checkpoint_of_empty_histogram():  # 7 TestHistogramSaveToCheckpointEmpty
    cp = plain().save_v3(0)
    assert cp == {"totalWeight": 0.0, "bucketWeights": {}}


def test_checkpoint_of_one_sample():  # 8 TestHistogramSaveToCheckpoint
    h = plain()
    add(h, 1, 1)
    assert h.save_v3(0) == {"totalWeight": 1.0, "bucketWeights": {"1": 10000}}


def test_checkpoint_drops_relatively_small_values():  # 9
    h = plain()
    add(h, 1, 1)
    add(h, 2, 100000)
    assert h.save_v3(0) == {"totalWeight": 100001.0, "bucketWeights": {"2": 10000}}


def test_checkpoint_for_multiple_values():  # 10
    h = plain()
    add(h, 1, 1)
    add(h, 2, 10000)
    add(h, 3, 50)
    assert h.save_v3(0) == {
        "totalWeight": 10051.0,
        "bucketWeights": {"1": 1, "2": 10000, "3": 50},
    }


def test_load_from_checkpoint():  # 11 TestHistogramLoadFromCheckpoint
    h = plain()
    h.load_v3(0, {"totalWeight": 6.0, "bucketWeights": {"0": 1, "1": 2}})
    assert list(h.weight[0, :2]) == [2.0, 4.0]
    assert h.total[0] == 6.0


@pytest.mark.parametrize(
    "checkpoint",
    [
        {"totalWeight": 1.0, "bucketWeights": {"-1": 1}},  # NegativeBucket
        {"totalWeight": 1.0, "bucketWeights": {"99": 1}},  # InvalidBucket
        {"totalWeight": -1.0, "bucketWeights": {"0": 1}},  # NegativeTotaWeight
        None,  # NilInput
    ],
)
def test_load_from_bad_checkpoint_fails(checkpoint):  # 12
    with pytest.raises(ValueError):
        plain().load_v3(0, checkpoint)


def test_not_empty_after_checkpoint_round_trip_at_boundary():  # 13
    eps = 1e-4
    h = plain(10.0, 1.0, eps)
    add(h, 1, eps)
    add(h, 2, 10000 * eps - eps)
    loaded = plain(10.0, 1.0, eps)
    loaded.load_v3(0, h.save_v3(0))
    assert not empty(loaded)


def test_linear_options():  # 14 TestLinearHistogramOptions
    o = linear_options(5.0, 0.3, 0.001)
    assert o.num_buckets == 18
    assert o.bucket_start[17] == pytest.approx(5.1)
    assert [o.find_bucket_scalar(v) for v in (-1, 0, 1.3, 100)] == [0, 0, 4, 17]
    assert list(o.find_bucket(np.array([-1, 0, 1.3, 100]))) == [0, 0, 4, 17]


def test_exponential_options():  # 15 TestExponentialHistogramOptions
    o = exponential_options(500.0, 40.0, 1.5, 0.001)
    assert o.num_buckets == 6
    assert list(o.bucket_start) == pytest.approx([0, 40, 100, 190, 325, 527.5])
    values = [-1, 39.99, 40, 100, 900]
    assert [o.find_bucket_scalar(v) for v in values] == [0, 0, 1, 2, 5]
    assert list(o.find_bucket(np.array(values))) == [0, 0, 1, 2, 5]


@pytest.mark.parametrize(
    "args",
    [(0, 1, 0.1), (10, 0, 0.1), (10, 1, 0)],
)
def test_linear_options_reject_non_positive(args):
    with pytest.raises(ValueError):
        linear_options(*args)


def test_exponential_options_reject_ratio_not_above_one():
    with pytest.raises(ValueError, match="ratio"):
        exponential_options(10.0, 1.0, 1.0, 0.1)


def test_simple_decay():  # 16 TestSimpleDecay
    h = decaying()
    dadd(h, 2, 1000, T0)
    dadd(h, 1, 1, T0 + 20 * HOUR)
    assert pct(h, 0.999) == 2
    assert pct(h, 1.0) == 3


def test_longterm_decay():  # 17 TestLongtermDecay
    h = decaying()
    dadd(h, 2, 1, T0)
    dadd(h, 1, 1, T0 + 101 * HOUR)
    assert pct(h, 1.0) == 2


def test_decaying_percentiles():  # 18 TestDecayingHistogramPercentiles
    h = decaying()
    for i in range(1, 5):
        dadd(h, i, i, T0 + (i - 1) * HOUR)
    expected = {0.0: 2, 0.02: 2, 0.03: 3, 0.10: 3, 0.11: 4, 0.34: 4, 0.35: 5, 1.0: 5}
    for p, want in expected.items():
        assert pct(h, p) == want, p


def test_no_decay_at_one_timestamp():  # 19 TestNoDecay
    h = decaying()
    for i in range(1, 5):
        dadd(h, i, i, T0)
    expected = {
        0.0: 2,
        0.1: 2,
        0.2: 3,
        0.3: 3,
        0.4: 4,
        0.5: 4,
        0.6: 4,
        0.7: 5,
        0.8: 5,
        0.9: 5,
        1.0: 5,
    }
    for p, want in expected.items():
        assert pct(h, p) == want, p


def test_decaying_merge():  # 20 TestDecayingHistogramMerge
    h1, h2, want = decaying(), decaying(), decaying()
    dadd(h1, 1, 1, T0)
    dadd(h1, 2, 1, T0 + HOUR)
    dadd(h2, 2, 1, T0 + 2 * HOUR)
    dadd(h2, 3, 1, T0 + HOUR)
    # In upstream's order.
    for v, t in ((2, T0 + 2 * HOUR), (2, T0 + HOUR), (3, T0 + HOUR), (1, T0)):
        dadd(want, v, 1, t)
    h1.merge_row(0, h2, 0)
    np.testing.assert_allclose(h1.weight, want.weight, rtol=0, atol=1e-15)
    assert (h1.min_bucket[0], h1.max_bucket[0]) == (
        want.min_bucket[0],
        want.max_bucket[0],
    )
    assert h1.reference_s[0] == want.reference_s[0]


def test_decaying_load_from_checkpoint():  # 21 TestDecayingHistogramLoadFromCheckpoint
    ref = 1514862245.0  # 2018-01-02T03:04:05Z
    h = decaying()
    h.load_v3(
        0, {"totalWeight": 6.0, "bucketWeights": {"0": 1}, "referenceTimestamp": ref}
    )
    assert not empty(h)
    assert h.reference_s[0] == ref


def test_memory_bucket_4_uses_go_pow():  # Go's math.Pow loop, not libm
    from recommender.engine.config import memory_histogram_options

    starts = memory_histogram_options().bucket_start
    assert int(starts[4]) == 43101249
    # Rounded starts; with libm's pow bucket 4 would truncate to 43101250.
    assert list(starts[:8]) == pytest.approx(
        [0, 10000000, 20500000, 31525000, 43101250, 55256313, 68019128, 81420085],
        abs=0.51,
    )
    libm = 1e7 * (math.pow(1.05, 4) - 1) / (1.05 - 1)
    assert int(libm) == 43101250
    assert memory_histogram_options().num_buckets == 176
    assert math.pow(1.05, 4) != go_pow_int(1.05, 4)


def test_go_pow_int8_loop_differs_only_below_128():
    # Documented in docs/engine.md: Go tip's int8 loop would change some low bits.
    diffs = [
        n for n in range(1, 176) if go_pow_int8_loop(1.05, n) != go_pow_int(1.05, n)
    ]
    assert all(n < 128 for n in diffs)


def test_value_on_bucket_boundary_uses_go_log():  # math.Log: 20500000 B -> bucket 1
    from recommender.engine.config import memory_histogram_options

    o = memory_histogram_options()
    q = go_log(20500000 * o.ratio_minus_one / o.bucket_size + 1) / o.log_ratio
    assert (
        int(q)
        == o.find_bucket_scalar(20500000.0)
        == int(o.find_bucket(np.array([20500000.0]))[0])
    )

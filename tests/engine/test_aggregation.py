"""Upstream model tests (pkg/recommender/model/*_test.go, checkpoint_writer_test.go):
samples, windows, OOMs, expiry, checkpoints."""

import numpy as np
import pytest

from recommender.engine.config import memory_histogram_options
from recommender.engine.histogram import HistogramBatch

from .helpers import DAY, HOUR, MI, feed, new_set, oom

T = 1_600_000_000.0  # an arbitrary whole-second time
ROW = np.array([0])


def expected_memory(ops, half_life_s=DAY):
    """A memory histogram built from explicit (kind, bytes, time) operations."""
    h = HistogramBatch(memory_histogram_options(), 1, half_life_s)
    for kind, value, t in ops:
        b = h.options.find_bucket(np.array([float(value)]))
        w = 1.0 * h.decay_factors(ROW, np.array([t]))
        (h.add_step if kind == "add" else h.subtract_step)(ROW, b, w)
    return h


def assert_same_memory(aggs, ops, half_life_s=DAY):
    want = expected_memory(ops, half_life_s)
    np.testing.assert_array_equal(aggs.memory.weight[0], want.weight[0])
    assert aggs.memory.total[0] == want.total[0]
    assert (aggs.memory.min_bucket[0], aggs.memory.max_bucket[0]) == (
        want.min_bucket[0],
        want.max_bucket[0],
    )


def test_aggregate_container_usage_samples():  # 31
    aggs = new_set()
    for dt, cpu, mem in ((0, 3.14, 5), (12 * HOUR, 6.28, 10), (DAY, 1.57, 2)):
        feed(aggs, 0, "c", T + dt, cpu=cpu, mem=mem)
    cpu = HistogramBatch(aggs.cpu.options, 1, DAY)
    for v, t in ((3.14, T), (6.28, T + 12 * HOUR), (1.57, T + DAY)):
        cpu.add_step(
            ROW,
            cpu.options.find_bucket(np.array([v])),
            0.1 * cpu.decay_factors(ROW, np.array([t])),
        )
    np.testing.assert_array_equal(aggs.cpu.weight[0], cpu.weight[0])
    assert_same_memory(
        aggs,
        [
            ("add", 5, T + DAY),
            ("sub", 5, T + DAY),
            ("add", 10, T + DAY),
            ("add", 2, T + 2 * DAY),
        ],
    )
    before = aggs.cpu.weight.copy()
    stats = feed(aggs, 0, "c", T + HOUR, cpu=1.0, mem=1.0)  # out of order
    stats2 = feed(aggs, 0, "c", T + 2 * DAY, cpu=-1.0, mem=-1.0)  # negative
    assert (
        stats.cpu_dropped,
        stats.memory_dropped,
        stats2.cpu_dropped,
        stats2.memory_dropped,
    ) == (1, 1, 1, 1)
    np.testing.assert_array_equal(aggs.cpu.weight, before)
    assert aggs.sample_count()[0] == 3


def test_oom_increased_by_bump_up():  # 32
    aggs = new_set()
    assert oom(aggs, 0, "c", T, 1000 * MI).oom_accepted == 1
    assert_same_memory(aggs, [("add", 1200 * MI, T + DAY)])


def test_oom_dont_run_away():  # 33
    aggs = new_set()
    oom(aggs, 0, "c", T, 1000 * MI)
    oom(aggs, 0, "c", T, 999 * MI)
    oom(aggs, 0, "c", T, 999 * MI)
    assert_same_memory(aggs, [("add", 1200 * MI, T + DAY)])
    oom(aggs, 0, "c", T, 2000 * MI)
    assert_same_memory(
        aggs,
        [
            ("add", 1200 * MI, T + DAY),
            ("sub", 1200 * MI, T + DAY),
            ("add", 2400 * MI, T + DAY),
        ],
    )


def test_oom_increased_by_min():  # 34
    aggs = new_set()
    oom(aggs, 0, "c", T, 1 * MI)
    assert_same_memory(aggs, [("add", 101 * MI, T + DAY)])


def test_oom_maxed_with_known_sample():  # 35
    aggs = new_set()
    feed(aggs, 0, "c", T, mem=3000 * MI)
    oom(aggs, 0, "c", T, 1000 * MI)
    assert_same_memory(
        aggs,
        [
            ("add", 3000 * MI, T + DAY),
            ("sub", 3000 * MI, T + DAY),
            ("add", 3600 * MI, T + DAY),
        ],
    )


def test_oom_discards_old_sample():  # 36
    aggs = new_set()
    feed(aggs, 0, "c", T, mem=1000 * MI)
    stats = oom(aggs, 0, "c", T - 30 * HOUR, 1000 * MI)
    assert (stats.oom_accepted, stats.oom_dropped) == (0, 1)


def test_oom_in_new_window():  # 37
    aggs = new_set()
    feed(aggs, 0, "c", T, mem=2000 * MI)
    oom(aggs, 0, "c", T + 2 * DAY, 1000 * MI)
    assert_same_memory(
        aggs, [("add", 2000 * MI, T + DAY), ("add", 2400 * MI, T + 3 * DAY)]
    )


def test_fresh_oom_near_window_boundary_is_not_discarded():  # 38
    aggs = new_set()
    feed(aggs, 0, "c", T, mem=100 * MI)
    feed(aggs, 0, "c", T + DAY, mem=2000 * MI)  # window end T + 48h
    stats = oom(aggs, 0, "c", T + DAY - 1, 1000 * MI)
    assert stats.oom_accepted == 1
    assert_same_memory(
        aggs,
        [
            ("add", 100 * MI, T + DAY),
            ("add", 2000 * MI, T + 2 * DAY),
            ("sub", 2000 * MI, T + 2 * DAY),
            ("add", 2400 * MI, T + 2 * DAY),
        ],
    )


def test_memory_samples_with_custom_interval():  # 39
    from recommender.engine.profiles import get_profile

    profile = get_profile("vpa").with_overrides(memory_window_s=HOUR)
    aggs = new_set(profile=profile)
    feed(aggs, 0, "c", T, mem=5)
    feed(aggs, 0, "c", T + 2 * HOUR, mem=10)
    assert_same_memory(aggs, [("add", 5, T + HOUR), ("add", 10, T + 3 * HOUR)])
    assert oom(aggs, 0, "c", T - 2 * HOUR, 1000 * MI).oom_dropped == 1


def test_is_expired():  # 40
    aggs = new_set(2, created_s=T)
    feed(aggs, 0, "c", T, cpu=1.0)
    assert aggs.is_expired(now_s=T + 7 * DAY).tolist() == [False, False]
    assert aggs.is_expired(now_s=T + 8 * DAY).tolist() == [True, True]


def test_save_to_checkpoint():  # 41
    aggs = new_set()
    t1, t2 = 1515107045.0, 1515210645.0  # arbitrary whole seconds
    aggs.cpu.add_step(
        ROW,
        aggs.cpu.options.find_bucket(np.array([1.0])),
        33 * aggs.cpu.decay_factors(ROW, np.array([t2])),
    )
    for v in (1.0, 1e7):
        b = aggs.memory.options.find_bucket(np.array([v]))
        aggs.memory.add_step(
            ROW, b, 55 * aggs.memory.decay_factors(ROW, np.array([t1]))
        )
    aggs.first_sample_s[0], aggs.last_sample_s_[0], aggs.total_samples[0] = t1, t2, 10
    cp = aggs.to_vpa_checkpoint(0, now_s=t2)
    assert cp["version"] == "v3"
    assert len(cp["cpuHistogram"]["bucketWeights"]) == 1
    assert len(cp["memoryHistogram"]["bucketWeights"]) == 2
    assert (cp["firstSampleStart"], cp["lastSampleStart"], cp["totalSamplesCount"]) == (
        "2018-01-04T23:04:05Z",
        "2018-01-06T03:50:45Z",
        10,
    )


def test_aggregate_state_by_container_name():  # 42
    aggs = new_set(3)  # rows: app-A, app-B, app-C
    for row, pod, mem in (
        (0, "pod-1", 2e9),
        (0, "pod-2", 4e9),
        (1, "pod-1", 2e9),
        (2, "pod-2", 4e9),
    ):
        feed(aggs, row, pod, T, cpu=1.0, mem=mem)
    assert aggs.sample_count().tolist() == [2, 1, 1]
    want = expected_memory([("add", 2e9, T + DAY), ("add", 4e9, T + DAY)])
    np.testing.assert_array_equal(aggs.memory.weight[0], want.weight[0])


def test_checkpoint_drops_recent_memory_peak():  # 43
    aggs = new_set()
    feed(aggs, 0, "c", 1.0, mem=2**30)
    assert (
        aggs.to_vpa_checkpoint(0, now_s=1.0)["memoryHistogram"]["bucketWeights"] == {}
    )
    assert (
        aggs.to_vpa_checkpoint(0, now_s=1.0 + DAY)["memoryHistogram"]["bucketWeights"]
        != {}
    )
    assert aggs.memory.total[0] > 0  # the live state keeps the peak


def test_gc_deletes_old_and_old_empty():  # 44
    aggs = new_set(2, created_s=T)
    feed(aggs, 0, "c", T, cpu=1.0)
    assert aggs.is_expired(now_s=T + 9 * DAY).tolist() == [True, True]
    assert aggs.is_expired(now_s=T + 60).tolist() == [False, False]


def test_bad_batches_raise_value_error_naming_argument():
    from recommender.engine.batch import SampleBatch

    with pytest.raises(ValueError, match="timestamp_s"):
        SampleBatch(
            series_aggregate=[0],
            series_keys=["a"],
            series_index=[0],
            timestamp_s=[1.0, 2.0],
            cpu_cores=[1.0],
            memory_bytes=[1.0],
        )
    with pytest.raises(ValueError, match="series_index"):
        SampleBatch(
            series_aggregate=[0],
            series_keys=["a"],
            series_index=[1],
            timestamp_s=[1.0],
            cpu_cores=[1.0],
            memory_bytes=[1.0],
        )
    with pytest.raises(ValueError, match="series_aggregate"):
        feed(new_set(), 5, "a", T, cpu=1.0)

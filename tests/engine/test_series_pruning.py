"""Forgetting the series of pods that are gone (upstream DeleteRemovedPods)."""

import numpy as np
import pytest

from recommender.engine.aggregation import AggregateSet
from recommender.engine.estimator import recommend
from recommender.engine.profiles import get_profile

from .helpers import HOUR, feed, new_set

T = 1_600_000_000.0
MB = 1e6


def histograms(aggs):
    return [
        (
            h.weight.tolist(),
            h.total.tolist(),
            h.min_bucket.tolist(),
            h.max_bucket.tolist(),
        )
        for h in (aggs.cpu, aggs.memory)
    ]


def two_pods_then_one_left():
    """Row 0 fed by pods "a" and "b", row 1 by "c"; then only "a" of row 0 is live."""
    aggs = new_set(2)
    for i in range(3):
        feed(aggs, 0, "a", T + i * HOUR, cpu=0.5, mem=300 * MB)
        feed(aggs, 0, "b", T + i * HOUR, cpu=1.5, mem=900 * MB)
        feed(aggs, 1, "c", T + i * HOUR, cpu=0.2, mem=100 * MB)
    return aggs


def test_a_gone_pods_series_is_dropped_and_its_samples_stay():
    aggs = two_pods_then_one_left()
    before = histograms(aggs)
    counts = aggs.sample_count().tolist()
    rec_before = recommend(
        aggs, rows=[0, 1], profile=aggs.profile, containers_in_pod=[1, 1]
    )

    assert aggs.prune_series(live_keys={0: {"a"}}) == 1

    assert aggs.series_keys(0) == ["a"]
    assert aggs.series_keys(1) == ["c"]  # a row not named keeps all its series
    assert histograms(aggs) == before
    assert aggs.sample_count().tolist() == counts
    rec_after = recommend(
        aggs, rows=[0, 1], profile=aggs.profile, containers_in_pod=[1, 1]
    )
    assert rec_after == rec_before
    assert aggs.prune_series(live_keys={0: {"a"}}) == 0  # nothing left to drop


def test_kept_series_keep_their_watermarks_after_renumbering():
    aggs = two_pods_then_one_left()
    aggs.drop_series(0, keep=["b"])  # "a", the first series, goes: ids shift
    stats = feed(aggs, 0, "b", T + 2 * HOUR, cpu=9.0)  # b's last CPU time: a duplicate
    assert (stats.cpu_accepted, stats.cpu_dropped) == (0, 1)
    stats = feed(aggs, 1, "c", T + 2 * HOUR, cpu=9.0)
    assert (stats.cpu_accepted, stats.cpu_dropped) == (0, 1)
    assert aggs.series_keys(0) == ["b"]


def test_a_name_that_comes_back_starts_a_new_series_like_a_new_pod():
    # Upstream: a pod deleted and seen again gets a new ContainerState, exactly as a
    # pod with a new name would.
    returned = two_pods_then_one_left()
    renamed = two_pods_then_one_left()
    returned.drop_series(0, keep=["a"])
    # The same timestamp as b's watermark: a duplicate for the old series, new data for
    # a new one; the memory sample opens a new window with its own peak.
    feed(returned, 0, "b", T + 2 * HOUR, cpu=1.5, mem=950 * MB)
    feed(renamed, 0, "b2", T + 2 * HOUR, cpu=1.5, mem=950 * MB)

    assert histograms(returned) == histograms(renamed)
    assert returned.sample_count().tolist() == renamed.sample_count().tolist()
    assert returned.series_keys(0) == ["a", "b"]


def test_checkpoints_no_longer_carry_dropped_series():
    aggs = two_pods_then_one_left()
    full = aggs.to_checkpoints()
    aggs.prune_series(live_keys={0: [], 1: ["c"]})  # row 0: no pod left (a CronJob)

    blobs = aggs.to_checkpoints()
    again = AggregateSet.from_checkpoints(aggs.profile, blobs)

    assert again.series_keys(0) == [] and again.series_keys(1) == ["c"]
    assert len(blobs[0]) < len(full[0]) and blobs[1] == full[1]
    assert histograms(again) == histograms(aggs)


def test_series_idle_before_a_cutoff_are_dropped():
    aggs = two_pods_then_one_left()
    feed(aggs, 0, "a", T + 5 * HOUR, cpu=0.5)  # CPU only: still counts as activity
    feed(aggs, 1, "c", T + 5 * HOUR, mem=100 * MB)  # memory only, too

    assert aggs.drop_series_idle_before(T + 4 * HOUR) == 1

    assert aggs.series_keys(0) == ["a"] and aggs.series_keys(1) == ["c"]
    assert aggs.drop_series_idle_before(T + 5 * HOUR) == 0
    assert aggs.drop_series_idle_before(T + 6 * HOUR) == 2


def test_bad_live_keys_are_rejected_naming_the_argument():
    aggs = two_pods_then_one_left()
    with pytest.raises(ValueError, match="live_keys"):
        aggs.prune_series(live_keys={2: ["a"]})
    with pytest.raises(ValueError, match=r"live_keys\[0\]"):
        aggs.prune_series(live_keys={0: "a"})  # a string is not a set of names
    with pytest.raises(ValueError, match="cutoff_s"):
        aggs.drop_series_idle_before(float("nan"))
    assert aggs.series_keys(0) == ["a", "b"]  # nothing dropped by a rejected call


def test_pruning_many_rows_at_once_matches_one_row_at_a_time():
    rng = np.random.default_rng(3)
    one_by_one = new_set(20, get_profile("vpa"))
    for row in range(20):
        for pod in range(int(rng.integers(1, 5))):
            feed(one_by_one, row, f"p{pod}", T, cpu=0.1 * (pod + 1), mem=(pod + 1) * MB)
    at_once = AggregateSet.from_checkpoints(
        one_by_one.profile, one_by_one.to_checkpoints()
    )
    live = {row: {f"p{k}" for k in range(row % 3)} for row in range(0, 20, 2)}

    dropped = at_once.prune_series(live_keys=live)

    assert dropped == sum(
        one_by_one.drop_series(row, keys) for row, keys in live.items()
    )
    assert at_once.to_checkpoints() == one_by_one.to_checkpoints()

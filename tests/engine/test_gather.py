"""AggregateSet.gather: rows copied from other sets, decoded from blobs or empty, equal
to decoding every row's blob (the refresh's warm rows, docs/refresh.md)."""

import pytest

from recommender.engine.aggregation import AggregateSet
from recommender.engine.profiles import get_profile

from .helpers import HOUR, feed, new_set

T = 1_600_000_000.0
MB = 1e6


def fed_set(pods: list[tuple[int, str, float]]) -> AggregateSet:
    """A set of 3 rows fed by (row, pod, cpu cores) for three hours."""
    aggs = new_set(3)
    for i in range(3):
        for row, pod, cpu in pods:
            feed(aggs, row, pod, T + i * HOUR, cpu=cpu, mem=cpu * 600 * MB)
    return aggs


def test_gathered_rows_equal_the_decoded_blobs_of_those_rows():
    first = fed_set([(0, "a", 0.5), (0, "b", 1.5), (1, "c", 0.2), (2, "d", 3.0)])
    second = fed_set([(0, "e", 0.7), (1, "f", 0.1), (1, "g", 0.9), (2, "h", 2.0)])
    blobs = first.to_checkpoints() + second.to_checkpoints()
    profile = first.profile
    sources = [(second, 1), blobs[0], None, (first, 2), (second, 0), (first, 1)]
    gathered = AggregateSet.gather(profile, sources)
    decoded = AggregateSet.from_checkpoints(
        profile, [blobs[4], blobs[0], None, blobs[2], blobs[3], blobs[1]]
    )
    assert gathered.to_checkpoints() == decoded.to_checkpoints()
    assert [gathered.series_keys(r) for r in range(6)] == [
        ["f", "g"],
        ["a", "b"],
        [],
        ["d"],
        ["e"],
        ["c"],
    ]
    # A copy: feeding the gathered set leaves the sources as they were.
    before = first.to_checkpoints()
    feed(gathered, 3, "d", T + 4 * HOUR, cpu=9.0, mem=5000 * MB)
    assert first.to_checkpoints() == before


def test_a_set_of_another_histogram_key_is_refused_naming_the_source():
    other = AggregateSet(get_profile("vpa").with_overrides(cpu_half_life_s=3600.0), 1)
    with pytest.raises(ValueError, match=r"sources\[1\]"):
        AggregateSet.gather(get_profile("vpa"), [None, (other, 0)])

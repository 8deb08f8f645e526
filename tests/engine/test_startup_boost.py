"""CPU startup boost arithmetic: factor or quantity, limits kept at their ratio (the
QoS class never changes), capped, and no boost that would not raise the request."""

from __future__ import annotations

import pytest

from recommender.engine.startup_boost import boosted_cpu, parse_boost, parse_duration_s


def test_durations_read_as_seconds() -> None:
    assert parse_duration_s("5m") == 300
    assert parse_duration_s("1h30m") == 5400
    assert parse_duration_s(45) == 45
    with pytest.raises(ValueError, match="duration"):
        parse_duration_s("5 minutes")


def test_a_factor_boosts_request_and_limit_at_their_ratio() -> None:
    spec = parse_boost({"factor": 2, "duration": "5m"})
    assert spec is not None
    boosted = boosted_cpu(
        spec,
        request_millicores=250,
        limit_millicores=500,
        requests_only=False,
        cap_millicores=None,
    )
    assert (boosted.request_millicores, boosted.limit_millicores) == (500, 1000)


def test_a_guaranteed_container_stays_guaranteed() -> None:
    spec = parse_boost({"quantity": "500m", "duration": "1m"})
    assert spec is not None
    boosted = boosted_cpu(
        spec,
        request_millicores=300,
        limit_millicores=300,
        requests_only=False,
        cap_millicores=None,
    )
    assert boosted.request_millicores == boosted.limit_millicores == 800


def test_requests_only_stays_under_the_limit_or_skips() -> None:
    spec = parse_boost({"factor": 3, "duration": 0})
    assert spec is not None
    under = boosted_cpu(
        spec,
        request_millicores=200,
        limit_millicores=400,
        requests_only=True,
        cap_millicores=None,
    )
    assert (under.request_millicores, under.limit_millicores) == (400, 400)
    equal = boosted_cpu(
        spec,
        request_millicores=400,
        limit_millicores=400,
        requests_only=True,
        cap_millicores=None,
    )
    assert equal.request_millicores == 400
    assert "limit" in equal.skip


def test_the_cap_bounds_the_boost_and_a_capped_out_boost_is_skipped() -> None:
    spec = parse_boost({"factor": 4, "duration": "5m"})
    assert spec is not None
    capped = boosted_cpu(
        spec,
        request_millicores=500,
        limit_millicores=None,
        requests_only=False,
        cap_millicores=1200,
    )
    assert (capped.request_millicores, capped.limit_millicores, capped.skip) == (
        1200,
        None,
        "",
    )
    none = boosted_cpu(
        spec,
        request_millicores=500,
        limit_millicores=None,
        requests_only=False,
        cap_millicores=500,
    )
    assert none.skip and none.request_millicores == 500

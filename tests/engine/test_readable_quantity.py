"""Readable quantities: memory rounded UP to a canonical quantity people
and kubectl read; never below the amount, unlike upstream's --humanize-memory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recommender.engine.quantity import (
    MAX_INT64,
    format_memory,
    format_memory_readable,
    humanized_memory_bytes,
    parse_memory_bytes,
    readable_memory_bytes,
    readable_resource_list,
)
from recommender.engine.resources import Resources

KI, MI, GI = 2**10, 2**20, 2**30


@pytest.mark.parametrize(
    ("bytes_", "text"),
    [
        (0, "0"),
        (1, "1Ki"),  # below 1 MiB: whole KiB
        (1000, "1Ki"),
        (KI, "1Ki"),
        (KI + 1, "2Ki"),
        (MI - 1, "1Mi"),
        (MI, "1Mi"),  # exact: unchanged
        (MI + 1, "2Mi"),  # just above: the next MiB
        (131072000, "125Mi"),  # the pod minimum share stays as it is
        (764046746, "729Mi"),  # the raw bytes: 728.66 MiB
        (1352914698, "1291Mi"),  # 1.26 GiB
        (GI - 1, "1Gi"),
        (GI, "1Gi"),  # exact GiB print as Gi
        (GI + 1, "1025Mi"),  # just above a GiB: canonical MiB, not "1.00Gi"
        (100 * GI - 1, "100Gi"),
        (100 * GI, "100Gi"),  # the last amount rounded to MiB
        (100 * GI + 1, "101Gi"),  # above 100 GiB: whole GiB (< 1 % more)
        (10**14, "93133Gi"),  # upstream's 1e14 clamp
    ],
)
def test_readable_memory_is_canonical_and_rounded_up(bytes_, text):
    assert format_memory_readable(bytes_) == text
    # Canonical: what the API server would print back for it.
    assert format_memory(parse_memory_bytes(text)) == text
    assert parse_memory_bytes(text) >= bytes_


def test_upstream_humanize_memory_can_read_below_the_amount_this_cannot():
    # upstream's "%.2f" rounds to nearest: 1050000 B -> "1.00Mi" = 1048576 B.
    assert humanized_memory_bytes(1050000) < 1050000
    assert readable_memory_bytes(1050000) == 2 * MI


@given(st.integers(min_value=0, max_value=2**50))
def test_never_below_and_less_than_one_unit_above(bytes_):
    readable = readable_memory_bytes(bytes_)
    assert bytes_ <= readable
    step = KI if bytes_ <= MI else MI if bytes_ <= 100 * GI else GI
    assert readable - bytes_ < step
    assert readable % step == 0


@given(st.integers(min_value=0, max_value=2**50), st.integers(0, 2**40))
def test_monotonic_so_limits_stay_at_or_above_requests(request_, extra):
    assert readable_memory_bytes(request_) <= readable_memory_bytes(request_ + extra)


def test_max_int64_does_not_overflow():
    assert readable_memory_bytes(MAX_INT64) == MAX_INT64


def test_readable_resource_list_rounds_memory_only():
    assert readable_resource_list(Resources(587, 764046746)) == {
        "cpu": "587m",
        "memory": "729Mi",
    }
    assert readable_resource_list(Resources(1000, None)) == {"cpu": "1"}
    assert readable_resource_list(Resources(1500, 0)) == {"cpu": "1500m", "memory": "0"}

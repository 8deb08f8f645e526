"""Kubernetes quantities: parse and format as apimachinery does; upstream helpers."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recommender.engine.quantity import (
    MAX_INT64,
    format_cpu,
    format_memory,
    format_memory_decimal,
    humanize_cpu,
    humanize_memory,
    humanize_memory_quantity,
    humanized_memory_bytes,
    parse_cpu_millicores,
    parse_memory_bytes,
    round_up,
)


@pytest.mark.parametrize(
    ("text", "millicores"),
    [
        ("587m", 587),
        ("1", 1000),
        ("1.5", 1500),
        ("1500m", 1500),
        ("2k", 2_000_000),
        ("1e3", 1_000_000),
        ("1E3", 1_000_000),
        ("1e-3", 1),
        ("100u", 1),  # MilliValue() rounds up to whole millicores
        ("1n", 1),
        ("0.0001", 1),
        ("1001u", 2),
        ("0", 0),
        ("0m", 0),
        ("-0", 0),
        ("+2", 2000),
        (".5", 500),
        ("1.", 1000),
        ("0.1", 100),
        ("9223372036854775807m", MAX_INT64),
    ],
)
def test_parse_cpu_rounds_up_to_millicores_like_milli_value(text, millicores):
    assert parse_cpu_millicores(text) == millicores


@pytest.mark.parametrize(
    ("text", "bytes_"),
    [
        ("250Mi", 262144000),
        ("1Gi", 1073741824),
        ("1G", 1_000_000_000),
        ("129M", 129_000_000),
        ("1e9", 1_000_000_000),
        ("123", 123),
        ("1.5Gi", 1610612736),
        ("1m", 1),  # Value() rounds a fractional byte up
        ("0.5", 1),
        ("4.65Gi", 4992899482),  # 4992899481.6 rounded up
        ("1Ki", 1024),
        ("1k", 1000),
        ("7Ei", 7 * 2**60),
        ("1E", 10**18),
    ],
)
def test_parse_memory_rounds_up_to_bytes_like_value(text, bytes_):
    assert parse_memory_bytes(text) == bytes_


@pytest.mark.parametrize(
    ("millicores", "text"),
    [
        (587, "587m"),
        (1000, "1"),
        (1500, "1500m"),
        (10**14, "100G"),  # model.MaxResourceAmount
        (0, "0"),
        (1, "1m"),
        (100, "100m"),
        (10_000, "10"),
        (1_001_000, "1001"),
        (25, "25m"),
        (MAX_INT64, "9223372036854775807m"),
    ],
)
def test_format_cpu_is_canonical_decimal_si(millicores, text):
    assert format_cpu(millicores) == text


@pytest.mark.parametrize(
    ("bytes_", "text"),
    [
        (262144000, "250Mi"),
        (1073741824, "1Gi"),
        (628694953, "628694953"),
        (131072000, "125Mi"),
        (1024, "1Ki"),
        (2000, "2000"),
        (2**62, "4Ei"),
        (0, "0"),
        # CanonicalizeBytes prints BinarySI values below 1024 as DecimalSI.
        (1000, "1k"),
        (100, "100"),
        (10, "10"),
        (999, "999"),
        (1023, "1023"),
        (MAX_INT64, "9223372036854775807"),
    ],
)
def test_format_memory_is_canonical_binary_si(bytes_, text):
    assert format_memory(bytes_) == text


def test_format_memory_decimal_matches_vpa_before_1_5():
    assert format_memory_decimal(131072000) == "131072k"


@pytest.mark.parametrize(
    ("bytes_", "text"),
    [
        # TestHumanizeMemoryQuantity (recommender/model/types_test.go)
        (4992073454, "4.65Gi"),
        (6499152537, "6.05Gi"),
        (16357476492, "15.23Gi"),
        (1537, "1.50Ki"),
        # upstream model/types.go examples
        (1050000, "1.00Mi"),
        (839500000, "800.61Mi"),
        (262144000, "250.00Mi"),
        (500, "500"),
    ],
)
def test_humanize_memory_quantity_matches_upstream(bytes_, text):
    assert humanize_memory_quantity(bytes_) == text


def test_humanized_memory_bytes_reparses_the_text():
    assert humanized_memory_bytes(262144000) == 262144000
    assert humanized_memory_bytes(1537) == 1536
    # TestResourcesAsResourceList: 262144000 rounded to 268435456 humanizes to 256.00Mi.
    assert humanize_memory_quantity(round_up(262144000, 268435456)) == "256.00Mi"


def test_round_up_to_scale_matches_upstream():
    # TestRoundUpToScale (recommender/model/types_test.go)
    assert round_up(100, 7) == 105
    assert round_up(100, 10) == 100
    assert round_up(0, 5) == 0
    # upstream's --round-cpu-millicores and --round-memory-bytes
    assert round_up(1231241, 13) == 1231243
    assert format_memory(round_up(839500000, 134217728)) == "896Mi"
    # TestResourcesAsResourceList: CPU 1000m with round 3 gives 1002m.
    assert round_up(1000, 3) == 1002


def test_humanize_for_people():
    assert humanize_cpu(587) == "587m"
    assert humanize_cpu(1500) == "1.5 cores"
    assert humanize_cpu(1000) == "1 core"
    assert humanize_memory(4992073454) == "4.65 GiB"
    assert humanize_memory(262144000) == "250 MiB"
    assert humanize_memory(512) == "512 B"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("12 cores", "unexpected character ' '"),
        ("-1Gi", "negative"),
        ("", "empty"),
        ("1.2.3", "unexpected character '.'"),
        ("Mi", "no digits"),
        ("-", "no digits"),
        (".", "no digits"),
        ("1e100", "overflows"),
        ("9Ei", "overflows"),
        ("1e", "unknown unit 'e'"),
        ("1K", "unknown unit 'K'"),
        ("1Kib", "unexpected character 'b'"),
        ("1e3.5", "unexpected character '.'"),
    ],
)
def test_bad_memory_text_raises_value_error_quoting_it(text, fragment):
    with pytest.raises(ValueError, match="memory") as info:
        parse_memory_bytes(text)
    assert repr(text) in str(info.value)
    assert fragment in str(info.value)
    assert "expected a Kubernetes quantity" in str(info.value)


def test_bad_cpu_text_raises_value_error_quoting_it():
    with pytest.raises(ValueError, match=r"cpu '12 cores'"):
        parse_cpu_millicores("12 cores")
    with pytest.raises(ValueError, match="overflows int64 millicores"):
        parse_cpu_millicores("1E")  # 10**21 millicores
    with pytest.raises(ValueError, match="must be a string"):
        parse_cpu_millicores(5)


def test_format_rejects_negative_and_non_int():
    with pytest.raises(ValueError, match="millicores"):
        format_cpu(-1)
    with pytest.raises(ValueError, match="bytes_"):
        format_memory(1.5)
    with pytest.raises(ValueError, match="scale"):
        round_up(5, 0)


amounts = st.integers(min_value=0, max_value=MAX_INT64)


@given(amounts)
def test_cpu_format_parse_round_trip(millicores):
    text = format_cpu(millicores)
    assert parse_cpu_millicores(text) == millicores
    assert format_cpu(parse_cpu_millicores(text)) == text


@given(amounts)
def test_memory_format_parse_round_trip(bytes_):
    text = format_memory(bytes_)
    assert parse_memory_bytes(text) == bytes_
    assert format_memory(parse_memory_bytes(text)) == text


@given(
    st.integers(min_value=0, max_value=10**15),
    st.integers(min_value=1, max_value=10**9),
)
def test_round_up_is_the_least_multiple_not_below(value, scale):
    result = round_up(value, scale)
    assert result % scale == 0
    assert value <= result < value + scale


@pytest.mark.parametrize(
    ("millicores", "text"),
    [
        (587.6, "588m"),  # rounded, never truncated
        (12.34, "12.3m"),
        (999.4, "999m"),
        (999.6, "1 core"),  # rounds up into cores, not "1,000m"
        (1234, "1.23 cores"),
        (12345, "12.3 cores"),
        (1_234_567, "1,235 cores"),
        (-250, "-250m"),
        (-1500, "-1.5 cores"),
        (0, "0m"),
    ],
)
def test_humanize_cpu_three_significant_digits(millicores, text):
    assert humanize_cpu(millicores) == text


@pytest.mark.parametrize(
    ("bytes_", "text"),
    [
        (300 * 2**20, "300 MiB"),
        (int(1.5 * 2**30), "1.5 GiB"),
        (12.345 * 2**30, "12.3 GiB"),
        (1023.9 * 2**20, "1 GiB"),  # not "1,024 MiB"
        (1536, "1.5 KiB"),
        (-300 * 2**20, "-300 MiB"),
        (0, "0 B"),
    ],
)
def test_humanize_memory_three_significant_digits(bytes_, text):
    assert humanize_memory(bytes_) == text


@pytest.mark.parametrize("bad", [None, "1", True, float("nan"), float("inf")])
def test_humanizers_reject_non_numbers_naming_the_argument(bad):
    with pytest.raises(ValueError, match="millicores"):
        humanize_cpu(bad)
    with pytest.raises(ValueError, match="bytes_"):
        humanize_memory(bad)

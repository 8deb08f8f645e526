"""The engine's Go maths against Go itself, bit for bit.

`tests/engine/data/go_math_reference.json` holds results computed by the real Go
runtime on amd64 (upstream VPA's reference architecture) by `tools/gomath-reference`:
math.Pow, math.Log and math.Exp2 on the inputs where their last bits decide upstream's
integers, the histogram bucket starts, and FindBucket at and around every boundary.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from recommender.engine.config import cpu_histogram_options, memory_histogram_options
from recommender.engine.gomath import (
    go_exp2,
    go_exp2_array,
    go_log,
    go_log_array,
    go_pow_int,
)

REFERENCE = json.loads(
    (Path(__file__).parent / "data" / "go_math_reference.json").read_text()
)
OPTIONS = {"cpu": cpu_histogram_options(), "memory": memory_histogram_options()}


def value(hex_bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(hex_bits))[0]


def hex_bits(x: float) -> str:
    return struct.pack(">d", x).hex()


def test_the_reference_was_made_by_go_on_amd64():
    assert REFERENCE["go_version"].endswith(" amd64")
    assert len(REFERENCE["exp2"]) > 9000 and len(REFERENCE["log"]) > 4000


def test_pow_matches_go_for_integer_exponents():
    wrong = [
        (value(base), n)
        for base, n, expected in REFERENCE["pow"]
        if hex_bits(go_pow_int(value(base), n)) != expected
    ]
    assert wrong == []


def test_log_matches_go_scalar_and_vectorised():
    xs = np.array([value(x) for x, _ in REFERENCE["log"]])
    expected = [y for _, y in REFERENCE["log"]]
    assert [hex_bits(go_log(float(x))) for x in xs] == expected
    assert [hex_bits(float(y)) for y in go_log_array(xs)] == expected


def test_exp2_matches_go_scalar_and_vectorised():
    xs = np.array([value(x) for x, _ in REFERENCE["exp2"]])
    expected = [y for _, y in REFERENCE["exp2"]]
    assert [hex_bits(go_exp2(float(x))) for x in xs] == expected
    assert [hex_bits(float(y)) for y in go_exp2_array(xs)] == expected


@pytest.mark.parametrize("name", ["cpu", "memory"])
def test_bucket_starts_match_go(name):
    starts = {b: s for n, b, s in REFERENCE["bucket_start"] if n == name}
    options = OPTIONS[name]
    assert options.num_buckets == len(starts) == 176
    assert [hex_bits(float(x)) for x in options.bucket_start] == [
        starts[b] for b in range(176)
    ]


@pytest.mark.parametrize("name", ["cpu", "memory"])
def test_find_bucket_matches_go_at_every_boundary_and_between(name):
    rows = [(value(v), b) for n, v, b in REFERENCE["find_bucket"] if n == name]
    values = np.array([v for v, _ in rows])
    expected = [b for _, b in rows]
    options = OPTIONS[name]
    assert options.find_bucket(values).tolist() == expected
    assert [options.find_bucket_scalar(float(v)) for v in values] == expected

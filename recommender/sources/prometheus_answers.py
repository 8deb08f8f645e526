"""Prometheus' HTTP API answers parsed into arrays, with clear errors for bad ones.

A ``Matrix`` is one range query's answer on a grid (S series by T times, NaN where
absent); ``samples_of`` turns a range-vector answer into ``windows.Samples``. Successful
matrix answers are decoded in one pass by msgspec; anything it declines (errors, other
shapes, "+Inf", malformed JSON) goes through ``json`` and the checks here, so every
failure is reported the same way whichever decoder saw it first.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from recommender.errors import SourceUnavailable
from recommender.sources.base import SeriesKey
from recommender.sources.windows import Samples


@dataclass(frozen=True)
class Matrix:
    """One range query's answer: S series by T grid points, NaN where absent."""

    series: tuple[SeriesKey, ...]
    timestamp_s: np.ndarray  # float64 (T,)
    values: np.ndarray  # float64 (S, T)


def result_list(body: Any, *, query: str, result_type: str) -> list[Any]:
    """The ``data.result`` list, checked to be of the expected type."""
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != result_type:
        got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise SourceUnavailable(
            f"Prometheus answered {got!r} instead of a {result_type} to {short(query)}"
        )
    result = data.get("result")
    if not isinstance(result, list):
        raise SourceUnavailable(f"Prometheus answered no result list to {short(query)}")
    return result


def parse_matrix(
    result: list[Any],
    *,
    times: np.ndarray,
    step_s: float,
    labels: tuple[str, str, str],
    query: str,
) -> Matrix:
    """Place each series' points on the grid; reject anything that is not a matrix."""
    keys: list[SeriesKey] = []
    rows: dict[SeriesKey, int] = {}
    values = np.full((len(result), len(times)), np.nan)
    for item in result:
        try:
            metric = item["metric"]
            points = item["values"]
            key = SeriesKey(*(str(metric[name]) for name in labels))
            if not isinstance(points, list):
                raise TypeError("values is not a list")
            stamps = np.fromiter(
                (p[0] for p in points), dtype=np.float64, count=len(points)
            )
            numbers = np.array([p[1] for p in points], dtype=np.float64)
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise SourceUnavailable(
                f"Prometheus answered a malformed series ({type(exc).__name__}: "
                f"{exc}) to "
                f"{short(query)}"
            ) from None
        columns = np.rint((stamps - times[0]) / step_s).astype(np.int64)
        if len(columns) and (columns.min() < 0 or columns.max() >= len(times)):
            raise SourceUnavailable(
                f"Prometheus answered points outside the asked range to {short(query)}"
            )
        row = rows.get(key)
        if row is None:
            row = rows[key] = len(keys)
            keys.append(key)
        # Prometheus' NaN/Inf (e.g. a rate over a broken counter) are not usage: gaps.
        numbers[~np.isfinite(numbers)] = np.nan
        values[row, columns] = numbers
    return Matrix(series=tuple(keys), timestamp_s=times, values=values[: len(keys)])


class _Series(msgspec.Struct):
    metric: dict[str, str]
    values: list[tuple[float, float]]


class _MatrixData(msgspec.Struct):
    resultType: str  # Prometheus' field name
    result: list[_Series]


class MatrixAnswer(msgspec.Struct):
    status: str
    data: _MatrixData
    warnings: list[str] = []


# Lax mode reads Prometheus' quoted sample values ("0.25", "NaN") as floats.
_MATRIX_DECODER = msgspec.json.Decoder(MatrixAnswer, strict=False)


def decode_matrix(content: bytes) -> MatrixAnswer | None:
    """A successful matrix answer decoded in one pass (faster than ``json`` and
    building the arrays from its lists: docs/prometheus.md), or None for anything
    else: errors, other shapes, "+Inf" values, malformed JSON are left to the checked
    path."""
    try:
        answer = _MATRIX_DECODER.decode(content)
    except msgspec.MsgspecError:
        return None
    if answer.status != "success" or answer.data.resultType != "matrix":
        return None
    return answer


def point_arrays(points: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """(times, values) of decoded ``[time, value]`` pairs."""
    flat = np.fromiter(
        itertools.chain.from_iterable(points), dtype=np.float64, count=2 * len(points)
    )
    return flat[0::2], flat[1::2]


def series_arrays(
    result: list[Any], *, query: str
) -> list[tuple[Any, np.ndarray, np.ndarray]]:
    """(metric, times, values) of each series of a ``json``-decoded matrix."""
    arrays = []
    for item in result:
        try:
            metric = item["metric"]
            points = item["values"]
            if not isinstance(points, list):
                raise TypeError("values is not a list")
            stamps = np.fromiter(
                (p[0] for p in points), dtype=np.float64, count=len(points)
            )
            values = np.array([p[1] for p in points], dtype=np.float64)
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise _malformed(exc, query) from None
        arrays.append((metric, stamps, values))
    return arrays


def samples_of(
    arrays: list[tuple[Any, np.ndarray, np.ndarray]],
    *,
    first_ms: int,
    last_ms: int,
    labels: tuple[str, str, str],
    query: str,
) -> Samples:
    """The series' samples, checked to lie in [first_ms, last_ms] and increase."""
    keys: list[SeriesKey] = []
    stamps_ms: list[np.ndarray] = []
    numbers: list[np.ndarray] = []
    for metric, stamps, values in arrays:
        try:
            key = SeriesKey(*(str(metric[name]) for name in labels))
        except (KeyError, TypeError) as exc:
            raise _malformed(exc, query) from None
        # Prometheus writes times as seconds with millisecond decimals.
        in_ms = np.rint(stamps * 1000).astype(np.int64)
        if len(in_ms) and (in_ms[0] < first_ms or in_ms[-1] > last_ms):
            raise SourceUnavailable(
                f"Prometheus answered points outside the asked range to {short(query)}"
            )
        if np.any(np.diff(in_ms) <= 0):
            raise SourceUnavailable(
                "Prometheus answered a malformed series (timestamps not increasing) "
                f"to {short(query)}"
            )
        keys.append(key)
        stamps_ms.append(in_ms)
        numbers.append(values)
    return Samples.concat(keys, stamps_ms, numbers)


def _malformed(exc: Exception, query: str) -> SourceUnavailable:
    return SourceUnavailable(
        f"Prometheus answered a malformed series ({type(exc).__name__}: {exc}) to "
        f"{short(query)}"
    )


def concat(pieces: list[Matrix], times: np.ndarray) -> Matrix:
    """Join the time chunks of one query into one matrix over the whole grid."""
    if len(pieces) == 1:
        return pieces[0]
    series = tuple(
        sorted({key for piece in pieces for key in piece.series}, key=series_order)
    )
    values = np.full((len(series), len(times)), np.nan)
    offset = 0
    for piece in pieces:
        width = len(piece.timestamp_s)
        values[:, offset : offset + width] = reindex(piece, series)
        offset += width
    return Matrix(series=series, timestamp_s=times, values=values)


def reindex(matrix: Matrix, series: tuple[SeriesKey, ...]) -> np.ndarray:
    """The matrix's rows in the order of ``series`` (NaN rows for series it lacks)."""
    out = np.full((len(series), len(matrix.timestamp_s)), np.nan)
    index = {key: row for row, key in enumerate(matrix.series)}
    for row, key in enumerate(series):
        source_row = index.get(key)
        if source_row is not None:
            out[row] = matrix.values[source_row]
    return out


def series_order(key: SeriesKey) -> tuple[str, str, str]:
    return (key.namespace, key.pod, key.container)


def short(query: str) -> str:
    return repr(query if len(query) <= 160 else query[:157] + "...")

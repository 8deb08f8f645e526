"""Recommendations from usage CSV files, without a cluster: the engine's public face.

`usage.csv` has the columns ``timestamp,namespace,workload,pod,container,cpu_cores,
memory_bytes``; `ooms.csv` has ``timestamp,namespace,workload,pod,container,
memory_request_bytes``. One (namespace, workload) is one VPA target; its pods'
containers of the same name share one aggregate. Rows may come in any order: events are
fed in time order, stably, and at equal times usage rows go before OOM rows
(``engine/feed.py``: the one feeding rule, which also quantises CPU to whole millicores
as upstream does).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from recommender.engine import (
    AggregateSet,
    ContainerRecommendation,
    OomBatch,
    Profile,
    SampleBatch,
    feed,
    recommend,
)
from recommender.engine.oom import oom_effect
from recommender.engine.quantity import resource_list
from recommender.errors import InvalidInput

USAGE_COLUMNS = (
    "timestamp",
    "namespace",
    "workload",
    "pod",
    "container",
    "cpu_cores",
    "memory_bytes",
)
OOM_COLUMNS = (
    "timestamp",
    "namespace",
    "workload",
    "pod",
    "container",
    "memory_request_bytes",
)
# Event kinds, in the order they are fed at equal timestamps.
USAGE_EVENT = 0
OOM_EVENT = 1

AggregateKey = tuple[str, str, str]  # (namespace, workload, container)


@dataclass(frozen=True)
class OfflineRecommendation:
    """One container's recommendation, with the names it was asked for by."""

    namespace: str
    workload: str
    container: str
    recommendation: ContainerRecommendation
    # How the OOM kills bear on the memory target (engine.oom.oom_effect), or None.
    oom_kills: dict[str, Any] | None = None

    def to_status_dict(self) -> dict[str, Any]:
        """Upstream's `status.recommendation.containerRecommendations[]` item, plus
        names and the explanation (with ``oom_kills`` when there were kills)."""
        rec = self.recommendation
        explanation = rec.explanation_dict()
        if self.oom_kills is not None:
            explanation["oom_kills"] = self.oom_kills
        return {
            "namespace": self.namespace,
            "workload": self.workload,
            "containerName": self.container,
            "target": resources_as_quantities(rec.target),
            "lowerBound": resources_as_quantities(rec.lower_bound),
            "upperBound": resources_as_quantities(rec.upper_bound),
            "uncappedTarget": resources_as_quantities(rec.uncapped_target),
            "explanation": explanation,
        }


# ``{"cpu": "587m", "memory": "628694953"}`` as upstream writes a ResourceList.
resources_as_quantities = resource_list


@dataclass
class Events:
    """Parsed rows of both files, as parallel lists (one entry per row)."""

    kind: list[int]
    timestamp_s: list[float]
    aggregate: list[int]
    series: list[int]
    cpu_cores: list[float]
    memory_bytes: list[float]
    memory_request_bytes: list[float]


def parse_timestamp(text: str) -> float:
    """Unix seconds ("1700000000.5") or RFC 3339 ("2026-11-21T06:00:00Z")."""
    text = text.strip()
    if not text:
        raise ValueError("is empty")
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise ValueError(f"{text!r} is not a finite Unix time")
        return value
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError(
            f"{text!r} is neither Unix seconds nor an RFC 3339 time"
        ) from None
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (add Z or an offset)")
    return moment.timestamp()


def _parse_amount(text: str, *, unit: str) -> float:
    """A non-negative number, or NaN for an empty cell (signal absent)."""
    text = text.strip()
    if not text:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number of {unit}") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number of {unit}")
    if value < 0:
        raise ValueError(f"{text!r} is negative; usage cannot be below 0 {unit}")
    return value


def _read_rows(
    path: Path, columns: tuple[str, ...]
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield (line number, row) of a CSV file that has at least ``columns``."""
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(
            f"{path}: cannot be read: {exc.strerror}", field=str(path)
        ) from None
    with handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [name for name in columns if name not in header]
        if missing:
            raise InvalidInput(
                f"{path}:1: missing column(s) {', '.join(missing)}; "
                f"expected {','.join(columns)}",
                field=str(path),
            )
        for row in reader:
            yield reader.line_num, row


class Registry:
    """Numbers aggregates and series as rows are read."""

    def __init__(self) -> None:
        self.aggregates: dict[AggregateKey, int] = {}
        self.series: dict[tuple[int, str], int] = {}

    def series_of(self, row: dict[str, str]) -> tuple[int, int]:
        key = (
            row["namespace"].strip(),
            row["workload"].strip(),
            row["container"].strip(),
        )
        aggregate = self.aggregates.setdefault(key, len(self.aggregates))
        series = self.series.setdefault(
            (aggregate, row["pod"].strip()), len(self.series)
        )
        return aggregate, series


NAME_COLUMNS = ("namespace", "workload", "pod", "container")


def _read_file(
    path: Path, columns: tuple[str, ...], amounts: dict[str, str]
) -> Iterator[tuple[dict[str, str], float, dict[str, float]]]:
    """Yield (row, timestamp, amounts) per row; errors name file, line and column."""

    def fail(line: int, column: str, problem: str) -> InvalidInput:
        return InvalidInput(
            f"{path}:{line}: column {column!r}: {problem}", field=column
        )

    for line, row in _read_rows(path, columns):
        try:
            timestamp_s = parse_timestamp(row["timestamp"] or "")
        except ValueError as exc:
            raise fail(line, "timestamp", str(exc)) from None
        values = {}
        for column, unit in amounts.items():
            try:
                values[column] = _parse_amount(row[column] or "", unit=unit)
            except ValueError as exc:
                raise fail(line, column, str(exc)) from None
        for column in NAME_COLUMNS:
            if not (row[column] or "").strip():
                raise fail(line, column, "is empty")
        yield row, timestamp_s, values


def read_events(usage_path: Path, oom_path: Path | None) -> tuple[Events, Registry]:
    events = Events([], [], [], [], [], [], [])
    registry = Registry()

    def append(
        row: dict[str, str],
        kind: int,
        timestamp_s: float,
        cpu_cores: float,
        memory_bytes: float,
        memory_request_bytes: float,
    ) -> None:
        aggregate, series = registry.series_of(row)
        events.kind.append(kind)
        events.timestamp_s.append(timestamp_s)
        events.aggregate.append(aggregate)
        events.series.append(series)
        events.cpu_cores.append(cpu_cores)
        events.memory_bytes.append(memory_bytes)
        events.memory_request_bytes.append(memory_request_bytes)

    usage_amounts = {"cpu_cores": "cores", "memory_bytes": "bytes"}
    for row, timestamp_s, values in _read_file(
        usage_path, USAGE_COLUMNS, usage_amounts
    ):
        append(
            row,
            USAGE_EVENT,
            timestamp_s,
            values["cpu_cores"],
            values["memory_bytes"],
            math.nan,
        )
    if oom_path is not None:
        oom_amounts = {"memory_request_bytes": "bytes"}
        for row, timestamp_s, values in _read_file(oom_path, OOM_COLUMNS, oom_amounts):
            request = values["memory_request_bytes"]
            # No request known means 0: upstream's minimum bump then dominates.
            append(
                row,
                OOM_EVENT,
                timestamp_s,
                math.nan,
                math.nan,
                0.0 if math.isnan(request) else request,
            )
    return events, registry


def recommend_from_csv(
    *, usage_path: Path, oom_path: Path | None, profile: Profile
) -> list[OfflineRecommendation]:
    """Feed both files to the engine in time order and recommend every container."""
    events, registry = read_events(usage_path, oom_path)
    kind = np.asarray(events.kind, dtype=np.int64)
    timestamp_s = np.asarray(events.timestamp_s, dtype=np.float64)

    series_keys = [""] * len(registry.series)
    series_aggregate = np.zeros(len(registry.series), dtype=np.int64)
    for (aggregate, pod), index in registry.series.items():
        series_keys[index] = pod
        series_aggregate[index] = aggregate

    aggregates = AggregateSet.empty(profile, len(registry.aggregates))
    usage = kind == USAGE_EVENT
    ooms = ~usage
    feed(
        aggregates,
        SampleBatch(
            series_aggregate=series_aggregate,
            series_keys=series_keys,
            series_index=np.asarray(events.series, dtype=np.int64)[usage],
            timestamp_s=timestamp_s[usage],
            cpu_cores=np.asarray(events.cpu_cores, dtype=np.float64)[usage],
            memory_bytes=np.asarray(events.memory_bytes, dtype=np.float64)[usage],
        ),
        OomBatch(
            series_aggregate=series_aggregate,
            series_keys=series_keys,
            series_index=np.asarray(events.series, dtype=np.int64)[ooms],
            timestamp_s=timestamp_s[ooms],
            memory_request_bytes=np.asarray(events.memory_request_bytes)[ooms],
        ),
    )

    # The pod minimum is split over the workload's containers (upstream: the map size).
    containers_per_workload: dict[tuple[str, str], int] = {}
    for namespace, workload, _container in registry.aggregates:
        key = (namespace, workload)
        containers_per_workload[key] = containers_per_workload.get(key, 0) + 1
    keys = sorted(registry.aggregates, key=lambda k: k)
    rows = [registry.aggregates[key] for key in keys]
    recommendations = recommend(
        aggregates,
        rows=rows,
        profile=profile,
        containers_in_pod=[containers_per_workload[(key[0], key[1])] for key in keys],
        # No samples, no recommendation for that resource (the reason is in the
        # explanation's "omitted"), rather than upstream's pod minimum or 1e14 clamp.
        omit_unsampled=True,
    )
    # The kills each aggregate's memory histogram holds: its last memory history.
    kills: dict[int, list[tuple[float, int]]] = {}
    last_s: dict[int, float] = {}
    for kind_, t, aggregate, request in zip(
        events.kind,
        events.timestamp_s,
        events.aggregate,
        events.memory_request_bytes,
        strict=True,
    ):
        last_s[aggregate] = max(last_s.get(aggregate, t), t)
        if kind_ == OOM_EVENT:
            kills.setdefault(aggregate, []).append((t, int(request)))
    results = []
    for names, rec in zip(keys, recommendations, strict=True):
        row = registry.aggregates[names]
        start = last_s.get(row, 0.0) - profile.memory_history_s
        memory = rec.explanation_dict()["resources"].get("memory") or {}
        effect = oom_effect(
            [r for t, r in kills.get(row, []) if t >= start],
            ratio=profile.oom_bump_ratio,
            min_bump_bytes=profile.oom_min_bump_bytes,
            target=memory.get("target"),
        )
        results.append(
            OfflineRecommendation(
                namespace=names[0],
                workload=names[1],
                container=names[2],
                recommendation=rec,
                oom_kills=effect,
            )
        )
    return results

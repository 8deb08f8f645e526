"""Replay recorded usage through profiles: the inputs, the profiles, the report."""
# Inputs (each becomes an engine :class:`~recommender.engine.replay.Trace`):
#
# - a normalized trace file (``trace,container_id,timestamp_s,cpu_cores,memory_bytes``,
#   gzip allowed: ``benchmarks/data/``), with the operators' limits from a
#   ``containers.csv`` beside it when present;
# - the offline command's ``usage.csv`` (and ``ooms.csv``): one container per
#   (namespace, workload, container), its pods as series;
# - a workload or namespace of a configured cluster, its history read from the cluster's
#   usage source (Prometheus, or the simulated cluster).
#
# The maths live in ``engine/replay.py`` and ``engine/replay_scores.py``.

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from recommender.engine.profiles import Profile, get_profile
from recommender.engine.replay import (
    DEFAULT_EVERY_S,
    DEFAULT_WARMUP_S,
    Timeline,
    Trace,
    replay,
)
from recommender.engine.replay_scores import (
    DayScores,
    day_groups,
    score_hindsight,
    score_limits,
    score_timeline,
    summarise,
)
from recommender.errors import InvalidInput, NotFound
from recommender.models import Cluster
from recommender.services.connections import cluster_adapter_for, usage_source_for
from recommender.services.policy.validation import validate_profile_overrides
from recommender.services.refresh.ingest import read_usage
from recommender.services.refresh.ooms import oom_history
from recommender.services.replay.offline import USAGE_EVENT, read_events

TRACE_COLUMNS = ("trace", "container_id", "timestamp_s", "cpu_cores", "memory_bytes")
LIMIT_COLUMNS = ("trace", "container_id", "cpu_limit_cores", "memory_limit_bytes")
# Cluster history is read one day per source call, one sample per minute (upstream).
CLUSTER_STEP_S = 60.0
CLUSTER_CHUNK_S = 86400.0


@dataclass(frozen=True)
class ReplayInput:
    """A trace, and the operators' limits per container where known (NaN = none)."""

    trace: Trace
    source: str
    cpu_limit_cores: np.ndarray | None = None  # (C,)
    memory_limit_bytes: np.ndarray | None = None  # (C,)


@dataclass(frozen=True)
class ReplayReport:
    """A row per profile (plus "manual", "hindsight"), and each profile's timeline."""

    rows: list[dict[str, Any]]
    timelines: dict[str, Timeline] = field(default_factory=dict)
    # Each profile's day scores, and the warm-up they were scored after.
    scores: dict[str, DayScores] = field(default_factory=dict)
    warmup_s: float | None = None


def _open_text(path: Path) -> io.TextIOBase:
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise InvalidInput(
            f"{path}: cannot be read: {exc.strerror}", field=str(path)
        ) from None
    magic = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(
            gzip.GzipFile(fileobj=raw), encoding="utf-8", newline=""
        )
    return io.TextIOWrapper(raw, encoding="utf-8", newline="")


def _rows(path: Path, columns: Sequence[str]) -> Iterator[tuple[int, list[str]]]:
    """(line, cells in ``columns`` order) of a CSV file (gzip or plain)."""
    with _open_text(path) as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise InvalidInput(f"{path}: is empty", field=str(path)) from None
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"{path}: unreadable: {exc}", field=str(path)) from None
        missing = [c for c in columns if c not in header]
        if missing:
            raise InvalidInput(
                f"{path}:1: missing column(s) {', '.join(missing)}; expected "
                + ",".join(columns),
                field=str(path),
            )
        where = [header.index(c) for c in columns]
        try:
            for row in reader:
                if len(row) < len(header):
                    raise InvalidInput(
                        f"{path}:{reader.line_num}: expected {len(header)} columns,"
                        f" got {len(row)}",
                        field=str(path),
                    )
                yield reader.line_num, [row[i] for i in where]
        except (OSError, EOFError, UnicodeDecodeError, csv.Error) as exc:
            raise InvalidInput(
                f"{path}:{reader.line_num}: unreadable: {exc}", field=str(path)
            ) from None


def _number(path: Path, line: int, column: str, text: str) -> float:
    """A finite number >= 0, NaN for an empty cell (the trace has no such signal)."""
    if not text:
        return math.nan
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise InvalidInput(
            f"{path}:{line}: column {column!r}: {text!r} is not a number >= 0",
            field=column,
        )
    return value


def load_trace_file(
    path: Path, *, containers: Sequence[str] | None = None
) -> ReplayInput:
    """A normalized trace; ``containers`` picks some container ids (in that order)."""
    wanted = None if containers is None else set(containers)
    index: dict[str, int] = (
        {} if containers is None else {c: i for i, c in enumerate(containers)}
    )
    traces: set[str] = set()
    series: list[int] = []
    ts: list[float] = []
    cpu: list[float] = []
    mem: list[float] = []
    for line, (trace, cid, t, c, m) in _rows(path, TRACE_COLUMNS):
        if wanted is not None and cid not in wanted:
            continue
        if not cid:
            raise InvalidInput(
                f"{path}:{line}: column 'container_id': is empty", field="container_id"
            )
        traces.add(trace)
        try:
            stamp = float(t)
        except ValueError:
            stamp = math.nan
        if not math.isfinite(stamp):
            raise InvalidInput(
                f"{path}:{line}: column 'timestamp_s': {t!r} is not Unix seconds",
                field="timestamp_s",
            )
        series.append(index.setdefault(cid, len(index)))
        ts.append(stamp)
        cpu.append(_number(path, line, "cpu_cores", c))
        mem.append(_number(path, line, "memory_bytes", m))
    if containers is not None:
        present = set(series)
        missing = [c for c in containers if index[c] not in present]
        if missing:
            raise NotFound(f"{path}: no samples of {', '.join(missing)}")
    if not ts:
        raise InvalidInput(f"{path}: has no samples", field=str(path))
    ids = list(index)
    out = Trace(
        container_ids=ids,
        series_container=np.arange(len(ids), dtype=np.int64),
        series_keys=ids,
        series_index=np.asarray(series, dtype=np.int64),
        timestamp_s=np.asarray(ts),
        cpu_cores=np.asarray(cpu),
        memory_bytes=np.asarray(mem),
    )
    return ReplayInput(trace=out, source=",".join(sorted(traces)) or str(path))


def with_limits(loaded: ReplayInput, containers_csv: Path) -> ReplayInput:
    """The operators' limits of the trace's containers from a ``containers.csv``."""
    ids = {c: i for i, c in enumerate(loaded.trace.container_ids)}
    cpu = np.full(len(ids), np.nan)
    mem = np.full(len(ids), np.nan)
    for line, (_trace, cid, c, m) in _rows(containers_csv, LIMIT_COLUMNS):
        i = ids.get(cid)
        if i is not None:
            cpu[i] = _number(containers_csv, line, "cpu_limit_cores", c)
            mem[i] = _number(containers_csv, line, "memory_limit_bytes", m)
    return ReplayInput(
        trace=loaded.trace,
        source=loaded.source,
        cpu_limit_cores=cpu,
        memory_limit_bytes=mem,
    )


def load_usage_csv(usage_path: Path, oom_path: Path | None) -> ReplayInput:
    """The offline command's files: a container per (namespace, workload, container)."""
    events, registry = read_events(usage_path, oom_path)
    kind = np.asarray(events.kind, dtype=np.int64)
    usage = kind == USAGE_EVENT
    series_container = np.zeros(len(registry.series), dtype=np.int64)
    series_keys = [""] * len(registry.series)
    for (aggregate, pod), i in registry.series.items():
        series_container[i] = aggregate
        series_keys[i] = pod
    names = ["/".join(key) for key in registry.aggregates]
    per_workload: dict[tuple[str, str], int] = {}
    for namespace, workload, _ in registry.aggregates:
        per_workload[namespace, workload] = (
            per_workload.get((namespace, workload), 0) + 1
        )
    series = np.asarray(events.series, dtype=np.int64)
    ts = np.asarray(events.timestamp_s)
    trace = Trace(
        container_ids=names,
        series_container=series_container,
        series_keys=series_keys,
        series_index=series[usage],
        timestamp_s=ts[usage],
        cpu_cores=np.asarray(events.cpu_cores)[usage],
        memory_bytes=np.asarray(events.memory_bytes)[usage],
        containers_in_pod=np.array(
            [per_workload[k[0], k[1]] for k in registry.aggregates], dtype=np.int64
        ),
        oom_series_index=series[~usage],
        oom_timestamp_s=ts[~usage],
        oom_memory_request_bytes=np.asarray(events.memory_request_bytes)[~usage],
    )
    if not trace.timestamp_s.size:
        raise InvalidInput(f"{usage_path}: has no samples", field=str(usage_path))
    return ReplayInput(trace=trace, source=str(usage_path))


def load_cluster_history(
    *,
    cluster_name: str,
    namespace: str,
    workload: str | None,
    days: float,
    now_s: float,
) -> ReplayInput:
    """A namespace's (or one workload's) last ``days`` of history from the cluster's
    source, one container per (workload, container name), its pods as series."""
    if not (days > 0 and math.isfinite(days)):
        raise InvalidInput(f"days: must be a positive number, not {days}", field="days")
    try:
        cluster = Cluster.objects.get(name=cluster_name)
    except Cluster.DoesNotExist:
        raise NotFound(f"cluster {cluster_name!r} does not exist") from None
    snapshot = cluster_adapter_for(cluster, namespace=namespace).discover()
    names = sorted(
        {
            w.name
            for w in snapshot.workloads
            if w.namespace == namespace and (workload is None or w.name == workload)
        }
    )
    if not names:
        what = f"workload {workload!r}" if workload else "any workload"
        raise NotFound(
            f"cluster {cluster_name!r}: no {what} in namespace {namespace!r}"
        )
    live = {
        pod.name: w.name
        for w in snapshot.workloads
        if w.namespace == namespace
        for pod in w.pods
    }

    def owner(pod: str) -> str | None:
        # Live pods by discovery; pods that are gone by their controller's prefix.
        if pod in live:
            return live[pod] if live[pod] in names else None
        parts = pod.split("-")
        for cut in range(len(parts) - 1, 0, -1):
            if "-".join(parts[:cut]) in names:
                return "-".join(parts[:cut])
        return None

    # One workload: a source that can reads only its series (the simulated cluster),
    # not the namespace's.
    selected = (
        None
        if workload is None
        else [
            (namespace, w.kind, w.name)
            for w in snapshot.workloads
            if w.namespace == namespace and w.name == workload
        ]
    )
    source = usage_source_for(cluster)
    start_s = now_s - days * 86400.0
    containers: dict[tuple[str, str], int] = {}
    series: dict[tuple[int, str], int] = {}
    parts_ts, parts_series, parts_cpu, parts_mem = [], [], [], []
    chunk = start_s
    while chunk < now_s:
        end = min(chunk + CLUSTER_CHUNK_S, now_s)
        grid = read_usage(
            source, namespace=namespace, start_s=chunk, end_s=end, workloads=selected
        )
        for row, key in enumerate(grid.series):
            name = owner(key.pod)
            if name is None:
                continue
            c = containers.setdefault((name, key.container), len(containers))
            sid = series.setdefault((c, key.pod), len(series))
            has = ~(np.isnan(grid.cpu_cores[row]) & np.isnan(grid.memory_bytes[row]))
            parts_ts.append(grid.timestamp_s[has])
            parts_series.append(np.full(int(has.sum()), sid, dtype=np.int64))
            parts_cpu.append(grid.cpu_cores[row][has])
            parts_mem.append(grid.memory_bytes[row][has])
        chunk = end
    if not containers or not sum(p.size for p in parts_ts):
        raise NotFound(
            f"cluster {cluster_name!r}: no usage history in namespace {namespace!r}"
        )
    kills = oom_history(source, namespace=namespace, start_s=start_s, end_s=now_s) or []
    oom_series, oom_ts, oom_request = [], [], []
    for kill in kills:
        name = owner(kill.pod)
        if name is None or (name, kill.container) not in containers:
            continue
        c = containers[name, kill.container]
        oom_series.append(series.setdefault((c, kill.pod), len(series)))
        oom_ts.append(kill.occurred_at.timestamp())
        oom_request.append(float(kill.memory_request_bytes))
    series_container = np.zeros(len(series), dtype=np.int64)
    series_keys = [""] * len(series)
    for (c, pod), sid in series.items():
        series_container[sid] = c
        series_keys[sid] = pod
    per_workload: dict[str, int] = {}
    for name, _ in containers:
        per_workload[name] = per_workload.get(name, 0) + 1
    trace = Trace(
        container_ids=[f"{namespace}/{w}/{c}" for w, c in containers],
        series_container=series_container,
        series_keys=series_keys,
        series_index=np.concatenate(parts_series),
        timestamp_s=np.concatenate(parts_ts),
        cpu_cores=np.concatenate(parts_cpu),
        memory_bytes=np.concatenate(parts_mem),
        containers_in_pod=np.array(
            [per_workload[w] for w, _ in containers], dtype=np.int64
        ),
        oom_series_index=np.asarray(oom_series, dtype=np.int64),
        oom_timestamp_s=np.asarray(oom_ts, dtype=np.float64),
        oom_memory_request_bytes=np.asarray(oom_request, dtype=np.float64),
    )
    return ReplayInput(trace=trace, source=f"cluster {cluster_name}/{namespace}")


def parse_settings(pairs: Sequence[str]) -> dict[str, Any]:
    """``field=value`` pairs; values are JSON (numbers, "peak") or bare words."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise InvalidInput(
                f"--set {pair!r}: expected field=value, e.g. margin_fraction=0.1",
                field="set",
            )
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        out[name.strip()] = value
    return out


def resolve_profiles(names: Sequence[str], settings: dict[str, Any]) -> list[Profile]:
    """The named profiles with the overrides, checked as the policy editor does."""
    out = []
    for name in names:
        try:
            base = get_profile(name)
        except ValueError as exc:
            raise InvalidInput(str(exc), field="profile") from None
        overrides = validate_profile_overrides(dict(settings), profile_name=name)
        profile = base.with_overrides(**overrides)
        if overrides:
            label = ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))
            profile = profile.with_overrides(name=f"{name}[{label}]")
        out.append(profile)
    return out


def run_replay(
    loaded: ReplayInput,
    profiles: Sequence[Profile],
    *,
    every_s: float = DEFAULT_EVERY_S,
    warmup_s: float = DEFAULT_WARMUP_S,
    hindsight: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayReport:
    """Replay every profile; score them, the operators' limits and (optionally)
    perfect hindsight on the same container-days."""
    try:
        timelines = replay(loaded.trace, profiles, every_s=every_s, progress=progress)
    except ValueError as exc:
        raise InvalidInput(str(exc), field=str(exc).split(":", 1)[0]) from None
    start_s = timelines[0].start_s + every_s  # the first recompute
    try:
        days = day_groups(loaded.trace, warmup_s=warmup_s, start_s=start_s)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="warmup_s") from None
    rows = []
    scored = {}
    for timeline in timelines:
        scores = scored[timeline.profile.name] = score_timeline(
            loaded.trace, timeline, days
        )
        rows.append({"profile": timeline.profile.name, **summarise(scores)})
    limits = loaded.memory_limit_bytes
    if (
        limits is not None
        and loaded.cpu_limit_cores is not None
        and np.isfinite(limits).any()
    ):
        manual = score_limits(
            loaded.trace,
            cpu_limit_cores=loaded.cpu_limit_cores,
            memory_limit_bytes=limits,
            days=days,
        )
        rows.append({"profile": "manual", **summarise(manual)})
    if hindsight:
        best = score_hindsight(loaded.trace, days)
        rows.append({"profile": "hindsight", **summarise(best)})
    return ReplayReport(
        rows=rows,
        timelines={t.profile.name: t for t in timelines},
        scores=scored,
        warmup_s=warmup_s,
    )


def container_series(
    loaded: ReplayInput, timeline: Timeline, container_id: str
) -> dict[str, Any]:
    """One container's usage and the recommendation in force at each sample."""
    try:
        c = list(loaded.trace.container_ids).index(container_id)
    except ValueError:
        raise NotFound(f"container {container_id!r} is not in the trace") from None
    trace = loaded.trace
    pick = np.flatnonzero(trace.container_index == c)
    pick = pick[np.argsort(trace.timestamp_s[pick], kind="stable")]
    ts = trace.timestamp_s[pick]
    row = timeline.row_of(ts)
    out: dict[str, Any] = {
        "container": container_id,
        "profile": timeline.profile.name,
        "time": [datetime.fromtimestamp(t).isoformat() for t in ts.tolist()],
        "timestamp_s": ts,
        "cpu_cores": trace.cpu_cores[pick],
        "memory_bytes": trace.memory_bytes[pick],
    }
    for (resource, bound), values in timeline.values.items():
        out[f"{resource}_{bound}"] = values[row, c]
    return out


def workload_of(container_id: str) -> str:
    """``namespace/workload`` of a ``namespace/workload/container`` id (cluster and
    usage.csv inputs); a trace's container id is its own workload."""
    head, sep, _ = container_id.rpartition("/")
    return head if sep and "/" in head else container_id


def compare_workloads(
    loaded: ReplayInput,
    report: ReplayReport,
    *,
    warmup_s: float = DEFAULT_WARMUP_S,
) -> list[dict[str, Any]]:
    """Per workload, the first two profiles side by side (A = first, B = second):
    memory slack mean, memory overrun days %, CPU slack mean and the resizes the
    updater would have proposed; sorted worst-for-B first (overrun days added, then
    slack added)."""
    from recommender.engine.replay_scores import updater_proposals

    if len(report.timelines) < 2:
        raise InvalidInput(
            "comparing workloads needs two profiles (--profile A --profile B)",
            field="profile",
        )
    a, b = list(report.timelines.values())[:2]
    # The report's scores when scored after the same warm-up (run_replay's).
    days = (
        None
        if report.warmup_s == warmup_s
        else day_groups(loaded.trace, warmup_s=warmup_s, start_s=a.start_s + a.every_s)
    )
    names = [workload_of(c) for c in loaded.trace.container_ids]
    groups = sorted(set(names))
    group_of = np.array([groups.index(n) for n in names], dtype=np.int64)
    per: dict[str, dict[str, Any]] = {g: {"workload": g} for g in groups}
    for label, timeline in (("a", a), ("b", b)):
        scores = (
            report.scores[timeline.profile.name]
            if days is None
            else score_timeline(loaded.trace, timeline, days)
        )
        proposals = updater_proposals(timeline)
        g_of_day = group_of[scores.container]
        for gi, g in enumerate(groups):
            mine = g_of_day == gi
            slack = scores.memory_slack[mine]
            has = np.isfinite(slack)
            cpu = scores.cpu_slack[mine]
            per[g].update(
                {
                    "container_days": int(mine.sum()),
                    f"{label}_memory_slack_mean": (
                        float(slack[has].mean()) if has.any() else math.nan
                    ),
                    f"{label}_memory_overrun_days_pct": (
                        100.0 * float(scores.memory_over_target[mine][has].mean())
                        if has.any()
                        else math.nan
                    ),
                    f"{label}_cpu_slack_mean": (
                        float(np.nanmean(cpu)) if np.isfinite(cpu).any() else math.nan
                    ),
                    f"{label}_updater_proposals": int(proposals[group_of == gi].sum()),
                }
            )

    def worst_first(row: dict[str, Any]) -> tuple[float, float]:
        def delta(key: str) -> float:
            d = row[f"b_{key}"] - row[f"a_{key}"]
            return d if math.isfinite(d) else -math.inf

        return (-delta("memory_overrun_days_pct"), -delta("memory_slack_mean"))

    return sorted(per.values(), key=worst_first)

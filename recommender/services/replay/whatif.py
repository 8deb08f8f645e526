"""What-if: a workload's last days replayed under its current profile and another one.

The history comes from the workload's cluster source (Prometheus, or the simulated
cluster) through :func:`~recommender.services.replay.replay.load_cluster_history`; both
profiles are replayed together (``engine/replay.py``) and scored as ``manage.py
replay`` scores them. Also: how many resizes upstream's updater would have proposed
(:func:`~recommender.engine.replay_scores.updater_proposals`), per container a
chart of the hourly target and bounds against the hourly peak of usage, and the
replicas a Utilization HPA would have run (``services/replay/hpa_replicas.py``)."""
# It runs synchronously: one workload's 8 days of 1-minute history take well under a
# second of replay (``make bench BENCH=whatif``), the source read aside.

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from recommender.engine import DEFAULT_PROFILE, PROFILES
from recommender.engine.profiles import Profile, get_profile
from recommender.engine.replay import Timeline
from recommender.engine.replay_scores import UPDATER_MIN_CHANGE, updater_proposals
from recommender.engine.resources import CPU, MEMORY
from recommender.errors import InvalidInput, NotFound
from recommender.models import Workload
from recommender.services.replay.hpa_replicas import hpa_replicas
from recommender.services.replay.replay import (
    ReplayInput,
    load_cluster_history,
    resolve_profiles,
    run_replay,
)

DEFAULT_DAYS = 8.0
MAX_DAYS = 14.0
# Warm-up of a what-if: shorter than the command's day, so a week leaves 6+ scored days.
WARMUP_S = 12 * 3600.0
UPDATER_RULE = (
    "a resize is proposed when the request (the last applied target) lies outside "
    "[lower, upper] for CPU or memory, or when |request - target| / request summed "
    f"over CPU and memory reaches {UPDATER_MIN_CHANGE:g} (upstream's "
    "--pod-update-threshold); per container, without the 12 h pod-age wait; the "
    "first recommendation is applied at admission and not counted"
)


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become None, numpy scalars plain numbers."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _current_profile(workload: Workload) -> tuple[Profile, str, dict[str, Any]]:
    """The profile the refresh applies to the workload, its name and overrides."""
    policy = getattr(workload, "policy", None)
    name = policy.profile if policy is not None else DEFAULT_PROFILE
    overrides = dict(policy.profile_overrides or {}) if policy is not None else {}
    try:
        return get_profile(name).with_overrides(**overrides), name, overrides
    except (ValueError, TypeError):
        # As the refresh does: unusable stored values fall back to upstream.
        return get_profile(DEFAULT_PROFILE), DEFAULT_PROFILE, {}


def parse_days(raw: object) -> float:
    """A number of days in (0, MAX_DAYS]; InvalidInput keyed ``days`` otherwise."""
    if raw is None or raw == "":
        return DEFAULT_DAYS
    try:
        days = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        days = math.nan
    if isinstance(raw, bool) or not (0 < days <= MAX_DAYS):
        raise InvalidInput(
            f"days: must be a number of days in (0, {MAX_DAYS:g}], not {raw!r}",
            field="days",
        )
    return days


def _chart(loaded: ReplayInput, timelines: list[Timeline], c: int) -> dict[str, Any]:
    """Hourly rows of one container: peak usage, and each profile's target/bounds."""
    trace = loaded.trace
    first = timelines[0]
    pick = np.flatnonzero(trace.container_index == c)
    rows = first.row_of(trace.timestamp_s[pick])
    n_rows = next(iter(first.values.values())).shape[0]
    out: dict[str, Any] = {
        "t": [
            datetime.fromtimestamp(float(t), UTC).isoformat()
            for t in first.start_s + first.every_s * np.arange(n_rows)
        ]
    }
    for resource, values in (
        (CPU, trace.cpu_cores * 1000.0),
        (MEMORY, trace.memory_bytes),
    ):
        peak = np.full(n_rows, -np.inf)
        np.fmax.at(peak, rows, values[pick])
        peak[~np.isfinite(peak)] = np.nan
        out[f"usage_{resource}"] = peak.tolist()
    for key, timeline in zip(("current", "candidate"), timelines, strict=True):
        out[key] = {
            f"{bound}_{resource}": timeline.values[resource, bound][:, c].tolist()
            for resource in (CPU, MEMORY)
            for bound in ("target", "lower", "upper")
        }
    return out


def _checked(
    profile: object, overrides: object, days: object
) -> tuple[Profile, dict[str, Any], float]:
    """The candidate profile with its overrides, the overrides, and the days; the
    request's mistakes as InvalidInput naming the field."""
    if not isinstance(profile, str) or profile not in PROFILES:
        raise InvalidInput(
            f"profile: {profile!r} is not a profile; choose one of "
            + ", ".join(sorted(PROFILES)),
            field="profile",
        )
    settings = overrides if overrides is not None else {}
    if not isinstance(settings, dict):
        raise InvalidInput(
            'profile_overrides must be an object such as {"margin_fraction": 0.1}',
            field="profile_overrides",
        )
    span = parse_days(days)
    (candidate,) = resolve_profiles([profile], settings)
    return candidate, settings, span


def check_what_if(
    *, workload_id: int, profile: object, overrides: object, days: object
) -> None:
    """Every mistake ``what_if`` would find before it reads history (InvalidInput,
    NotFound): a background what-if is checked so before it is queued, so its job
    never fails for what the request could have said at once."""
    _checked(profile, overrides, days)
    if not Workload.objects.filter(pk=workload_id).exists():
        raise NotFound(f"workload {workload_id} does not exist")


def what_if(
    *,
    workload_id: int,
    profile: object,
    overrides: object = None,
    days: object = None,
    now: datetime,
) -> dict[str, Any]:
    """The workload's last ``days`` under its current profile and under ``profile``
    with ``overrides`` (validated as the policy editor validates them)."""
    candidate, settings, span = _checked(profile, overrides, days)
    try:
        workload = Workload.objects.select_related("cluster", "policy").get(
            pk=workload_id
        )
    except Workload.DoesNotExist:
        raise NotFound(f"workload {workload_id} does not exist") from None
    current, current_name, current_overrides = _current_profile(workload)
    if current.name == candidate.name:
        candidate = candidate.with_overrides(name=f"{candidate.name} (candidate)")
    started = time.perf_counter()
    loaded = load_cluster_history(
        cluster_name=workload.cluster.name,
        namespace=workload.namespace,
        workload=workload.name,
        days=span,
        now_s=now.timestamp(),
    )
    read_s = time.perf_counter() - started
    report = run_replay(loaded, [current, candidate], warmup_s=WARMUP_S)
    timelines = [report.timelines[current.name], report.timelines[candidate.name]]
    proposals = [updater_proposals(t) for t in timelines]
    prefix = f"{workload.namespace}/{workload.name}/"
    containers = []
    for c, cid in enumerate(loaded.trace.container_ids):
        containers.append(
            {
                "name": cid.removeprefix(prefix),
                "updater_proposals": {
                    "current": int(proposals[0][c]),
                    "candidate": int(proposals[1][c]),
                },
                "chart": _chart(loaded, timelines, c),
            }
        )
    rows = []
    for key, row, count in zip(
        ("current", "candidate"), report.rows, proposals, strict=True
    ):
        rows.append({"role": key, **row, "updater_proposals": int(count.sum())})
    out: dict[str, Any] = _clean(
        {
            "workload": {
                "id": workload.pk,
                "cluster": workload.cluster.name,
                "namespace": workload.namespace,
                "kind": workload.kind,
                "name": workload.name,
            },
            "days": span,
            "every_s": timelines[0].every_s,
            "warmup_s": WARMUP_S,
            "current": {"profile": current_name, "overrides": current_overrides},
            "candidate": {"profile": profile, "overrides": dict(settings)},
            "rows": rows,
            "containers": containers,
            "updater_rule": UPDATER_RULE,
            "hpa_replicas": hpa_replicas(
                workload,
                loaded,
                {"current": timelines[0], "candidate": timelines[1]},
            ),
            "timing_s": {
                "read": round(read_s, 3),
                "replay": round(time.perf_counter() - started - read_s, 3),
            },
        }
    )
    return out

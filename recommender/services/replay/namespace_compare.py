"""Compare two profiles over a namespace: what switching its default would have done."""
# A platform team choosing a default profile asks "what would profile B have done to the
# namespace, against A, and to whom". The namespace's last days are read from its
# cluster's source
# (:func:`~recommender.services.replay.replay.load_cluster_history`, as the what-if
# reads one workload), replayed under A and B together (one engine replay, every
# container vectorised) and scored as ``manage.py replay --worst N`` scores them: the
# totals of each profile, then the workloads sorted worst for B first
# (:func:`~recommender.services.replay.replay.compare_workloads`). Nothing is stored
# and nothing is written to the cluster.

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.cache import cache

from recommender.engine import PROFILES
from recommender.engine.replay_scores import updater_proposals
from recommender.errors import InvalidInput, NotFound, VpawebError
from recommender.models import Cluster
from recommender.services.access import heavy_jobs
from recommender.services.replay.replay import (
    compare_workloads,
    load_cluster_history,
    resolve_profiles,
    run_replay,
)
from recommender.services.replay.whatif import WARMUP_S, _clean, parse_days

KIND = "compare"  # heavy_jobs' name of a background comparison
DEFAULT_WORST = 10
MAX_WORST = 100
# A background comparison's state and answer stay this long in the cache.
STORED_TTL_S = 3600
# Progress is written to the cache every this many hourly recomputes.
PROGRESS_EVERY = 12


def _profile(name: object, overrides: object, field: str) -> Any:
    if not isinstance(name, str) or name not in PROFILES:
        raise InvalidInput(
            f"{field}: {name!r} is not a profile; choose one of "
            + ", ".join(sorted(PROFILES)),
            field=field,
        )
    settings = overrides if overrides is not None else {}
    if not isinstance(settings, dict):
        raise InvalidInput(
            f'{field}_overrides must be an object such as {{"margin_fraction": 0.1}}',
            field=f"{field}_overrides",
        )
    (profile,) = resolve_profiles([name], settings)
    return profile, dict(settings)


def parse_worst(raw: object) -> int:
    """How many workloads to list, in [1, MAX_WORST]; InvalidInput keyed ``worst``."""
    if raw is None or raw == "":
        return DEFAULT_WORST
    try:
        worst = int(str(raw))
    except ValueError:
        worst = 0
    if isinstance(raw, bool) or not 1 <= worst <= MAX_WORST:
        raise InvalidInput(
            f"worst: must be a whole number in [1, {MAX_WORST}], not {raw!r}",
            field="worst",
        )
    return worst


def compare_namespace(
    *,
    cluster_id: int,
    namespace: str,
    profile_a: object,
    profile_b: object,
    overrides_a: object = None,
    overrides_b: object = None,
    days: object = None,
    worst: object = None,
    now: datetime,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Every workload of ``namespace`` under profile A and profile B (each with its
    overrides, checked as the policy editor checks them): the totals and the
    ``worst`` workloads for B."""
    a, settings_a = _profile(profile_a, overrides_a, "profile_a")
    b, settings_b = _profile(profile_b, overrides_b, "profile_b")
    span = parse_days(days)
    count = parse_worst(worst)
    if not isinstance(namespace, str) or not namespace:
        raise InvalidInput("namespace: choose a namespace", field="namespace")
    try:
        cluster = Cluster.objects.get(pk=cluster_id)
    except Cluster.DoesNotExist:
        raise NotFound(f"cluster {cluster_id} does not exist") from None
    if a.name == b.name:
        b = b.with_overrides(name=f"{b.name} (B)")
    started = time.perf_counter()
    loaded = load_cluster_history(
        cluster_name=cluster.name,
        namespace=namespace,
        workload=None,
        days=span,
        now_s=now.timestamp(),
    )
    read_s = time.perf_counter() - started
    report = run_replay(loaded, [a, b], warmup_s=WARMUP_S, progress=progress)
    per_workload = compare_workloads(loaded, report, warmup_s=WARMUP_S)
    rows = []
    for role, profile in (("a", a), ("b", b)):
        row = next(r for r in report.rows if r["profile"] == profile.name)
        proposals = int(updater_proposals(report.timelines[profile.name]).sum())
        rows.append({"role": role, **row, "updater_proposals": proposals})
    return dict(
        _clean(
            {
                "cluster": cluster.name,
                "namespace": namespace,
                "days": span,
                "every_s": report.timelines[a.name].every_s,
                "warmup_s": WARMUP_S,
                "a": {"profile": profile_a, "overrides": settings_a},
                "b": {"profile": profile_b, "overrides": settings_b},
                "rows": rows,
                "workload_count": len(per_workload),
                "container_count": len(loaded.trace.container_ids),
                "worst": per_workload[:count],
                "timing_s": {
                    "read": round(read_s, 3),
                    "replay": round(time.perf_counter() - started - read_s, 3),
                },
            }
        )
    )


# --- background runs ------------------------------------------------------------------


def check_request(**params: Any) -> None:
    """The request's mistakes (InvalidInput), before a background run is queued."""
    _profile(params.get("profile_a"), params.get("overrides_a"), "profile_a")
    _profile(params.get("profile_b"), params.get("overrides_b"), "profile_b")
    parse_days(params.get("days"))
    parse_worst(params.get("worst"))
    if not params.get("namespace"):
        raise InvalidInput("namespace: choose a namespace", field="namespace")


def _key(token: str) -> str:
    return f"vpaweb:compare:{token}"


def new_token() -> str:
    """A fresh id for a background comparison, stored as queued."""
    token = uuid.uuid4().hex
    cache.set(_key(token), {"state": "queued", "progress": 0.0}, STORED_TTL_S)
    return token


def stored(token: str) -> dict[str, Any] | None:
    """A background comparison's state: queued, running (with progress from 0 to
    1), done (with ``result``) or failed (with ``errors``); None once expired;
    SourceUnavailable while the cache is away."""
    if not token.isalnum():
        return None
    with heavy_jobs.cache_needed():
        found: dict[str, Any] | None = cache.get(_key(token))
    return found


def run_stored(
    token: str, params: dict[str, Any], *, now: datetime, who: str | None = None
) -> None:
    """Run one comparison, keeping its progress and answer in the cache; then give
    ``who``'s slot back (``heavy_jobs.start_background`` took it)."""
    try:
        _run_stored(token, params, now=now)
    finally:
        if who is not None:
            heavy_jobs.give_slot_back(who=who)


def _run_stored(token: str, params: dict[str, Any], *, now: datetime) -> None:
    key = _key(token)
    cache.set(key, {"state": "running", "progress": 0.0}, STORED_TTL_S)

    def progress(done: int, total: int) -> None:
        if done % PROGRESS_EVERY == 0 or done == total:
            share = done / total if total else 1.0
            cache.set(key, {"state": "running", "progress": share}, STORED_TTL_S)

    try:
        result = compare_namespace(**params, now=now, progress=progress)
    except InvalidInput as exc:
        errors = [f"{n}: {'; '.join(m)}" for n, m in exc.fields.items()] or [
            exc.message
        ]
        cache.set(key, {"state": "failed", "errors": errors}, STORED_TTL_S)
        heavy_jobs.forget_background(kind=KIND, params=params)
    except VpawebError as exc:  # the cluster or its source cannot be read
        cache.set(key, {"state": "failed", "errors": [exc.message]}, STORED_TTL_S)
        heavy_jobs.forget_background(kind=KIND, params=params)
    else:
        cache.set(key, {"state": "done", "result": result}, STORED_TTL_S)

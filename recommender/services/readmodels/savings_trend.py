"""The savings trend (as Kubecost shows it): the fleet's monthly savings, requests and
recommendations over time, from ``SavingsSnapshot`` rows."""
# - ``record_snapshot``: the refresh cycle calls it after each successful refresh; the
#   first one of each hour writes one row per namespace of the cluster (the namespace
#   rollup of ``readmodels/rollups.py``, so the trend and the rollups agree); later ones
#   in that hour cost one indexed ``exists()``, or nothing in a process that saw the
#   hour's rows committed (``_TAKEN``).
# - ``thin_snapshots``: the hourly expiry run keeps only the last snapshot of each day
#   once it is older than ``VPAWEB_SAVINGS_TREND_HOURLY_DAYS``, and drops snapshots
#   older than ``VPAWEB_SAVINGS_TREND_DAYS``.
# - ``savings_trend``: the points of a chart: hourly for ranges within the hourly
#   window, else daily (each cluster's last snapshot of the day), summed over clusters.

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

from recommender.models import Cluster, SavingsSnapshot
from recommender.services.readmodels.provisioning import Prices
from recommender.services.readmodels.rollups import rollup

logger = logging.getLogger(__name__)

AMOUNTS = (
    "workloads",
    "requested_cpu_millicores",
    "requested_memory_bytes",
    "recommended_cpu_millicores",
    "recommended_memory_bytes",
    "savings_monthly",
    "realized_savings_monthly",
)


# Per cluster, the latest hour whose snapshot this process wrote or found, once
# committed: an hour's rows stay (thinning and retention delete only older hours), so
# the later refreshes in that hour ask nothing. Keyed by pk and creation time: a pk
# that SQLite gives again to a new cluster is another cluster. (A row deleted by hand
# within its hour is not written again by a process that saw it.)
_TAKEN: dict[tuple[int, datetime], datetime] = {}


def hour_of(when: datetime) -> datetime:
    """The start of ``when``'s hour."""
    return when.replace(minute=0, second=0, microsecond=0)


def record_snapshot(*, cluster: Cluster, now: datetime, prices: Prices) -> int:
    """Write the cluster's namespace totals for ``now``'s hour unless they exist;
    returns how many rows were written (0 when the hour has them already)."""
    taken_at = hour_of(now)
    key = (cluster.pk, cluster.created_at)
    if _TAKEN.get(key) == taken_at:
        return 0
    if SavingsSnapshot.objects.filter(cluster=cluster, taken_at=taken_at).exists():
        _remember(key, taken_at)
        return 0
    totals = rollup(by="namespace", cluster=cluster.name, now=now, prices=prices)
    rows = [
        SavingsSnapshot(
            cluster=cluster,
            namespace=group.name,
            taken_at=taken_at,
            workloads=group.workloads,
            # Covered requests: what the recommendations are compared with.
            requested_cpu_millicores=group.covered_requested_cpu_millicores,
            requested_memory_bytes=group.covered_requested_memory_bytes,
            recommended_cpu_millicores=group.recommended_cpu_millicores,
            recommended_memory_bytes=group.recommended_memory_bytes,
            savings_monthly=group.savings,
            realized_savings_monthly=group.realized_savings,
        )
        for group in totals.groups
    ]
    # A concurrent shard of the same cluster may have written the hour just now.
    SavingsSnapshot.objects.bulk_create(rows, ignore_conflicts=True)
    if rows:
        _remember(key, taken_at)
    return len(rows)


def _remember(key: tuple[int, datetime], taken_at: datetime) -> None:
    """Remember (in ``_TAKEN``) that the hour ``taken_at`` of the cluster ``key`` has
    its rows, once the transaction that saw or wrote them commits (at once outside
    any, as the refresh calls ``record_snapshot``)."""
    transaction.on_commit(lambda: _TAKEN.__setitem__(key, taken_at))


def thin_snapshots(*, now: datetime) -> dict[str, int]:
    """Keep each cluster's last snapshot of a day once older than the hourly window;
    drop every snapshot older than the trend's retention. Returns the counts."""
    dropped, _ = SavingsSnapshot.objects.filter(
        taken_at__lt=now - timedelta(days=settings.SAVINGS_TREND_DAYS)
    ).delete()
    cutoff = hour_of(now) - timedelta(days=settings.SAVINGS_TREND_HOURLY_DAYS)
    hours = (
        SavingsSnapshot.objects.filter(taken_at__lt=cutoff)
        .order_by()
        .values_list("cluster_id", "taken_at")
        .distinct()
    )
    last_of_day: dict[tuple[int, Any], datetime] = {}
    hours_of_day: dict[tuple[int, Any], int] = defaultdict(int)
    for cluster_id, taken_at in hours:
        day = (cluster_id, taken_at.date())
        hours_of_day[day] += 1
        if day not in last_of_day or taken_at > last_of_day[day]:
            last_of_day[day] = taken_at
    thinned = 0
    with transaction.atomic():
        # Only days not thinned yet: a statement per day that still has several hours.
        for day, kept in last_of_day.items():
            if hours_of_day[day] < 2:
                continue
            cluster_id = day[0]
            start = kept.replace(hour=0)
            deleted, _ = SavingsSnapshot.objects.filter(
                cluster_id=cluster_id,
                taken_at__gte=start,
                taken_at__lt=kept,
            ).delete()
            thinned += deleted
    return {"snapshots_dropped": dropped, "snapshots_thinned": thinned}


@dataclass(frozen=True)
class TrendPoint:
    """The fleet (or the chosen cluster/namespace) at one hour or day."""

    at: datetime
    workloads: int
    requested_cpu_millicores: int
    requested_memory_bytes: int
    recommended_cpu_millicores: int
    recommended_memory_bytes: int
    savings_monthly: float
    realized_savings_monthly: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The API's shape (``TrendPointSerializer``)."""
        return {
            "at": self.at,
            "workloads": self.workloads,
            "requested_cpu_millicores": self.requested_cpu_millicores,
            "requested_memory_bytes": self.requested_memory_bytes,
            "recommended_cpu_millicores": self.recommended_cpu_millicores,
            "recommended_memory_bytes": self.recommended_memory_bytes,
            "savings_monthly": round(self.savings_monthly, 2),
            "realized_savings_monthly": round(self.realized_savings_monthly, 2),
        }


# A trend is a line: fewer points draw no chart, only when the next is due.
MIN_TREND_POINTS = 2


@dataclass(frozen=True)
class Trend:
    """A trend's points, oldest first, and their resolution ("hour" or "day")."""

    days: int
    resolution: str
    points: list[TrendPoint]
    # With fewer than MIN_TREND_POINTS points: the start of the period whose first
    # successful refresh records the next one (None once there are enough).
    next_point_after: datetime | None = None

    @property
    def has_enough_points(self) -> bool:
        """Whether there are points enough to draw a line."""
        return len(self.points) >= MIN_TREND_POINTS


def _next_period(resolution: str, after: datetime) -> datetime:
    """The start of the hour (or day) after the one ``after`` falls in."""
    start = after.replace(minute=0, second=0, microsecond=0)
    if resolution == "day":
        return start.replace(hour=0) + timedelta(days=1)
    return start + timedelta(hours=1)


def savings_trend(
    *, now: datetime, days: int = 7, cluster: str = "", namespace: str = ""
) -> Trend:
    """The last ``days`` of snapshots of enabled clusters (``cluster``, ``namespace``
    when given), summed per hour (ranges within the hourly window) or per day."""
    resolution = "hour" if days <= settings.SAVINGS_TREND_HOURLY_DAYS else "day"
    rows = SavingsSnapshot.objects.filter(
        taken_at__gte=now - timedelta(days=days), cluster__is_enabled=True
    )
    if cluster:
        rows = rows.filter(cluster__name=cluster)
    if namespace:
        rows = rows.filter(namespace=namespace)
    # Per (cluster, period): the amounts of its latest snapshot hour in the period.
    latest: dict[tuple[int, datetime], datetime] = {}
    sums: dict[tuple[int, datetime], dict[str, float]] = defaultdict(
        lambda: dict.fromkeys(AMOUNTS, 0.0)
    )
    for row in rows.order_by().values("cluster_id", "taken_at", *AMOUNTS):
        taken_at = row["taken_at"]
        period = (
            taken_at
            if resolution == "hour"
            else taken_at.replace(hour=0, minute=0, second=0, microsecond=0)
        )
        key = (row["cluster_id"], period)
        if key in latest and taken_at < latest[key]:
            continue
        if key not in latest or taken_at > latest[key]:
            latest[key] = taken_at
            sums[key] = dict.fromkeys(AMOUNTS, 0.0)
        for name in AMOUNTS:
            sums[key][name] += row[name]
    by_period: dict[datetime, dict[str, float]] = defaultdict(
        lambda: dict.fromkeys(AMOUNTS, 0.0)
    )
    for (_cluster_id, period), amounts in sums.items():
        for name in AMOUNTS:
            by_period[period][name] += amounts[name]
    points = [
        TrendPoint(
            at=period,
            workloads=int(amounts["workloads"]),
            requested_cpu_millicores=int(amounts["requested_cpu_millicores"]),
            requested_memory_bytes=int(amounts["requested_memory_bytes"]),
            recommended_cpu_millicores=int(amounts["recommended_cpu_millicores"]),
            recommended_memory_bytes=int(amounts["recommended_memory_bytes"]),
            savings_monthly=amounts["savings_monthly"],
            realized_savings_monthly=amounts["realized_savings_monthly"],
        )
        for period, amounts in sorted(by_period.items())
    ]
    next_point_after = None
    if len(points) < MIN_TREND_POINTS:
        # The latest point's period is taken: the next one starts after it (with
        # none yet, the current period's refresh records the first).
        next_point_after = (
            _next_period(resolution, points[-1].at)
            if points
            else now.replace(minute=0, second=0, microsecond=0)
        )
    return Trend(
        days=days,
        resolution=resolution,
        points=points,
        next_point_after=next_point_after,
    )


def record_snapshot_quietly(*, cluster: Cluster, now: datetime) -> int:
    """``record_snapshot`` for the refresh cycle: a failure is logged, never raised
    (the refresh itself succeeded; the next one in the hour tries again)."""
    try:
        return record_snapshot(cluster=cluster, now=now, prices=Prices.from_settings())
    except Exception:
        logger.exception("savings snapshot of cluster %s failed", cluster.name)
        return 0

"""Counting the webhook's decisions cheaply: in memory, flushed as per-minute rows.

The hot path only increments a dict under a lock (``count``); ``flush_counts`` (every
few seconds from the serving process, and after a simulated cluster's batch) adds the
totals to ``AdmissionCount`` rows, one per (cluster, minute, outcome), in one upsert
(a row added to, or created). If the database is down the totals stay in memory and
are added on the next flush."""
# ``count`` also increments the Prometheus counters of recommender/metrics.py (requests
# by outcome, JSONPatch operations, fail-opens by a bounded reason) in the same call, so
# the dashboard's per-minute rows and ``/metrics`` of the webhook count the same
# decisions (dry runs are in neither).

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Q, Sum

from recommender import metrics
from recommender.models import AdmissionCount
from recommender.models.bulk import rows_per_statement

logger = logging.getLogger(__name__)

_pending: Counter[tuple[str, datetime, str]] = Counter()
_lock = threading.Lock()
# One flush at a time: a flush returns once every count taken before it is saved (or
# kept for later), even when another thread's flush had already taken them.
_flushing = threading.Lock()


# The fail-open reasons /metrics tells apart (a label must stay a short, fixed set:
# decision reasons carry pod and workload names).
FAIL_OPEN_REASONS = (
    "deadline",
    "internal_error",
    "cache",
    "unreadable_spec",
    "limit_range",
    "other",
)


def fail_open_reason(reason: str) -> str:
    """The FAIL_OPEN_REASONS entry of a decision's free-text reason."""
    for needle, kind in (
        ("deadline", "deadline"),
        ("internal error", "internal_error"),
        ("admission cache", "cache"),
        ("unreadable", "unreadable_spec"),
        ("LimitRange", "limit_range"),
    ):
        if needle in reason:
            return kind
    return "other"


def count(
    *,
    cluster_name: str,
    outcome: str,
    at: datetime,
    patches: int = 0,
    fail_open: str = "",
) -> None:
    """Count one decision (no I/O): ``patches`` JSONPatch operations sent, and for a
    fail-open its FAIL_OPEN_REASONS entry."""
    minute = at.replace(second=0, microsecond=0)
    with _lock:
        _pending[(cluster_name, minute, outcome)] += 1
    metrics.WEBHOOK_REQUESTS.labels(resource="pods", outcome=outcome).inc()
    if patches:
        metrics.WEBHOOK_PATCHES.labels(resource="pods").inc(patches)
    if fail_open:
        metrics.WEBHOOK_FAIL_OPENS.labels(reason=fail_open).inc()


def pending_total() -> int:
    """Decisions counted but not yet flushed."""
    with _lock:
        return sum(_pending.values())


def flush_counts() -> int:
    """Add the pending counts to the database; returns how many decisions were saved."""
    with _flushing:
        return _flush()


def _flush() -> int:
    with _lock:
        batch = dict(_pending)
        _pending.clear()
    if not batch:
        return 0
    try:
        _add(batch)
    except Exception:
        logger.warning(
            "admission counts not saved; kept for the next flush", exc_info=True
        )
        with _lock:
            for key, n in batch.items():
                _pending[key] += n
        return 0
    return sum(batch.values())


# The columns of an AdmissionCount row as ``_add`` writes them (each named as its
# field): its unique key, then the count.
_COLUMNS = ("cluster_name", "minute", "outcome", "count")


def _add(batch: dict[tuple[str, datetime, str], int]) -> None:
    """Add each (cluster, minute, outcome) count to its row, creating the missing
    ones: one upsert (PostgreSQL and SQLite 3.24+ alike) per ``rows_per_statement``
    keys, all in one transaction, so a row another process creates meanwhile is added
    to, not raced, and a flush saves all its counts or none."""
    meta = AdmissionCount._meta
    q = connection.ops.quote_name
    minute = meta.get_field("minute")
    table = q(meta.db_table)
    names = [q(name) for name in _COLUMNS]
    count_column = names[-1]
    rows = [
        [cluster_name, minute.get_db_prep_save(at, connection), outcome, n]
        for (cluster_name, at, outcome), n in batch.items()
    ]
    per_statement = rows_per_statement(None, len(names))
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(rows), per_statement):
            chunk = rows[start : start + per_statement]
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(names)})"
                f" VALUES {', '.join(['(%s, %s, %s, %s)'] * len(chunk))}"
                f" ON CONFLICT ({', '.join(names[:-1])}) DO UPDATE"
                f" SET {count_column} = {table}.{count_column}"
                f" + excluded.{count_column}",
                [value for row in chunk for value in row],
            )


@dataclass(frozen=True)
class AdmissionTotals:
    """Decisions of one period."""

    patched: int = 0
    left_alone: int = 0
    failed_open: int = 0

    @property
    def total(self) -> int:
        """All pods the webhook saw."""
        return self.patched + self.left_alone + self.failed_open


def admission_totals(
    *, since: datetime, cluster_name: str | None = None
) -> AdmissionTotals:
    """Saved counts since ``since`` (one aggregate query)."""
    rows = AdmissionCount.objects.filter(minute__gte=since)
    if cluster_name is not None:
        rows = rows.filter(cluster_name=cluster_name)
    sums = {
        row["outcome"]: row["n"]
        for row in rows.values("outcome").annotate(n=Sum("count"))
    }
    return AdmissionTotals(
        patched=sums.get(AdmissionCount.Outcome.PATCHED, 0),
        left_alone=sums.get(AdmissionCount.Outcome.LEFT_ALONE, 0),
        failed_open=sums.get(AdmissionCount.Outcome.FAILED_OPEN, 0),
    )


def hour_and_day_totals(*, now: datetime) -> tuple[AdmissionTotals, AdmissionTotals]:
    """The overview's figures: the last hour and the last day (one query)."""
    hour_ago = now - timedelta(hours=1)
    rows = (
        AdmissionCount.objects.filter(minute__gte=now - timedelta(days=1))
        .values("outcome")
        .annotate(day=Sum("count"), hour=Sum("count", filter=Q(minute__gte=hour_ago)))
    )
    sums = {row["outcome"]: row for row in rows}

    def totals(period: str) -> AdmissionTotals:
        return AdmissionTotals(
            **{
                outcome: (sums.get(outcome) or {}).get(period) or 0
                for outcome in ("patched", "left_alone", "failed_open")
            }
        )

    return totals("hour"), totals("day")

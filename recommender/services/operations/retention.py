"""Retention: history past its configured age is pruned, a bounded batch at a time."""
# ``prune_history`` (the hourly ``prune_history`` task, ``manage.py prune``) deletes,
# for each history (``HISTORIES``), the rows older than its ``VPAWEB_RETENTION_*``
# setting, and thins recommendation history older than
# ``VPAWEB_RETENTION_RECOMMENDATION_DETAIL_DAYS`` to the last row of each container and
# UTC day. Each batch is chosen by one bounded ``SELECT … LIMIT`` and deleted in its own
# short transaction, so a refresh never waits on the prune for long; a run stops after
# ``VPAWEB_RETENTION_BUDGET_S`` and the next one goes on where it stopped (thinning
# resumes from the day stored in the last run's counts). A container's latest
# recommendation is never deleted, however old: it is what the pages, the webhook and
# the updater read.
#
# ``past_retention`` counts what a run would delete (``manage.py prune --dry-run``);
# ``table_usage`` is the runs page's storage panel: rows, size and oldest row per table.

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from django.conf import settings
from django.contrib.sessions.models import Session
from django.db import connection, models, transaction
from django.db.models import Count, Exists, Min, OuterRef, Q
from django.utils import timezone

from recommender.errors import InvalidInput
from recommender.models import (
    AdmissionCount,
    AuditEvent,
    Container,
    OomKill,
    Recommendation,
    RefreshRun,
    ResizeChange,
    UsageHour,
    Workload,
)
from recommender.models.actuation import OPEN_RESIZE_STATUSES
from recommender.services.operations.runs import recorded_run

logger = logging.getLogger(__name__)

# Inactive workloads are deleted this many at a time: each takes its containers,
# checkpoints, OOM kills and recommendation history with it.
WORKLOADS_PER_BATCH = 20


@dataclass(frozen=True)
class History:
    """One pruned history: its rows, the column their age is read from and the setting
    of its retention in days (none: a row carries its own expiry, as sessions do)."""

    name: str
    model: type[models.Model]
    aged_by: str
    setting: str | None
    # Which rows of the table are this history (all, or inactive workloads).
    rows: Q = field(default_factory=Q)
    # Rows never pruned, however old.
    kept: Q = field(default_factory=Q)
    # Shown on the runs page's storage panel (one row per table).
    on_panel: bool = True

    @property
    def keep_days(self) -> int:
        """The retention now (settings are read when called)."""
        return int(getattr(settings, self.setting)) if self.setting else 0

    def expired(self, now: datetime) -> models.QuerySet[models.Model]:
        """The rows past retention at ``now`` (unordered; pruned a batch at a time)."""
        cutoff = _cutoff(now, self.keep_days)
        return (
            self.model._default_manager.filter(self.rows)
            .filter(**{f"{self.aged_by}__lt": cutoff})
            .exclude(self.kept)
        )


def _cutoff(now: datetime, days: int) -> datetime:
    return now - timedelta(days=days)


# Every container's latest recommendation (what the pages read) is never pruned.
_LATEST = Q(Exists(Container.objects.filter(latest_recommendation_id=OuterRef("pk"))))


def _not_latest(qs: models.QuerySet[Recommendation]) -> models.QuerySet[Recommendation]:
    """Leave out every container's latest recommendation."""
    return qs.exclude(_LATEST)


# Every pruned history, in the order a prune run takes them.
HISTORIES: tuple[History, ...] = (
    History(
        "recommendations",
        Recommendation,
        "created_at",
        "RETENTION_RECOMMENDATION_DAYS",
        kept=_LATEST,
    ),
    History("oom_kills", OomKill, "occurred_at", "RETENTION_OOM_KILL_DAYS"),
    # The workload page's usage chart (8 days of hours).
    History("usage_hours", UsageHour, "ends_at", "RETENTION_USAGE_DAYS"),
    # A running row is the reaper's (operations/runs.py), never the prune's.
    History(
        "runs",
        RefreshRun,
        "started_at",
        "RETENTION_RUN_DAYS",
        kept=Q(status=RefreshRun.Status.RUNNING),
    ),
    History("audit_events", AuditEvent, "created_at", "RETENTION_AUDIT_DAYS"),
    History(
        "admission_counts", AdmissionCount, "minute", "RETENTION_ADMISSION_COUNT_DAYS"
    ),
    # Only closed changes: an open one is still the updater's work.
    History(
        "resize_changes",
        ResizeChange,
        "created_at",
        "RETENTION_CHANGE_DAYS",
        kept=Q(status__in=OPEN_RESIZE_STATUSES),
    ),
    History(
        "inactive_workloads",
        Workload,
        "last_seen_at",
        "RETENTION_INACTIVE_DAYS",
        rows=Q(is_active=False),
    ),
    History("login_logs", AccessLog, "attempt_time", "RETENTION_LOGIN_DAYS"),
    History(
        "login_failures",
        AccessFailureLog,
        "attempt_time",
        "RETENTION_LOGIN_DAYS",
        on_panel=False,
    ),
    History(
        "login_attempts",
        AccessAttempt,
        "attempt_time",
        "RETENTION_LOGIN_DAYS",
        on_panel=False,
    ),
    History("sessions", Session, "expire_date", None),
)


# --- thinning -------------------------------------------------------------------------


def _day_start(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _thin_days(now: datetime, *, since: datetime | None) -> Iterator[datetime]:
    """The UTC days to thin: whole days older than the detail retention, from
    ``since`` (where the last run stopped) or the oldest kept day."""
    first = _day_start(_cutoff(now, settings.RETENTION_RECOMMENDATION_DAYS))
    if since is not None and since > first:
        first = _day_start(since)
    end = _day_start(_cutoff(now, settings.RETENTION_RECOMMENDATION_DETAIL_DAYS))
    day = first
    while day < end:
        yield day
        day += timedelta(days=1)


def _thinned_of_day(day: datetime) -> models.QuerySet[Recommendation]:
    """Rows of ``day`` with a later row of the same container on that day."""
    end = day + timedelta(days=1)
    later = Recommendation.objects.filter(
        container_id=OuterRef("container_id"),
        created_at__gt=OuterRef("created_at"),
        created_at__lt=end,
    )
    return _not_latest(
        Recommendation.objects.filter(created_at__gte=day, created_at__lt=end).filter(
            Exists(later)
        )
    )


def _thinned_through() -> datetime | None:
    """Where thinning stopped: the day stored by the newest finished prune run."""
    run = (
        RefreshRun.objects.filter(
            kind=RefreshRun.Kind.PRUNE, status=RefreshRun.Status.SUCCEEDED
        )
        .order_by("-started_at")
        .only("counts")
        .first()
    )
    value = run.counts.get("thinned_through") if run is not None else None
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if timezone.is_aware(parsed) else None


# --- pruning --------------------------------------------------------------------------


class _Budget:
    """The run's time budget (monotonic clock)."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    @property
    def is_spent(self) -> bool:
        return time.monotonic() >= self.deadline


def _delete_batches(
    qs: models.QuerySet[models.Model],
    *,
    batch: int,
    budget: _Budget,
    per_batch: int | None = None,
    delete_one: _DeleteOne | None = None,
) -> tuple[int, bool]:
    """The one batch-delete loop: choose up to ``per_batch`` (default ``batch``) keys
    of ``qs`` by one bounded SELECT, delete them (``delete_one``, default: the rows in
    their own transaction) until none is left or the budget is spent; return (rows
    deleted, whether all are gone)."""
    delete_one = delete_one or _delete_rows
    deleted = 0
    while not budget.is_spent:
        pks = list(qs.order_by().values_list("pk", flat=True)[: per_batch or batch])
        if not pks:
            return deleted, True
        rows = delete_one(qs, pks, batch, budget)
        if rows is None:
            break
        deleted += rows
    return deleted, False


# Deletes the rows of a queryset with the chosen keys: the rows deleted, None when the
# budget ran out first.
_DeleteOne = Callable[
    [models.QuerySet[models.Model], list[Any], int, _Budget], int | None
]


def _delete_rows(
    qs: models.QuerySet[models.Model], pks: list[Any], batch: int, budget: _Budget
) -> int:
    model = qs.model
    with transaction.atomic():
        # only("pk"): the collector need not load the rows' JSON to delete them.
        _, per_model = model._default_manager.filter(pk__in=pks).only("pk").delete()
    return per_model.get(model._meta.label, 0)


def _delete_workloads(
    qs: models.QuerySet[models.Model], ids: list[Any], batch: int, budget: _Budget
) -> int | None:
    """Delete inactive workloads with everything of theirs: history first, in
    batches, so no statement loads a workload's whole history at once."""
    gone = qs.filter(pk__in=ids)
    # The latest pointers go first, so the history batches may take every row.
    Container.objects.filter(workload__in=gone).update(latest_recommendation=None)
    history = Recommendation.objects.filter(container__workload__in=gone)
    _, is_done = _delete_batches(history, batch=batch, budget=budget)
    if not is_done:
        return None
    with transaction.atomic():
        # Still inactive and old (``qs`` filters again): a workload discovery brought
        # back meanwhile stays.
        _, per_model = gone.delete()
    return per_model.get(Workload._meta.label, 0)


def prune_history(
    *,
    now: datetime,
    batch: int | None = None,
    budget_s: float | None = None,
) -> RefreshRun:
    """Delete history past its retention and thin old recommendation history, within
    the time budget; one recorded run (kind ``prune``) with the counts per history."""
    if timezone.is_naive(now):
        raise InvalidInput("now must be timezone-aware", field="now")
    batch = batch or settings.RETENTION_BATCH
    budget = _Budget(settings.RETENTION_BUDGET_S if budget_s is None else budget_s)
    with recorded_run(kind=RefreshRun.Kind.PRUNE) as recorder:
        counts: dict[str, object] = {}
        is_complete = True
        since = _thinned_through()
        thinned_through = since
        with recorder.phases("thin"):
            thinned = 0
            for day in _thin_days(now, since=since):
                rows, is_done = _delete_batches(
                    _thinned_of_day(day), batch=batch, budget=budget
                )
                thinned += rows
                if not is_done:
                    is_complete = False
                    break
                thinned_through = day + timedelta(days=1)
            counts["recommendations_thinned"] = thinned
        if thinned_through is not None:
            counts["thinned_through"] = thinned_through.isoformat()
        for history in HISTORIES:
            if budget.is_spent:
                is_complete = False
                break
            is_workloads = history.model is Workload
            with recorder.phases(history.name):
                rows, is_done = _delete_batches(
                    history.expired(now),
                    batch=batch,
                    budget=budget,
                    per_batch=WORKLOADS_PER_BATCH if is_workloads else None,
                    delete_one=_delete_workloads if is_workloads else None,
                )
            counts[history.name] = rows
            is_complete = is_complete and is_done
        counts["complete"] = is_complete
        recorder.counts = counts
    if not is_complete:
        logger.warning(
            "prune: stopped after its %.0f s budget; the next run goes on",
            settings.RETENTION_BUDGET_S if budget_s is None else budget_s,
        )
    return recorder.run


@dataclass(frozen=True)
class Pending:
    """What a prune run would delete of one history now."""

    name: str
    keep_days: int
    rows: int


def past_retention(*, now: datetime) -> list[Pending]:
    """Rows each history has past its retention (and recommendations to thin)."""
    pending = [
        Pending(h.name, h.keep_days, h.expired(now).order_by().count())
        for h in HISTORIES
    ]
    to_thin = sum(
        _thinned_of_day(day).order_by().count()
        for day in _thin_days(now, since=_thinned_through())
    )
    pending.insert(
        1,
        Pending(
            "recommendations_thinned",
            settings.RETENTION_RECOMMENDATION_DETAIL_DAYS,
            to_thin,
        ),
    )
    return pending


# --- storage --------------------------------------------------------------------------


@dataclass(frozen=True)
class TableUsage:
    """One table on the runs page: rows, bytes on disk and its oldest row."""

    name: str
    table: str
    rows: int
    size_bytes: int | None
    oldest: datetime | None
    keep_days: int | None


def _postgres_sizes(tables: list[str]) -> dict[str, tuple[int, int]]:
    """Rows (the planner's estimate: no count over a large table) and total bytes."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, reltuples::bigint, pg_total_relation_size(oid) "
            "FROM pg_class WHERE relkind = 'r' AND relname = ANY(%s)",
            [tables],
        )
        return {name: (max(rows, 0), size) for name, rows, size in cursor.fetchall()}


def table_usage() -> list[TableUsage]:
    """Size and age of every table that grows with time: one query per table, and
    one for the sizes (rows are the planner's estimates on PostgreSQL, no count
    over a large table; SQLite counts them and shows no size)."""
    shown = [history for history in HISTORIES if history.on_panel]
    tables = [history.model._meta.db_table for history in shown]
    sizes = _postgres_sizes(tables) if connection.vendor == "postgresql" else {}
    usage = []
    for history in shown:
        # The age column is indexed for the larger tables: the oldest row is one
        # index read.
        qs = history.model._default_manager.order_by().filter(history.rows)
        table = history.model._meta.db_table
        estimate, size = sizes.get(table, (None, None))
        if estimate is None or history.rows:
            found = qs.aggregate(rows=Count("pk"), oldest=Min(history.aged_by))
            rows = int(found["rows"])
        else:
            found = qs.aggregate(oldest=Min(history.aged_by))
            rows = estimate
        usage.append(
            TableUsage(
                history.name, table, rows, size, found["oldest"], history.keep_days
            )
        )
    return usage

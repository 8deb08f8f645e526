"""Celery tasks: thin, JSON-only interfaces to the services, named like them.

Import them with a ``_task`` suffix (``refresh_cluster as refresh_cluster_task``) so
they are not confused with the services. Without ``REDIS_URL`` they run eagerly,
in-process; the base class still sends their arguments through the JSON serializer so
that eager mode cannot accept what a real broker would refuse.
"""

from __future__ import annotations

import logging
import random
from datetime import datetime
from typing import Any

from celery import shared_task
from celery.contrib.django.task import DjangoTask
from django.db import InterfaceError, OperationalError
from django.utils import timezone
from kombu.utils.json import dumps, loads

from recommender.errors import InvalidInput, NotFound, SourceUnavailable
from recommender.models import Cluster
from recommender.services import refresh

logger = logging.getLogger(__name__)

# Failures worth another try: the source or the database is briefly away.
TRANSIENT_ERRORS = (SourceUnavailable, OperationalError, InterfaceError)
MAX_RETRIES = 3


class JsonTask(DjangoTask):  # type: ignore[misc]
    """A task whose arguments survive a JSON round trip, even when run eagerly."""

    def apply(
        self, args: Any = None, kwargs: Any = None, *rest: Any, **options: Any
    ) -> Any:
        """Run in-process (eager mode) with arguments as a broker delivers them."""
        args, kwargs = loads(dumps([list(args or ()), dict(kwargs or {})]))
        return super().apply(args, kwargs, *rest, **options)

    def retry_transient(self, exc: Exception) -> Exception:
        """Retry later with exponential backoff and jitter, at most MAX_RETRIES times.

        In eager mode the caller's loop is the retry: re-running at once would only
        repeat the failure.
        """
        if self.request.is_eager or self.request.retries >= MAX_RETRIES:
            return exc
        countdown = 2**self.request.retries * 5 + random.uniform(0, 5)
        return self.retry(exc=exc, countdown=countdown, max_retries=MAX_RETRIES)


def _parse_now(now: str | None) -> datetime:
    """An ISO timestamp with a zone, or the current time when None."""
    if now is None:
        return timezone.now()
    try:
        parsed = datetime.fromisoformat(now)
    except (TypeError, ValueError):
        raise InvalidInput(
            f"now={now!r} is not an ISO 8601 timestamp", field="now"
        ) from None
    if timezone.is_naive(parsed):
        raise InvalidInput(f"now={now!r} has no time zone", field="now")
    return parsed


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.refresh_cluster")
def refresh_cluster(
    self: JsonTask, cluster_id: int, now: str | None = None
) -> dict[str, Any]:
    """One refresh cycle of one cluster; returns the run's id, status and counts."""
    try:
        run = refresh.refresh_cluster(cluster_id=cluster_id, now=_parse_now(now))
    except NotFound:
        logger.warning("refresh of cluster %s skipped: it no longer exists", cluster_id)
        return {"cluster_id": cluster_id, "status": "gone"}
    except TRANSIENT_ERRORS as exc:
        raise self.retry_transient(exc) from exc
    return {"run_id": run.pk, "status": run.status, "counts": run.counts}


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.refresh_all_clusters")
def refresh_all_clusters(self: JsonTask, now: str | None = None) -> dict[str, Any]:
    """Queue a refresh per enabled cluster; one failing does not stop the rest."""
    queued, failed = [], []
    for cluster_id in Cluster.objects.filter(is_enabled=True).values_list(
        "pk", flat=True
    ):
        try:
            refresh_cluster.delay(cluster_id, now)
            queued.append(cluster_id)
        except Exception:
            # Only eager mode runs the refresh here; its run row holds the error.
            logger.exception("refresh of cluster %s failed", cluster_id)
            failed.append(cluster_id)
    return {"queued": queued, "failed": failed}


@shared_task(bind=True, base=JsonTask, name="recommender.tasks.expire_idle_aggregates")
def expire_idle_aggregates(self: JsonTask, now: str | None = None) -> dict[str, Any]:
    """Drop aggregates idle for 8 days (upstream's hourly garbage collection)."""
    try:
        run = refresh.expire_idle_aggregates(now=_parse_now(now))
    except (OperationalError, InterfaceError) as exc:
        raise self.retry_transient(exc) from exc
    return {"run_id": run.pk, "counts": run.counts}

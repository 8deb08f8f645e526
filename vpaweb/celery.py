"""The Celery application: broker and schedule come from settings (CELERY_* names)."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import worker_process_shutdown, worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")

app = Celery("vpaweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect  # type: ignore[untyped-decorator]
def serve_metrics(**kwargs: Any) -> None:
    """The worker's counters on VPAWEB_WORKER_METRICS_PORT (recommender/metrics.py)."""
    from django.conf import settings

    from recommender.metrics import serve_worker_metrics

    if settings.WORKER_METRICS_PORT:
        serve_worker_metrics(settings.WORKER_METRICS_PORT)


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]
def forget_child(pid: int | None = None, **kwargs: Any) -> None:
    """A pool child's live gauges go with it (multi-process metrics)."""
    from recommender.metrics import mark_process_dead

    mark_process_dead(pid or os.getpid())


@worker_shutdown.connect  # type: ignore[untyped-decorator]
@worker_process_shutdown.connect  # type: ignore[untyped-decorator]
def release_updater_leases(**kwargs: Any) -> None:
    """A worker process that stops gracefully gives its updater leases up, so another
    one leads at once (docs/updater.md "One updater per cluster")."""
    from django.utils import timezone

    from recommender.services.actuation import control

    try:
        control.release_locks(now=timezone.now())
    except Exception:  # the database may be gone already; the lease then expires
        logging.getLogger(__name__).exception("releasing the updater leases failed")

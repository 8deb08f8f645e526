"""The embedded scheduler runs the beat schedule's periodic tasks in one loop; the
prune run is one of them (after the cycle's refresh)."""

from __future__ import annotations

import threading
from datetime import timedelta

from django.utils import timezone

from recommender.management import scheduler
from recommender.models import OomKill, RefreshRun
from tests.factories import make_cluster, make_workload
from vpaweb.celery import app


def test_the_scheduler_prunes_history_when_its_hour_comes(db, monkeypatch):
    # A disabled cluster: the cycle's refresh and updater leave it alone.
    container = make_workload(make_cluster(is_enabled=False)).containers.get()
    OomKill.objects.create(
        container=container, pod="p", occurred_at=timezone.now() - timedelta(days=91)
    )
    monkeypatch.setattr(scheduler, "PRUNE_OFFSET_S", 0.0)
    # In-process even when REDIS_URL is set (the embedded default's mode).
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    monkeypatch.setitem(app.conf, "task_eager_propagates", True)

    cycles = scheduler.run_periodic(
        stop=threading.Event(), interval_s=0.0, max_cycles=1
    )

    assert cycles == 1
    run = RefreshRun.objects.get(kind=RefreshRun.Kind.PRUNE)
    assert run.counts["oom_kills"] == 1
    assert not OomKill.objects.exists()

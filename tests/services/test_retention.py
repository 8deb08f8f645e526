"""Retention: history past its settings is pruned in bounded batches, old
recommendation history is thinned to one row per container and day, a container's
latest recommendation always stays, and a dry run deletes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from axes.models import AccessLog
from django.core.management import call_command

from recommender.models import (
    AdmissionCount,
    AuditEvent,
    Checkpoint,
    Container,
    OomKill,
    Recommendation,
    RefreshRun,
    ResizeChange,
    Workload,
)
from recommender.services.operations import retention
from tests.factories import make_cluster, make_recommendation, make_workload

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture
def workload(db):
    return make_workload(make_cluster())


@pytest.fixture
def container(workload):
    return workload.containers.get()


def _rec(container, at):
    return make_recommendation(container, created_at=at)


def test_old_recommendations_go_and_the_latest_stays_however_old(container, workload):
    other = make_workload(workload.cluster, "api").containers.get()
    old = _rec(container, NOW - timedelta(days=120))
    _rec(container, NOW - timedelta(days=100))
    recent = _rec(container, NOW - timedelta(days=1))
    # The other container has not changed its recommendation for 200 days.
    settled = _rec(other, NOW - timedelta(days=200))

    run = retention.prune_history(now=NOW)

    assert run.kind == RefreshRun.Kind.PRUNE
    assert run.counts["recommendations"] == 2
    assert set(Recommendation.objects.values_list("pk", flat=True)) == {
        recent.pk,
        settled.pk,
    }
    assert not Recommendation.objects.filter(pk=old.pk).exists()
    other.refresh_from_db()
    assert other.latest_recommendation_id == settled.pk


def test_history_past_the_detail_days_keeps_the_last_row_of_each_day(container):
    day = datetime(2026, 10, 20, tzinfo=UTC)  # 38 days before NOW
    rows = [_rec(container, day + timedelta(hours=h)) for h in (1, 5, 23)]
    next_day = [_rec(container, day + timedelta(days=1, hours=h)) for h in (2, 3)]
    # Within the detail days every row stays.
    fresh = [_rec(container, NOW - timedelta(days=2, hours=h)) for h in (1, 2)]

    run = retention.prune_history(now=NOW)

    assert run.counts["recommendations_thinned"] == 3
    kept = set(Recommendation.objects.values_list("pk", flat=True))
    assert kept == {rows[-1].pk, next_day[-1].pk, *(r.pk for r in fresh)}
    # The next run starts from the day this one reached: nothing to read twice.
    assert run.counts["thinned_through"] == "2026-11-13T00:00:00+00:00"
    again = retention.prune_history(now=NOW)
    assert again.counts["recommendations_thinned"] == 0


def test_each_history_goes_after_its_own_retention(workload, container, settings):
    old, young = NOW - timedelta(days=500), NOW - timedelta(days=5)
    for at in (old, young):
        OomKill.objects.create(container=container, pod=f"p-{at:%j}", occurred_at=at)
        AuditEvent.objects.create(action="policy.update", created_at=at)
        AdmissionCount.objects.create(
            cluster_name="c", minute=at, outcome=AdmissionCount.Outcome.PATCHED
        )
        RefreshRun.objects.create(
            kind=RefreshRun.Kind.REFRESH,
            status=RefreshRun.Status.SUCCEEDED,
            started_at=at,
        )
        AccessLog.objects.create(
            user_agent="t", ip_address="127.0.0.1", username="u", http_accept="*"
        )
    AccessLog.objects.filter(pk=AccessLog.objects.order_by("pk").first().pk).update(
        attempt_time=old
    )
    lost_run = RefreshRun.objects.create(
        kind=RefreshRun.Kind.REFRESH, status=RefreshRun.Status.RUNNING, started_at=old
    )
    closed = ResizeChange.objects.create(
        workload=workload,
        pod="p1",
        status=ResizeChange.Status.APPLIED,
        created_at=old,
    )
    still_open = ResizeChange.objects.create(
        workload=workload,
        pod="p2",
        status=ResizeChange.Status.PROPOSED,
        created_at=old,
    )

    run = retention.prune_history(now=NOW)

    counts = run.counts
    assert counts["oom_kills"] == 1
    assert counts["audit_events"] == 1
    assert counts["admission_counts"] == 1
    assert counts["runs"] == 1
    assert counts["login_logs"] == 1
    assert counts["resize_changes"] == 1
    assert counts["complete"] is True
    assert OomKill.objects.get().occurred_at == young
    assert AuditEvent.objects.get().created_at == young
    assert AdmissionCount.objects.get().minute == young
    assert AccessLog.objects.count() == 1
    # A running row belongs to the reaper; an open change to the updater.
    assert RefreshRun.objects.filter(pk=lost_run.pk).exists()
    assert not ResizeChange.objects.filter(pk=closed.pk).exists()
    assert ResizeChange.objects.filter(pk=still_open.pk).exists()


def test_inactive_workloads_go_with_everything_of_theirs(workload, container):
    _rec(container, NOW - timedelta(days=40))
    _rec(container, NOW - timedelta(days=35))
    Checkpoint.objects.create(container=container, histogram_key="k", state=b"x")
    gone_recently = make_workload(workload.cluster, "recent")
    Workload.objects.filter(pk=workload.pk).update(
        is_active=False, last_seen_at=NOW - timedelta(days=31)
    )
    Workload.objects.filter(pk=gone_recently.pk).update(
        is_active=False, last_seen_at=NOW - timedelta(days=3)
    )

    run = retention.prune_history(now=NOW)

    assert run.counts["inactive_workloads"] == 1
    assert not Workload.objects.filter(pk=workload.pk).exists()
    assert not Container.objects.filter(pk=container.pk).exists()
    assert not Recommendation.objects.exists()
    assert not Checkpoint.objects.exists()
    assert Workload.objects.filter(pk=gone_recently.pk).exists()


def test_small_batches_take_everything_a_batch_at_a_time(
    container, django_assert_max_num_queries
):
    for day in range(100, 125):
        OomKill.objects.create(
            container=container, pod="p", occurred_at=NOW - timedelta(days=day)
        )

    run = retention.prune_history(now=NOW, batch=10)

    assert run.counts["oom_kills"] == 25
    assert not OomKill.objects.exists()


def test_a_spent_budget_stops_the_run_and_the_next_goes_on(container):
    for day in range(100, 110):
        OomKill.objects.create(
            container=container, pod="p", occurred_at=NOW - timedelta(days=day)
        )

    stopped = retention.prune_history(now=NOW, budget_s=0.0)

    assert stopped.counts["complete"] is False
    assert OomKill.objects.count() == 10
    done = retention.prune_history(now=NOW)
    assert done.counts["complete"] is True
    assert done.counts["oom_kills"] == 10


def test_dry_run_counts_and_deletes_nothing(container):
    _rec(container, NOW - timedelta(days=120))
    _rec(container, NOW - timedelta(days=20, hours=5))
    _rec(container, NOW - timedelta(days=20, hours=2))
    _rec(container, NOW)
    OomKill.objects.create(
        container=container, pod="p", occurred_at=NOW - timedelta(days=100)
    )

    pending = {p.name: p.rows for p in retention.past_retention(now=NOW)}

    assert pending["recommendations"] == 1
    assert pending["recommendations_thinned"] == 1
    assert pending["oom_kills"] == 1
    assert Recommendation.objects.count() == 4


def test_prune_command_dry_run_prints_what_would_go(container):
    _rec(container, datetime(2020, 1, 1, tzinfo=UTC))
    _rec(container, datetime(2020, 1, 2, tzinfo=UTC))
    out = StringIO()

    call_command("prune", "--dry-run", stdout=out)

    text = out.getvalue()
    assert "dry run: nothing is deleted" in text
    assert "recommendations            kept 90 days     would delete 1" in text
    assert Recommendation.objects.count() == 2


def test_prune_command_prunes(container):
    _rec(container, datetime(2020, 1, 1, tzinfo=UTC))
    _rec(container, datetime(2020, 1, 2, tzinfo=UTC))
    out = StringIO()

    call_command("prune", stdout=out)

    assert "recommendations            1" in out.getvalue()
    assert Recommendation.objects.count() == 1


def test_table_usage_names_each_table_with_its_oldest_row(container):
    _rec(container, datetime(2026, 1, 2, tzinfo=UTC))
    _rec(container, NOW)

    usage = {u.name: u for u in retention.table_usage()}

    recs = usage["recommendations"]
    assert recs.table == "recommender_recommendation"
    assert recs.oldest == datetime(2026, 1, 2, tzinfo=UTC)
    assert recs.keep_days == 90
    assert usage["oom_kills"].oldest is None


def test_the_schedule_prunes_hourly():
    from django.conf import settings

    entry = settings.CELERY_BEAT_SCHEDULE["prune-history"]
    assert entry["task"] == "recommender.tasks.prune_history"

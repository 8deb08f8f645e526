"""The workload page says what holds its changes back (its maintenance window, a
paused cluster) and offers "Approve all proposed" only when one is proposed."""

from __future__ import annotations

from datetime import timedelta
from html import unescape

import pytest
from django.utils import timezone

from recommender.models import Cluster, Policy, ResizeChange
from tests.factories import make_cluster, make_workload

BEFORE = {"app": {"requests": {"cpu": 500}}}
AFTER = {"app": {"requests": {"cpu": 250}}}


@pytest.fixture
def api(db):
    return make_workload(make_cluster("prod"), "api", namespace="shop", mode="Recreate")


def _change(workload, status):
    return ResizeChange.objects.create(
        workload=workload,
        pod="api-0",
        method="evict",
        status=status,
        resources_before=BEFORE,
        resources_after=AFTER,
    )


def _page(client, workload) -> str:
    answer = client.get(f"/workloads/{workload.pk}/")
    assert answer.status_code == 200
    return unescape(answer.content.decode())


def test_a_closed_window_and_the_wait_it_causes_show(operator_client, api):
    soon = timezone.now() + timedelta(hours=2)
    window = {"start": f"{soon:%H}:00", "end": f"{(soon + timedelta(hours=1)):%H}:00"}
    Policy.objects.filter(workload=api).update(maintenance_windows=[window])
    _change(api, ResizeChange.Status.APPROVED)
    html = _page(operator_client, api)
    assert (
        f"Maintenance window: the policy's every day {window['start']}–"
        f"{window['end']} UTC: closed; approved changes apply from" in html
    )
    assert "waits for the maintenance window: applies from" in html


def test_without_windows_changes_apply_at_any_time(viewer_client, api):
    html = _page(viewer_client, api)
    assert "Maintenance window: none: approved changes apply at any time." in html


def test_a_paused_cluster_is_why_nothing_applies(viewer_client, api):
    Cluster.objects.filter(pk=api.cluster_id).update(updates_paused=True)
    html = _page(viewer_client, api)
    assert (
        "The updater applies nothing to this workload now: updates of cluster prod"
        in html
    )


@pytest.mark.parametrize(
    "status, offered",
    [
        (ResizeChange.Status.APPROVED, False),
        (ResizeChange.Status.PROPOSED, True),
    ],
)
def test_approve_all_is_offered_only_when_a_change_is_proposed(
    operator_client, api, status, offered
):
    _change(api, status)
    assert ("Approve all proposed" in _page(operator_client, api)) is offered

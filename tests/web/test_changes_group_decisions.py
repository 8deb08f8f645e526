"""Deciding a whole group on the Changes page: its pods' states at a glance, and one
reject (one reason, one snooze) recording one audited decision per change."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import AuditEvent, ResizeChange
from tests.factories import make_cluster, make_workload

T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


@pytest.fixture
def api(db):
    workload = make_workload(
        make_cluster("prod"), "api", namespace="shop", mode="Recreate", replicas=4
    )
    for index in range(4):
        ResizeChange.objects.create(
            workload=workload,
            pod=f"api-{index}",
            method="evict",
            created_at=T0 + timedelta(minutes=index),
            resources_before={"app": {"requests": {"cpu": 500}}},
            resources_after={"app": {"requests": {"cpu": 250}}},
        )
    return workload


def test_a_group_row_shows_its_pods_and_offers_the_group_decisions(
    operator_client, api
):
    page = operator_client.get("/changes/").content.decode()

    assert 'data-testid="change-group-pod-states"' in page
    assert page.count('class="pod-chip pod-proposed"') == 4
    assert 'data-testid="group-approve"' in page
    assert "Reject 4</button>" in page
    # The pods are sibling rows in the group's own tbody, not a table in a cell.
    body = re.search(
        r'<tbody class="change-group-body"[^>]*>(.*?)</tbody>', page, re.S
    ).group(1)
    assert "<table" not in body
    for change in ResizeChange.objects.all():
        assert f'<tr id="change-{change.pk}">' in body


def test_rejecting_a_group_records_one_audited_decision_per_change(
    operator_client, api
):
    ids = list(ResizeChange.objects.values_list("pk", flat=True))

    response = operator_client.post(
        "/changes/reject",
        {
            "workload": api.pk,
            "change": [str(pk) for pk in ids],
            "reason": "after the sale",
            "snooze": "1d",
            "next": "/changes/?namespace=shop",
        },
    )

    assert response.status_code == 302
    assert response["Location"] == "/changes/?namespace=shop"
    assert set(ResizeChange.objects.values_list("status", "snooze")) == {
        ("rejected", "1d")
    }
    events = AuditEvent.objects.filter(action="change.reject")
    assert sorted(int(e.object_id) for e in events) == sorted(ids)
    assert {e.after["reason"] for e in events} == {"after the sale"}


def test_withdrawing_a_namespaces_approvals_leaves_proposed_changes(
    operator_client, viewer_client, api
):
    first = ResizeChange.objects.order_by("pk").first()
    ResizeChange.objects.filter(pk=first.pk).update(status="approved")
    assert viewer_client.post(
        "/changes/withdraw", {"cluster": "prod", "namespace": "shop"}
    ).status_code in (302, 403)
    assert ResizeChange.objects.get(pk=first.pk).status == "approved"

    operator_client.post("/changes/withdraw", {"cluster": "prod", "namespace": "shop"})

    assert ResizeChange.objects.get(pk=first.pk).status == "rejected"
    assert ResizeChange.objects.filter(status="proposed").count() == 3
    assert AuditEvent.objects.filter(action="change.withdraw").count() == 1

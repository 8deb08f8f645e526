"""Bulk approval of resize changes by workload or namespace; viewers cannot act."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from recommender.models import AuditEvent, Policy, ResizeChange, Workload

pytestmark = pytest.mark.django_db
S = ResizeChange.Status


def _changes(workload: Workload, count: int) -> list[ResizeChange]:
    Policy.objects.filter(workload=workload).update(mode=Policy.Mode.RECREATE)
    return [
        ResizeChange.objects.create(workload=workload, pod=f"web-{i}", priority=i)
        for i in range(count)
    ]


def test_bulk_approve_by_workload_approves_each_proposed_one_with_its_own_audit(
    write_client: Client, shop: Workload
) -> None:
    changes = _changes(shop, 3)
    ResizeChange.objects.filter(pk=changes[0].pk).update(status=S.REJECTED)
    response = write_client.post(f"/api/v1/workloads/{shop.pk}/changes/approve")
    assert response.status_code == 200
    assert response.json() == {
        "approved": [changes[2].pk, changes[1].pk],
        "skipped": [],
    }
    assert AuditEvent.objects.filter(action="change.approve").count() == 2
    assert ResizeChange.objects.get(pk=changes[0].pk).status == S.REJECTED


def test_bulk_approve_by_namespace(write_client: Client, shop: Workload) -> None:
    changes = _changes(shop, 2)
    url = "/api/v1/clusters/prod/namespaces/{}/changes/approve"
    response = write_client.post(url.format("shop"))
    assert sorted(response.json()["approved"]) == sorted(c.pk for c in changes)
    other = write_client.post(url.format("elsewhere"))
    assert other.json() == {"approved": [], "skipped": []}
    missing = write_client.post(
        "/api/v1/clusters/nowhere/namespaces/shop/changes/approve"
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "cluster 'nowhere' does not exist"


def test_bulk_approve_needs_a_writer(
    read_client: Client, shop: Workload, viewer: Any, session_client
) -> None:
    _changes(shop, 1)
    for client in (read_client, session_client(viewer)):
        refused = client.post(f"/api/v1/workloads/{shop.pk}/changes/approve")
        assert refused.status_code == 403
    assert ResizeChange.objects.get().status == S.PROPOSED

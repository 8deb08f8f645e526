"""Bulk rejection (one reason, one snooze) and withdrawal of approvals, by workload
or namespace: one audited decision per change, through the single decisions."""

from __future__ import annotations

import json

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


def test_bulk_reject_of_a_group_records_one_audited_decision_per_change(
    write_client: Client, shop: Workload
) -> None:
    changes = _changes(shop, 4)
    ResizeChange.objects.filter(pk=changes[0].pk).update(status=S.APPROVED)
    ResizeChange.objects.filter(pk=changes[1].pk).update(status=S.APPLIED)

    response = write_client.post(
        f"/api/v1/workloads/{shop.pk}/changes/reject",
        json.dumps({"reason": "batch window next week", "snooze": "7d"}),
        content_type="application/json",
    )

    assert response.status_code == 200, response.json()
    assert sorted(response.json()["decided"]) == sorted(
        c.pk for c in (changes[0], changes[2], changes[3])
    )
    rejected = ResizeChange.objects.filter(status=S.REJECTED)
    assert set(rejected.values_list("snooze", flat=True)) == {"7d"}
    events = AuditEvent.objects.filter(action="change.reject")
    assert events.count() == 3
    assert {e.after["reason"] for e in events} == {"batch window next week"}
    assert ResizeChange.objects.get(pk=changes[1].pk).status == S.APPLIED


def test_bulk_withdraw_by_namespace_takes_back_only_approvals(
    write_client: Client, shop: Workload
) -> None:
    changes = _changes(shop, 3)
    ResizeChange.objects.filter(pk__in=[changes[0].pk, changes[1].pk]).update(
        status=S.APPROVED
    )

    response = write_client.post(
        "/api/v1/clusters/prod/namespaces/shop/changes/withdraw"
    )

    assert sorted(response.json()["decided"]) == [changes[0].pk, changes[1].pk]
    assert ResizeChange.objects.get(pk=changes[2].pk).status == S.PROPOSED
    withdrawn = ResizeChange.objects.filter(status=S.REJECTED)
    assert set(withdrawn.values_list("snooze", flat=True)) == {""}
    assert AuditEvent.objects.filter(action="change.withdraw").count() == 2


def test_bulk_reject_refuses_an_unknown_snooze_and_a_reader(
    write_client: Client, read_client: Client, shop: Workload
) -> None:
    _changes(shop, 1)
    url = f"/api/v1/workloads/{shop.pk}/changes/reject"

    bad = write_client.post(
        url, json.dumps({"snooze": "forever"}), content_type="application/json"
    )

    assert bad.status_code == 400
    assert "snooze" in bad.json()["error"]["fields"]
    assert read_client.post(url).status_code == 403
    assert ResizeChange.objects.get().status == S.PROPOSED

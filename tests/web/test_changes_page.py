"""The Changes page: one row per workload (of a status and method) that expands to its
pods, each with its approved / applied / verified times; bulk approval shows what it
will approve and asks to confirm."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import ResizeChange
from tests.factories import make_cluster, make_workload

BEFORE = {"app": {"requests": {"cpu": 500}}}
AFTER = {"app": {"requests": {"cpu": 250}}}
T0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)


@pytest.fixture
def shop(db):
    cluster = make_cluster("prod")
    api = make_workload(cluster, "api", namespace="shop", mode="Recreate", replicas=6)
    db_ = make_workload(cluster, "db", namespace="shop", mode="Recreate", replicas=1)
    for index in range(6):
        ResizeChange.objects.create(
            workload=api,
            pod=f"api-{index}",
            method="evict",
            created_at=T0 + timedelta(minutes=index),
            resources_before=BEFORE,
            resources_after=AFTER,
            reason="CPU request 500m is above the upper bound",
        )
    ResizeChange.objects.create(
        workload=db_,
        pod="db-0",
        method="evict",
        created_at=T0,
        resources_before=BEFORE,
        resources_after=AFTER,
    )
    return api, db_


def groups_of(body: str) -> list[str]:
    return re.findall(r'<tr class="change-group"[^>]*id="([^"]+)"', body)


def test_a_workloads_replicas_are_one_row_that_expands_to_its_pods(
    operator_client, shop
):
    api, db_ = shop
    body = operator_client.get("/changes/").content.decode()

    assert groups_of(body) == [
        f"change-group-{api.pk}-proposed-evict",
        f"change-group-{db_.pk}-proposed-evict",
    ]
    assert 'data-testid="change-group-count">6 pods<' in body
    assert 'data-testid="change-group-count">1 pod<' in body
    # Expanded, each pod keeps its own row with its own Approve and Reject.
    for index in range(6):
        change = ResizeChange.objects.get(pod=f"api-{index}")
        assert f'id="change-{change.pk}"' in body
    assert body.count('<button type="submit">Approve</button>') == 7
    assert "change-group-differs" not in body  # the same resize for every pod


def test_a_group_says_when_its_pods_get_different_resizes(operator_client, shop):
    odd = ResizeChange.objects.get(pod="api-3")
    odd.resources_after = {"app": {"requests": {"cpu": 300}}}
    odd.save()
    body = operator_client.get("/changes/").content.decode()
    assert 'data-testid="change-group-differs"' in body


def test_approved_applied_and_verified_times_are_each_named(operator_client, shop):
    change = ResizeChange.objects.get(pod="db-0")
    change.status = "applied"
    change.decided_at = T0 + timedelta(hours=1)
    change.applied_at = T0 + timedelta(hours=2)
    change.verified_at = T0 + timedelta(hours=3)
    change.save()

    body = operator_client.get("/changes/?status=applied").content.decode()

    row = body[body.index(f'id="change-{change.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "approved Nov 20, 09:00" in row
    assert "applied Nov 20, 10:00" in row
    assert "verified Nov 20, 11:00" in row
    group = body[body.index('data-testid="change-group-times"') :]
    group = group[: group.index("</td>")]
    assert "approved Nov 20, 09:00" in group
    assert "applied Nov 20, 10:00" in group and "verified Nov 20, 11:00" in group


def test_a_rejection_is_not_called_an_approval(operator_client, shop):
    change = ResizeChange.objects.get(pod="db-0")
    change.status = "rejected"
    change.decided_at = T0 + timedelta(hours=1)
    change.save()
    body = operator_client.get("/changes/?status=rejected").content.decode()
    row = body[body.index(f'id="change-{change.pk}"') :]
    assert "rejected Nov 20, 09:00" in row[: row.index("</tr>")]
    assert "approved Nov 20, 09:00" not in body


def test_groups_page_by_workload_not_by_pod(operator_client, shop, monkeypatch):
    from recommender.web import changes

    monkeypatch.setattr(changes, "CHANGES_PAGE_SIZE", 1)
    api, db_ = shop
    first = operator_client.get("/changes/").content.decode()
    second = operator_client.get("/changes/?page=2").content.decode()
    assert groups_of(first) == [f"change-group-{api.pk}-proposed-evict"]
    assert groups_of(second) == [f"change-group-{db_.pk}-proposed-evict"]
    assert "Page 1 of 2" in first


def test_approving_a_namespace_shows_what_it_approves_and_asks_first(
    operator_client, shop
):
    _, db_ = shop
    first = operator_client.post(
        "/changes/approve", {"cluster": "prod", "namespace": "shop"}
    )

    assert first.status_code == 200
    body = first.content.decode()
    assert 'data-testid="bulk-confirm"' in body
    assert "Approve 7 proposed changes of namespace shop in cluster prod?" in body
    assert "6: api-0, api-1, api-2, api-3, api-4, api-5" in body
    assert "1: db-0" in body
    assert not ResizeChange.objects.exclude(status="proposed").exists()

    # A change proposed after the page was drawn is not approved with the others.
    late = ResizeChange.objects.create(
        workload=db_, pod="db-1", method="evict", resources_after=AFTER
    )
    shown = re.findall(r'name="change" value="(\d+)"', body)
    assert len(shown) == 7
    done = operator_client.post(
        "/changes/approve",
        {"cluster": "prod", "namespace": "shop", "confirm": "yes", "change": shown},
        follow=True,
    )

    assert "Approved 7 change(s)." in done.content.decode()
    assert ResizeChange.objects.filter(status="approved").count() == 7
    late.refresh_from_db()
    assert late.status == "proposed"


def test_approve_all_of_a_workload_asks_first_too(operator_client, shop):
    api, _ = shop
    answer = operator_client.post("/changes/approve", {"workload": str(api.pk)})
    body = answer.content.decode()
    assert "Approve 6 proposed changes?" in body
    assert not ResizeChange.objects.filter(status="approved").exists()
    shown = re.findall(r'name="change" value="(\d+)"', body)
    done = operator_client.post(
        "/changes/approve", {"workload": str(api.pk), "confirm": "yes", "change": shown}
    )
    assert done.status_code == 302 and done["Location"] == f"/workloads/{api.pk}/"
    assert ResizeChange.objects.filter(status="approved").count() == 6


def test_nothing_proposed_says_so(operator_client, shop):
    ResizeChange.objects.update(status="rejected")
    answer = operator_client.post(
        "/changes/approve", {"cluster": "prod", "namespace": "shop"}
    )
    assert 'data-testid="bulk-confirm-empty"' in answer.content.decode()

"""Rejections stick: a rejected resize is not proposed again for the same containers
while its snooze lasts, unless the recommendation leaves the rejected change's band by
the updater's own threshold; the API's change says who decided, why, and the snooze."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import ApiToken, Cluster, Container, ResizeChange, Workload
from recommender.roles import Role
from recommender.services.access.tokens import create_token
from recommender.services.actuation.cycle import run_cycle
from recommender.services.admission.snapshot import forget_holders
from recommender.services.policy.changes import update_policy
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_cluster, make_recommendation, make_user, make_workload
from tests.k8s_fake.actuation import deployment, fake_cluster

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
MI = 2**20
S = ResizeChange.Status


def _client(name: str, owner=None) -> Client:
    _, key = create_token(
        name=name, scope=ApiToken.Scope.WRITE, created_by=owner, now=timezone.now()
    )
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def _reject_all(client: Client, workload: Workload, **body) -> list[dict]:
    answers = []
    for change in ResizeChange.objects.filter(workload=workload, status=S.PROPOSED):
        response = client.post(
            f"/api/v1/changes/{change.pk}/reject",
            {"reason": "not during the sale", **body},
            content_type="application/json",
        )
        assert response.status_code == 200, response.content
        answers.append(response.json())
    return answers


@pytest.fixture
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    forget_holders()
    yield
    forget_holders()


def test_on_the_embedded_default_rejected_changes_are_not_proposed_again(
    small_fleet,
):
    cluster = Cluster.objects.create(
        name="sim-a", kind=Cluster.Kind.SIMULATED, actuation_allowed=True
    )
    # Two refreshes: the first one's memory targets move once more at the second
    # (first contact), by more than the threshold; from then on they are steady.
    refresh_cluster(cluster_id=cluster.pk, now=NOW - timedelta(minutes=1))
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    workload = None
    for candidate in Workload.objects.filter(
        cluster=cluster, kind="Deployment", replicas__gte=2
    ).order_by("name"):
        update_policy(
            workload_id=candidate.pk,
            changes={"mode": "Recreate"},
            actor=None,
            now=NOW,
        )
        if run_cycle(cluster, now=NOW, holder="t").proposed:
            workload = candidate
            break
        update_policy(
            workload_id=candidate.pk, changes={"mode": "Off"}, actor=None, now=NOW
        )
    assert workload is not None, "no simulated workload needs a change"
    rejected = _reject_all(_client("ci"), workload)
    assert rejected and all(r["status"] == "rejected" for r in rejected)
    # The embedded scheduler's loop: a refresh, then an updater cycle, every minute.
    for minute in range(1, 11):
        now = NOW + timedelta(minutes=minute)
        refresh_cluster(cluster_id=cluster.pk, now=now)
        report = run_cycle(cluster, now=now, holder="t")
        assert report.held >= 1
    assert not ResizeChange.objects.filter(
        workload=workload, status__in=ResizeChange.OPEN_STATUSES
    ).exists()


@pytest.fixture
def fake_world(tmp_path):
    fake = fake_cluster(deployment("api"), tmp_path)
    cluster = make_cluster("fake", kind="kubernetes", context="fake")
    workload = make_workload(
        cluster,
        "api",
        namespace="shop",
        mode="Recreate",
        containers={"app": {"request_cpu_millicores": 500}},
    )
    container = Container.objects.get(workload=workload)
    make_recommendation(container, cpu_millicores=250, memory_bytes=300 * MI)

    def cycle(now):
        cluster.refresh_from_db()
        return run_cycle(
            cluster,
            now=now,
            snapshot=fake.adapter.discover(),
            writer=fake.writer,
            holder="t",
        )

    yield fake, workload, container, cycle
    fake.close()


def test_the_api_change_says_who_rejected_why_and_the_snooze(fake_world):
    _, workload, _, cycle = fake_world
    cycle(NOW)
    owner = make_user("olga", Role.OPERATOR)
    by_owned_token = _reject_all(_client("ci-owned", owner), workload)[0]
    assert by_owned_token["decided_by"] == "olga"
    assert by_owned_token["rejection_reason"] == "not during the sale"
    assert by_owned_token["snooze"] == "until_changed"
    assert by_owned_token["snoozed_until"] is None
    ResizeChange.objects.all().delete()
    cycle(NOW + timedelta(minutes=1))
    by_token = _reject_all(_client("ci-bot"), workload, snooze="7d")[0]
    # A token without an owner is named (decided_by was null before).
    assert by_token["decided_by"] == "token:ci-bot"
    assert by_token["snooze"] == "7d" and by_token["snoozed_until"] is not None
    listed = _client("reader").get(f"/api/v1/changes/?workload={workload.pk}").json()
    assert {c["rejection_reason"] for c in listed["results"]} == {"not during the sale"}
    bad = _client("ci-bad").post(
        f"/api/v1/changes/{by_token['id']}/reject",
        {"snooze": "forever"},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "snooze" in bad.json()["error"]["fields"]


def test_a_rejection_holds_until_the_recommendation_leaves_its_band(fake_world):
    fake, workload, container, cycle = fake_world
    cycle(NOW)
    _reject_all(_client("ci"), workload)
    # Within the band (250m → 260m: a 4 % move, under the 0.1 threshold): held.
    make_recommendation(container, cpu_millicores=260, memory_bytes=300 * MI)
    report = cycle(NOW + timedelta(minutes=1))
    assert report.proposed == 0 and report.held == 3
    # Out of the band (250m → 150m): proposed again.
    make_recommendation(container, cpu_millicores=150, memory_bytes=300 * MI)
    report = cycle(NOW + timedelta(minutes=2))
    assert report.proposed == 3 and report.held == 0
    assert fake.writes() == []


def test_a_one_day_snooze_ends_after_a_day(fake_world):
    _, workload, _, cycle = fake_world
    cycle(NOW)
    # Rejected "now" by the API: the snooze runs from the real clock.
    start = timezone.now()
    _reject_all(_client("ci"), workload, snooze="1d")
    assert cycle(start + timedelta(hours=23)).proposed == 0
    assert cycle(start + timedelta(hours=25)).proposed == 3


def test_a_withdrawal_holds_nothing_back(fake_world):
    _, workload, _, cycle = fake_world
    update_policy(
        workload_id=workload.pk, changes={"approval": "automatic"}, actor=None, now=NOW
    )
    cycle(NOW)  # approved automatically; the pods wait for their turn
    update_policy(workload_id=workload.pk, changes={"mode": "Off"}, actor=None, now=NOW)
    assert ResizeChange.objects.filter(status=S.REJECTED, snooze="").exists()
    update_policy(
        workload_id=workload.pk, changes={"mode": "Recreate"}, actor=None, now=NOW
    )
    assert cycle(NOW + timedelta(minutes=1)).proposed >= 1

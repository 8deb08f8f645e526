"""Maintenance windows: approved changes wait outside the policy's and the cluster's
windows, the Changes page says from when they apply, and a quick OOM bypasses a
window only when the policy says so (against the fake API server)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from recommender.errors import InvalidInput
from recommender.models import Cluster, Policy, ResizeChange
from recommender.services.policy import windows
from recommender.services.policy.changes import update_policy
from tests.k8s_fake.actuation import FakeCluster
from tests.services.test_updater_fake_api import NOW, cycle, setup_world

# NOW is Tuesday 2026-11-24 06:00 UTC.
NIGHTS = [{"days": ["tue", "wed"], "start": "22:00", "end": "02:00"}]
BERLIN_MORNING = [
    {"days": ["tue"], "start": "07:30", "end": "08:00", "time_zone": "Europe/Berlin"}
]


def test_a_window_contains_its_hours_past_midnight_and_in_its_time_zone():
    assert windows.window_state(NIGHTS, [], now=NOW).opens_at == datetime(
        2026, 11, 24, 22, 0, tzinfo=UTC
    )
    assert windows.window_state(NIGHTS, [], now=NOW.replace(hour=23)).is_open
    # Wednesday 01:00 is inside Tuesday's window; Thursday 01:00 inside Wednesday's.
    assert windows.window_state(NIGHTS, [], now=NOW + timedelta(hours=19)).is_open
    assert windows.window_state(NIGHTS, [], now=NOW + timedelta(days=2, hours=-5))
    # 07:30 in Berlin is 06:30 UTC in November.
    state = windows.window_state([], BERLIN_MORNING, now=NOW)
    assert not state.is_open
    assert state.opens_at == datetime(2026, 11, 24, 6, 30, tzinfo=UTC)
    assert windows.window_state([], BERLIN_MORNING, now=NOW.replace(minute=45)).is_open
    # Both must allow: no moment within a week where these two overlap.
    assert windows.window_state(NIGHTS, BERLIN_MORNING, now=NOW).opens_at is None
    assert windows.window_state([], [], now=NOW).is_open


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([{"start": "25:00", "end": "01:00"}], "start"),
        ([{"days": ["someday"], "start": "01:00", "end": "02:00"}], "days"),
        ([{"start": "01:00", "end": "02:00", "time_zone": "Mars/Base"}], "time_zone"),
        ([{"start": "01:00", "end": "02:00", "when": "now"}], "unknown"),
    ],
)
def test_a_bad_window_is_refused_naming_the_field(raw, message):
    with pytest.raises(InvalidInput) as caught:
        windows.parse_windows(raw)
    assert message in caught.value.message
    assert "maintenance_windows" in caught.value.fields


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def _quick_oom(fake: FakeCluster, name: str) -> None:
    """The pod's container was OOM-killed 2 minutes after starting."""
    pod = next(p for p in fake.server.objects("Pod") if p["metadata"]["name"] == name)
    status = pod["status"]["containerStatuses"][0]
    status["restartCount"] = 1
    status["lastState"] = {
        "terminated": {
            "exitCode": 137,
            "reason": "OOMKilled",
            "startedAt": "2026-11-24T05:50:00Z",
            "finishedAt": "2026-11-24T05:52:00Z",
        }
    }


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["policy", "cluster"])
def test_approved_changes_wait_outside_the_window(tmp_path, cleanup, where):
    fake, cluster, workload = setup_world(
        tmp_path, mode="Recreate", approval="automatic"
    )
    cleanup.append(fake)
    if where == "policy":
        update_policy(
            workload_id=workload.pk,
            changes={"maintenance_windows": NIGHTS},
            actor=None,
            now=NOW,
        )
    else:
        Cluster.objects.filter(pk=cluster.pk).update(maintenance_windows=NIGHTS)
    report = cycle(fake, cluster)
    assert report.auto_approved == 3 and report.outside_window == 3
    assert fake.writes() == []
    report = cycle(fake, cluster, NOW.replace(hour=22, minute=1))
    assert report.evicted == 1


@pytest.mark.django_db
@pytest.mark.parametrize("bypass", [False, True])
def test_a_quick_oom_bypasses_the_window_only_when_the_policy_says_so(
    tmp_path, cleanup, bypass
):
    fake, cluster, workload = setup_world(
        tmp_path, mode="Recreate", approval="automatic"
    )
    cleanup.append(fake)
    _quick_oom(fake, "api-6b9c8d7f5-p1")
    Policy.objects.filter(workload=workload).update(
        maintenance_windows=NIGHTS, window_bypasses_quick_oom=bypass
    )
    report = cycle(fake, cluster)
    if bypass:
        assert report.evicted == 1 and report.outside_window == 2
        assert fake.server.evicted == [("shop", "api-6b9c8d7f5-p1")]
    else:
        assert report.evicted == 0 and report.outside_window == 3
        assert fake.writes() == []


@pytest.mark.django_db
def test_the_changes_page_says_when_a_change_applies(tmp_path, cleanup, admin_client):
    fake, cluster, workload = setup_world(
        tmp_path, mode="Recreate", approval="automatic"
    )
    cleanup.append(fake)
    # The page reads the real clock: a window shut both then and at NOW (06:00).
    hour = (timezone.now().hour + 12) % 24
    hour = hour + 1 if hour == NOW.hour else hour
    Policy.objects.filter(workload=workload).update(
        maintenance_windows=[
            {"start": f"{hour:02}:00", "end": f"{(hour + 1) % 24:02}:00"}
        ]
    )
    cycle(fake, cluster)
    assert ResizeChange.objects.filter(status="approved").count() == 3
    body = admin_client.get("/changes/").content.decode()
    assert "waits for the maintenance window: applies from" in body


@pytest.mark.django_db
def test_the_api_refuses_a_bad_window_naming_the_field(tmp_path, cleanup):
    fake, _, workload = setup_world(tmp_path, mode="Recreate")
    cleanup.append(fake)
    with pytest.raises(InvalidInput) as caught:
        update_policy(
            workload_id=workload.pk,
            changes={"maintenance_windows": [{"start": "x", "end": "02:00"}]},
            actor=None,
            now=NOW,
        )
    assert "maintenance_windows" in caught.value.fields


@pytest.mark.django_db
def test_the_api_sets_and_shows_a_policys_windows(tmp_path, cleanup):
    from recommender.models import ApiToken
    from recommender.roles import Role
    from tests.api.conftest import _token, token_client
    from tests.factories import make_user

    fake, _, workload = setup_world(tmp_path, mode="Recreate")
    cleanup.append(fake)
    owner = make_user("olga", Role.OPERATOR)
    client = token_client(_token("ci", ApiToken.Scope.WRITE, owner))
    url = f"/api/v1/workloads/{workload.pk}/policy"
    answer = client.patch(
        url,
        {"maintenance_windows": BERLIN_MORNING, "window_bypasses_quick_oom": True},
        content_type="application/json",
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["maintenance_windows"] == BERLIN_MORNING
    assert answer.json()["window_bypasses_quick_oom"] is True
    bad = client.patch(
        url,
        {"maintenance_windows": [{"start": "01:00", "end": "02:00", "time_zone": "x"}]},
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert "maintenance_windows" in bad.json()["error"]["fields"]

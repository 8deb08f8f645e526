"""Self-healing after an upsize, against the fake API server: an evicted pod's
replacement that cannot be scheduled (Pending, bound to no node, as the recorded
k8s-wire eviction/15 pod is) past ``VPAWEB_UPDATER_UNSCHEDULABLE_TIMEOUT_S`` is
reverted once: the webhook admits the workload's new pods with the previous requests
while the recommendation stays in the change's band, the stuck replacement is evicted
once (a Pending pod is evicted without a PDB check, eviction/16), the change fails
saying so, and no pod is evicted twice for the change."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from recommender.models import Container, ResizeChange, WebhookAck
from recommender.roles import Role
from recommender.services.actuation import workflow
from recommender.services.admission.decision import PATCHED, decide_admission
from recommender.services.admission.snapshot import load_snapshot
from tests.factories import make_recommendation, make_user
from tests.k8s_fake.actuation import FakeCluster, pod
from tests.services.test_updater_fake_api import MI, NOW, cycle, setup_world
from tests.web.conftest import client_for

pytestmark = pytest.mark.django_db
S = ResizeChange.Status
RECORDED_PENDING = json.loads(
    (
        Path(__file__).resolve().parents[1]
        / "fixtures"
        / "k8s-wire"
        / "eviction"
        / "15-pending-pod-before.json"
    ).read_text()
)["response"]["body"]


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def quantities(values: dict) -> dict:
    return {"cpu": f"{values['cpu']}m", "memory": str(values["memory"])}


def stuck_replacement(name: str, change: ResizeChange, created: str) -> dict:
    """The controller's replacement, admitted with the change's requests, as the
    recorded Pending pod is: status ``phase`` and ``qosClass`` only, no node."""
    after = change.resources_after["app"]
    resources = {
        "requests": quantities(after["requests"]),
        "limits": quantities(after["limits"]),
    }
    obj = pod(name, "shop", "api", "api-6b9c8d7f5", resources, phase="Pending")
    obj["status"] = dict(RECORDED_PENDING["status"])
    del obj["spec"]["nodeName"]
    obj["metadata"]["creationTimestamp"] = created
    return obj


def evictions(fake: FakeCluster) -> list[str]:
    """The pods an eviction was sent for, in order (a Pending pod's is not in
    ``server.evicted``: the fake deletes it at once, as eviction/16-17 recorded)."""
    return [p.split("/")[-2] for _, p in fake.writes() if p.endswith("/eviction")]


def new_pod_requests(cluster) -> dict:
    """What the webhook gives a new pod of the workload now."""
    snapshot = load_snapshot(cluster=cluster)
    fresh = pod("api-6b9c8d7f5-next", "shop", "api", "api-6b9c8d7f5", {})
    del fresh["status"]
    decision = decide_admission(
        request={
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE",
            "namespace": "shop",
            "object": fresh,
        },
        snapshot=snapshot,
        now=snapshot.loaded_at,
    )
    assert decision.outcome == PATCHED, decision.reason
    return decision.containers[0].set_requests.to_dict()


def upsized_world(tmp_path, cleanup, settings):
    settings.UPDATER_UNSCHEDULABLE_TIMEOUT_S = 300
    fake, cluster, workload = setup_world(
        tmp_path, mode="Recreate", approval="automatic"
    )
    cleanup.append(fake)
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=2000,
        memory_bytes=900 * MI,
    )
    cycle(fake, cluster, NOW)
    evicted = fake.server.evicted[0][1]
    change = ResizeChange.objects.get(pod=evicted)
    fake.server.remove("Pod", "shop", evicted)
    fake.server.add(
        stuck_replacement("api-6b9c8d7f5-new", change, "2026-11-24T06:00:30Z")
    )
    return fake, cluster, workload, change


def test_an_unschedulable_upsize_is_reverted_once(tmp_path, cleanup, settings):
    fake, cluster, workload, change = upsized_world(tmp_path, cleanup, settings)
    assert new_pod_requests(cluster) == {"cpu": 2000, "memory": 900 * MI}

    report = cycle(fake, cluster, NOW + timedelta(minutes=2))
    change.refresh_from_db()
    assert change.status == S.APPLYING and change.reverted_at is None

    report = cycle(fake, cluster, NOW + timedelta(minutes=10))
    change.refresh_from_db()
    assert report.reverted == 1
    assert change.status == S.FAILED
    assert change.reverted_at is not None and change.revert_evicted_at is not None
    assert change.revert_pod == "api-6b9c8d7f5-new"
    assert change.error.startswith(workflow.UNSCHEDULABLE_ERROR)
    assert "not bound to a node" in change.error
    assert "reverted to the previous requests (app cpu 500m memory 512 MiB)" in (
        change.error
    )
    assert "api-6b9c8d7f5-new evicted to be recreated with them" in change.error
    assert evictions(fake) == [change.pod, "api-6b9c8d7f5-new"]
    # Said on the Changes page and in the API.
    client = client_for(make_user("vera", Role.VIEWER))
    assert (
        "reverted to the previous requests" in client.get("/changes/").content.decode()
    )
    shown = client.get(f"/api/v1/changes/{change.pk}/").json()
    assert shown["status"] == "failed" and shown["revert_pod"] == change.revert_pod
    assert "reverted to the previous requests" in shown["error"]
    # New pods get the previous requests while the recommendation stays.
    assert new_pod_requests(cluster) == {"cpu": 500, "memory": 512 * MI}

    # The revert holds: nothing more is evicted for it, whatever the cycles.
    for minute in range(11, 21):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
        assert report.reverted == 0
    counts = Counter(evictions(fake))
    assert counts == {change.pod: 1, "api-6b9c8d7f5-new": 1}

    # A recommendation out of the reverted change's band: new pods get it.
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=1000,
        memory_bytes=700 * MI,
    )
    assert new_pod_requests(cluster) == {"cpu": 1000, "memory": 700 * MI}


def test_the_stuck_replacement_waits_for_the_webhook_to_load_the_revert(
    tmp_path, cleanup, settings
):
    fake, cluster, _, change = upsized_world(tmp_path, cleanup, settings)
    # A live webhook process that has loaded nothing since.
    ack = WebhookAck.objects.create(
        cluster=cluster, process="host-1/42", journal_after=0, seen_at=timezone.now()
    )
    cycle(fake, cluster, NOW + timedelta(minutes=10))
    change.refresh_from_db()
    assert change.status == S.APPLYING and change.reverted_at is not None
    assert evictions(fake) == [change.pod]
    # Loaded: the next cycle evicts it, once.
    WebhookAck.objects.filter(pk=ack.pk).update(
        journal_after=10**9, seen_at=timezone.now()
    )
    cycle(fake, cluster, NOW + timedelta(minutes=11))
    cycle(fake, cluster, NOW + timedelta(minutes=12))
    change.refresh_from_db()
    assert change.status == S.FAILED
    assert evictions(fake) == [change.pod, "api-6b9c8d7f5-new"]


def test_the_kill_switch_stops_the_revert_eviction_and_the_change_fails_in_time(
    tmp_path, cleanup, settings
):
    fake, cluster, _, change = upsized_world(tmp_path, cleanup, settings)
    settings.UPDATER_KILL_SWITCH = True
    cycle(fake, cluster, NOW + timedelta(minutes=10))
    change.refresh_from_db()
    # Decided (the webhook already admits the previous requests), not written.
    assert change.status == S.APPLYING and change.reverted_at is not None
    assert change.revert_evicted_at is None
    assert "is evicted once the webhook has loaded them" in change.error
    report = cycle(fake, cluster, NOW + timedelta(minutes=10, hours=1, seconds=1))
    change.refresh_from_db()
    assert change.status == S.FAILED and report.failed == 1
    assert change.error.endswith("(not evicted in time: writes stopped)")
    assert evictions(fake) == [change.pod]

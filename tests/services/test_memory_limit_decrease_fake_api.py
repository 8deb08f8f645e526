"""Memory-limit decreases against the fake API server: the updater reads the server's
version (``GET /version``, the recorded answer of k8s-wire version.json) and lowers a
memory limit in place only on 1.35+. On an older server it never sends such a resize:
InPlaceOrRecreate evicts instead, InPlace leaves the change waiting with the reason.
No refusal of an older server is recorded, so what is checked is that none is asked
for."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from recommender.models import Container, ResizeChange
from recommender.services.actuation import decision
from tests.factories import make_recommendation
from tests.k8s_fake.actuation import FakeCluster
from tests.services.test_hpa_coordination_fake_api import world as hpa_world
from tests.services.test_updater_fake_api import MI, NOW, cycle, setup_world

pytestmark = pytest.mark.django_db
S = ResizeChange.Status
OLDER = "v1.34.3"


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def resize_bodies(fake: FakeCluster) -> list[dict]:
    return [
        json.loads(r.body)
        for r in fake.server.write_verbs()
        if r.path.endswith("/resize")
    ]


def test_the_version_rule():
    assert decision.memory_limit_decrease_refusal("v1.36.2") == ""
    assert decision.memory_limit_decrease_refusal("v1.35.0") == ""
    assert "does not lower a memory limit" in (
        decision.memory_limit_decrease_refusal("v1.34.3")
    )
    assert decision.memory_limit_decrease_refusal("")
    before = {"app": {"limits": {"memory": 1024 * MI}}}
    assert decision.lowers_memory_limit(
        before, {"app": {"limits": {"memory": 600 * MI}}}
    ) == ["app"]
    assert not decision.lowers_memory_limit(
        before, {"app": {"limits": {"memory": 2048 * MI}}}
    )


def test_a_recorded_136_server_gets_the_lower_memory_limit_in_place(tmp_path, cleanup):
    fake, cluster, _ = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    assert fake.server.git_version == "v1.36.2"  # the recorded answer
    cycle(fake, cluster, NOW)
    bodies = resize_bodies(fake)
    assert bodies and fake.server.evicted == []
    limits = bodies[0]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["memory"] != "1Gi"  # lowered with its request (300Mi of 512Mi)


def test_an_older_server_gets_an_eviction_not_a_lower_memory_limit(tmp_path, cleanup):
    fake, cluster, _ = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    fake.server.git_version = OLDER
    cycle(fake, cluster, NOW)
    assert resize_bodies(fake) == []
    assert len(fake.server.evicted) == 1
    change = ResizeChange.objects.get(pod=fake.server.evicted[0][1])
    assert change.method == ResizeChange.Method.EVICTION
    assert f"Kubernetes {OLDER} does not lower a memory limit in place" in (
        change.error
    )


def test_an_older_server_under_in_place_gets_nothing_and_a_reason(tmp_path, cleanup):
    fake, cluster, _ = setup_world(tmp_path, mode="InPlace", approval="automatic")
    cleanup.append(fake)
    fake.server.git_version = OLDER
    for minute in range(3):
        cycle(fake, cluster, NOW.replace(minute=minute))
    assert fake.writes() == []
    waiting = ResizeChange.objects.filter(status=S.APPROVED)
    assert waiting.exists()
    assert all("InPlace never evicts" in c.error for c in waiting)
    assert all("memory limit" in c.error for c in waiting)


def test_an_older_server_still_gets_a_memory_limit_raised_in_place(tmp_path, cleanup):
    fake, cluster, workload = setup_world(
        tmp_path, mode="InPlaceOrRecreate", approval="automatic"
    )
    cleanup.append(fake)
    fake.server.git_version = OLDER
    make_recommendation(
        Container.objects.get(workload=workload),
        cpu_millicores=900,
        memory_bytes=900 * MI,
    )
    cycle(fake, cluster, NOW)
    assert resize_bodies(fake) and fake.server.evicted == []


def test_an_older_server_gets_no_coordinated_change_lowering_a_memory_limit(
    tmp_path, cleanup
):
    fake, cluster, _ = hpa_world(tmp_path, cleanup)
    fake.server.git_version = OLDER
    cycle(fake, cluster, NOW)
    assert fake.writes() == []  # neither the HPA nor a pod
    waiting = ResizeChange.objects.filter(status=S.APPROVED)
    assert waiting.exists()
    assert all("does not lower a memory limit" in c.error for c in waiting)
    assert all("never evicted" in c.error for c in waiting)

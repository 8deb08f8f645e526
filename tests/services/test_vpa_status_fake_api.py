"""The drop-in path against the fake API server: a VerticalPodAutoscaler whose
``spec.recommenders`` names vpaweb gets vpaweb's recommendation in its status, in the
exact shape of the recorded status patch (tests/fixtures/k8s-wire/admission/f4); an
object that does not name vpaweb never receives a write; the switches stop these writes
too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recommender.models import Container, Policy, Recommendation
from recommender.services.actuation import control
from recommender.services.actuation.cycle import run_cycle
from recommender.services.actuation.vpa_status import build_status, is_unchanged
from tests.factories import make_cluster, make_workload
from tests.k8s_fake import rbac
from tests.k8s_fake.actuation import FakeCluster, deployment, fake_cluster, vpa_object

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)
MI = 2**20
WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire"
RECORDED = WIRE / "admission" / "f4-vpa-status-patch.http.json"
STATUS_PATH = (
    "/apis/autoscaling.k8s.io/v1/namespaces/shop/verticalpodautoscalers/{}/status"
)


def recommend(workload, container="app", *, cpu=250, memory=256 * MI, lower=None):
    """The recorded patch's numbers: target 250m/256Mi, 100m/128Mi to 1/1Gi."""
    row = Container.objects.get(workload=workload, name=container)
    rec = Recommendation.objects.create(
        container=row,
        created_at=NOW - timedelta(minutes=5),
        target_cpu_millicores=cpu,
        target_memory_bytes=memory,
        lower_cpu_millicores=lower or 100,
        lower_memory_bytes=128 * MI,
        upper_cpu_millicores=1000,
        upper_memory_bytes=1024 * MI,
        uncapped_cpu_millicores=cpu,
        uncapped_memory_bytes=memory,
        # 8 days of history behind it, past VPAWEB_MIN_HISTORY_HOURS (as
        # tests/factories.py make_recommendation).
        explanation={"resources": {"cpu": {"confidence": 8.0}}},
    )
    row.latest_recommendation = rec
    row.save(update_fields=["latest_recommendation"])


def world(tmp_path: Path, vpas: list[dict], *, names=("api",), extra=()):
    objects = [obj for name in names for obj in deployment(name)] + vpas + list(extra)
    fake = fake_cluster(objects, tmp_path)
    cluster = make_cluster("fake", kind="kubernetes", context="fake")
    workloads = {}
    for name in names:
        workload = make_workload(
            cluster, name, namespace="shop", mode="Recreate", containers={"app": {}}
        )
        # As the refresh imports it: the policy mirrors the object, vpaweb never acts.
        Policy.objects.filter(workload=workload).update(
            source=Policy.Source.VPA_OBJECT, approval="automatic"
        )
        recommend(workload)
        workloads[name] = workload
    return fake, cluster, workloads


def cycle(fake: FakeCluster, cluster, now=NOW):
    cluster.refresh_from_db()
    return run_cycle(
        cluster,
        now=now,
        snapshot=fake.adapter.discover(),
        writer=fake.writer,
        holder="t",
    )


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def sent_patches(fake: FakeCluster) -> list[tuple[str, str, dict]]:
    return [
        (r.path, r.content_type, json.loads(r.body))
        for r in fake.server.write_verbs()
        if r.path != rbac.ACCESS_REVIEWS
    ]


def test_an_object_naming_vpaweb_gets_the_status_exactly_as_recorded(tmp_path, cleanup):
    recorded = json.loads(RECORDED.read_text())["request"]
    fake, cluster, _ = world(
        tmp_path, [vpa_object("api-vpa", "shop", "api", recommenders=("vpaweb",))]
    )
    cleanup.append(fake)
    report = cycle(fake, cluster)
    assert report.vpa_statuses == 1 and report.writes == 1 and report.proposed == 0
    [(path, content_type, body)] = sent_patches(fake)
    assert (path, content_type) == (
        STATUS_PATH.format("api-vpa"),
        recorded["headers"]["Content-Type"],  # application/merge-patch+json
    )
    expected = json.loads(json.dumps(recorded["body"]))
    expected["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-24T06:00:00Z"
    assert body == expected
    stored = fake.server.objects("VerticalPodAutoscaler")[0]["status"]
    assert stored == expected["status"]


def test_the_steady_state_sends_nothing_and_a_new_recommendation_is_written(
    tmp_path, cleanup
):
    fake, cluster, workloads = world(
        tmp_path, [vpa_object("api-vpa", "shop", "api", recommenders=("vpaweb",))]
    )
    cleanup.append(fake)
    cycle(fake, cluster)
    for minute in range(1, 6):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
        assert report.vpa_statuses == 0
    assert len(fake.writes()) == 1
    recommend(workloads["api"], cpu=300, memory=200 * MI)
    later = NOW + timedelta(minutes=10)
    assert cycle(fake, cluster, later).vpa_statuses == 1
    [_, (_, _, body)] = sent_patches(fake)
    [entry] = body["status"]["recommendation"]["containerRecommendations"]
    assert entry["target"] == {"cpu": "300m", "memory": "200Mi"}
    # Still provided: the condition did not flip, its transition time stays.
    assert body["status"]["conditions"] == [
        {
            "type": "RecommendationProvided",
            "status": "True",
            "lastTransitionTime": "2026-11-24T06:00:00Z",
        }
    ]


def test_objects_not_naming_vpaweb_get_zero_writes_over_many_cycles(tmp_path, cleanup):
    vpas = [
        vpa_object("api-vpa", "shop", "api"),  # upstream's default recommender
        vpa_object("web-vpa", "shop", "web", recommenders=("other-recommender",)),
    ]
    fake, cluster, _ = world(tmp_path, vpas, names=("api", "web"))
    cleanup.append(fake)
    for minute in range(20):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
        assert report.vpa_statuses == 0 and report.proposed == 0
    assert fake.writes() == []
    assert all("status" not in v for v in fake.server.objects("VerticalPodAutoscaler"))


def test_only_the_objects_naming_vpaweb_are_written(tmp_path, cleanup):
    vpas = [
        vpa_object("api-vpa", "shop", "api", recommenders=("vpaweb",)),
        vpa_object("web-vpa", "shop", "web"),
        # Names vpaweb, but its target is unknown to vpaweb: nothing to write.
        vpa_object("gone-vpa", "shop", "gone", recommenders=("vpaweb",)),
    ]
    fake, cluster, _ = world(tmp_path, vpas, names=("api", "web"))
    cleanup.append(fake)
    for minute in range(3):
        cycle(fake, cluster, NOW + timedelta(minutes=minute))
    assert fake.writes() == [("PATCH", STATUS_PATH.format("api-vpa"))]


def test_the_recommender_name_is_configurable(tmp_path, cleanup, settings):
    settings.RECOMMENDER_NAME = "team-recommender"
    vpas = [
        vpa_object("api-vpa", "shop", "api", recommenders=("vpaweb",)),
        vpa_object("web-vpa", "shop", "web", recommenders=("team-recommender",)),
    ]
    fake, cluster, _ = world(tmp_path, vpas, names=("api", "web"))
    cleanup.append(fake)
    cycle(fake, cluster)
    assert fake.writes() == [("PATCH", STATUS_PATH.format("web-vpa"))]


@pytest.mark.parametrize("switch", ["kill_switch_setting", "admin", "pause", "dry_run"])
def test_every_switch_stops_the_status_writes(tmp_path, cleanup, settings, switch):
    fake, cluster, _ = world(
        tmp_path, [vpa_object("api-vpa", "shop", "api", recommenders=("vpaweb",))]
    )
    cleanup.append(fake)
    if switch == "kill_switch_setting":
        settings.UPDATER_KILL_SWITCH = True
    elif switch == "admin":
        control.set_kill_switch(stopped=True, actor=None, now=NOW, reason="incident")
    elif switch == "pause":
        control.set_cluster_paused(cluster=cluster, paused=True, actor=None, now=NOW)
    else:
        settings.UPDATER_DRY_RUN = True
    for minute in range(3):
        report = cycle(fake, cluster, NOW + timedelta(minutes=minute))
        assert report.writes_blocked and report.vpa_statuses == 0
    assert fake.writes() == []


def test_off_containers_get_none_and_the_rest_are_sorted_by_name(tmp_path, cleanup):
    fake = fake_cluster(
        [
            *deployment("api"),
            vpa_object("api-vpa", "shop", "api", recommenders=("vpaweb",)),
        ],
        tmp_path,
    )
    cleanup.append(fake)
    cluster = make_cluster("fake", kind="kubernetes", context="fake")
    workload = make_workload(
        cluster,
        "api",
        namespace="shop",
        containers={"zeta": {}, "app": {}, "log-shipper": {}},
    )
    Policy.objects.filter(workload=workload).update(
        source=Policy.Source.VPA_OBJECT,
        container_policies=[{"containerName": "log-shipper", "mode": "Off"}],
    )
    for name in ("zeta", "app", "log-shipper"):
        recommend(workload, name)
    cycle(fake, cluster)
    [(_, _, body)] = sent_patches(fake)
    entries = body["status"]["recommendation"]["containerRecommendations"]
    assert [e["containerName"] for e in entries] == ["app", "zeta"]


# --- the status itself (upstream's UpdateConditions / AsStatus) ---------------------
ENTRY = {
    "containerName": "app",
    "target": {"cpu": "250m", "memory": "256Mi"},
    "lowerBound": {"cpu": "100m", "memory": "128Mi"},
    "upperBound": {"cpu": "1", "memory": "1Gi"},
    "uncappedTarget": {"cpu": "250m", "memory": "256Mi"},
}
EARLIER = "2026-11-20T00:00:00Z"


def test_no_pods_and_no_recommendation_say_so_as_upstream_does():
    status = build_status(current={}, entries=[], pods_matched=False, now=NOW)
    assert status == {
        "conditions": [
            {
                "type": "NoPodsMatched",
                "status": "True",
                "lastTransitionTime": "2026-11-24T06:00:00Z",
                "reason": "NoPodsMatched",
                "message": "No pods match this VPA object",
            },
            {
                "type": "RecommendationProvided",
                "status": "False",
                "lastTransitionTime": "2026-11-24T06:00:00Z",
                "reason": "NoPodsMatched",
                "message": "No pods match this VPA object",
            },
        ],
        "recommendation": None,  # a merge patch removes an old recommendation
    }


def test_a_transition_time_moves_only_when_the_status_flips():
    current = {
        "conditions": [
            {
                "type": "RecommendationProvided",
                "status": "False",
                "lastTransitionTime": EARLIER,
            },
            {"type": "NoPodsMatched", "status": "True", "lastTransitionTime": EARLIER},
            {
                "type": "ConfigUnsupported",
                "status": "True",
                "lastTransitionTime": EARLIER,
            },
            {"type": "LowConfidence", "status": "False", "lastTransitionTime": EARLIER},
        ]
    }
    status = build_status(current=current, entries=[ENTRY], pods_matched=True, now=NOW)
    # NoPodsMatched and ConfigUnsupported are deleted, others kept, sorted by type.
    assert status["conditions"] == [
        {"type": "LowConfidence", "status": "False", "lastTransitionTime": EARLIER},
        {
            "type": "RecommendationProvided",
            "status": "True",
            "lastTransitionTime": "2026-11-24T06:00:00Z",
        },
    ]
    again = build_status(
        current=status, entries=[ENTRY], pods_matched=True, now=NOW + timedelta(hours=1)
    )
    assert again == status and is_unchanged(status, again)


def test_quantities_are_compared_by_value_not_by_spelling():
    written = build_status(current={}, entries=[ENTRY], pods_matched=True, now=NOW)
    respelled = json.loads(json.dumps(written))
    entry = respelled["recommendation"]["containerRecommendations"][0]
    entry["target"] = {"cpu": "0.25", "memory": str(256 * MI)}
    entry["upperBound"] = {"cpu": "1000m", "memory": "1024Mi"}
    assert is_unchanged(respelled, written)
    entry["target"]["cpu"] = "251m"
    assert not is_unchanged(respelled, written)

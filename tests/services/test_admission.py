"""The webhook's decisions on the AdmissionReviews kube-apiserver v1.36 really sent.

Every patch is applied to the recorded object with the ``jsonpatch`` library (RFC 6902,
as the API server applies it) to prove it applies and yields the expected pod.
"""

from __future__ import annotations

import base64
import copy
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from django.utils import timezone

from recommender.engine.capping import LimitRangeItem
from recommender.engine.resources import Resources
from recommender.models import AdmissionCount, Container, NamespaceLimitRange, Policy
from recommender.services.admission import counters
from recommender.services.admission.decision import (
    FAILED_OPEN,
    LEFT_ALONE,
    PATCHED,
    decide_admission,
)
from recommender.services.admission.review import admit_review, parse_review
from recommender.services.admission.snapshot import (
    SnapshotHolder,
    forget_holders,
    load_snapshot,
)
from recommender.services.advice.limits import item_to_dict
from tests.factories import make_cluster, make_recommendation, make_workload

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire" / "admission"
MI = 2**20
UPDATES = "vpaweb.io/updates"

pytestmark = pytest.mark.django_db


def recorded(name: str) -> dict[str, Any]:
    """The AdmissionReview the API server sent (``<name>.admissionreview.json``)."""
    return json.loads((WIRE / f"{name}.admissionreview.json").read_text())["body"]


def owned(review: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    """A recorded bare pod given a controller reference (the rest as recorded)."""
    review = copy.deepcopy(review)
    review["request"]["object"]["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": kind,
            "name": name,
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return review


def workload_with(
    cluster,
    name,
    namespace,
    recs,
    *,
    kind="Deployment",
    mode="Initial",
    policies=None,
    source=Policy.Source.VPAWEB,
):
    """A workload whose containers have the given recommendations (cpu m, mem bytes)."""
    workload = make_workload(
        cluster,
        name,
        namespace=namespace,
        kind=kind,
        mode=mode,
        containers={c: {} for c in recs},
    )
    Policy.objects.filter(workload=workload).update(
        container_policies=policies or [], source=source
    )
    for container_name, (cpu, memory) in recs.items():
        make_recommendation(
            Container.objects.get(workload=workload, name=container_name),
            cpu_millicores=cpu,
            memory_bytes=memory,
        )
    return workload


def limit_range(cluster, namespace, **amounts):
    """The namespace's combined Container item (``max=Resources(...)``, ...)."""
    NamespaceLimitRange.objects.create(
        cluster=cluster,
        namespace=namespace,
        container_item=item_to_dict(LimitRangeItem(type="Container", **amounts)),
    )


def decide(cluster, review):
    """decide_admission on a fresh snapshot of ``cluster``."""
    return decide_admission(
        request=review["request"],
        snapshot=load_snapshot(cluster=cluster),
        now=timezone.now(),
    )


def applied(review, decision):
    """The recorded pod with the decision's patch applied (RFC 6902)."""
    return jsonpatch.apply_patch(review["request"]["object"], list(decision.patch))


def resources(pod, index=0, key="containers"):
    return pod["spec"][key][index]["resources"]


@pytest.fixture
def cluster():
    forget_holders()
    return make_cluster("wire")


def test_replicaset_pod_unknown_to_discovery_is_patched_via_its_deployment(cluster):
    workload_with(
        cluster, "hooked", "wire-hook", {"app": (250, 300 * MI), "side": (20, 32 * MI)}
    )
    review = recorded("a-replicaset-pod")
    decision = decide(cluster, review)
    assert decision.outcome == PATCHED
    assert decision.workload == "Deployment wire-hook/hooked"
    # Upstream shapes: the pod has no annotations and `app` has `resources: {}`.
    assert decision.patch[0] == {
        "op": "add",
        "path": "/metadata/annotations",
        "value": {},
    }
    assert {
        "op": "add",
        "path": "/spec/containers/0/resources/requests",
        "value": {},
    } in decision.patch
    assert {
        "op": "add",
        "path": "/spec/containers/0/resources/requests/cpu",
        "value": "250m",
    } in decision.patch
    assert decision.patch[-2]["path"] == "/metadata/annotations/vpaweb.io~1updates"
    pod = applied(review, decision)
    assert resources(pod, 0) == {"requests": {"cpu": "250m", "memory": "300Mi"}}
    # No limit before and no LimitRange default: still no limit (upstream's
    # getProportionalResourceLimit).
    assert resources(pod, 1) == {"requests": {"cpu": "20m", "memory": "32Mi"}}
    assert "app: cpu request unset -> 250m" in pod["metadata"]["annotations"][
        UPDATES
    ].replace("container 0 ", "")
    assert (
        pod["metadata"]["annotations"]["vpaweb.io/observed-containers"] == "app, side"
    )


def test_statefulset_pod_gets_proportional_limits(cluster):
    workload_with(
        cluster, "hooked-db", "wire-hook", {"db": (250, 300 * MI)}, kind="StatefulSet"
    )
    review = recorded("c-statefulset-pod")
    decision = decide(cluster, review)
    pod = applied(review, decision)
    # requests == limits before, so the limits follow the requests
    # (getProportionalResourceLimit).
    assert resources(pod) == {
        "requests": {"cpu": "250m", "memory": "300Mi"},
        "limits": {"cpu": "250m", "memory": "300Mi"},
    }


def test_limitrange_max_caps_request_and_proportional_limit_fits(cluster):
    # d-limitrange.sent.yaml: default 400m/256Mi, defaultRequest 100m/128Mi, max cpu 1.
    limit_range(
        cluster,
        "wire-lr",
        max=Resources(1000, None),
        default=Resources(400, 256 * MI),
        default_request=Resources(100, 128 * MI),
    )
    workload_with(
        cluster, "lr", "wire-lr", {"app": (2000, 200 * MI)}, kind="StatefulSet"
    )
    review = owned(recorded("d-limitrange-pod"), "StatefulSet", "lr")
    decision = decide(cluster, review)
    assert decision.outcome == PATCHED, decision.reason
    pod = applied(review, decision)
    # 100m * 1 / 400m = 250m (boundary of the container LimitRange), limit 4x = 1.
    assert resources(pod) == {
        "requests": {"cpu": "250m", "memory": "200Mi"},
        "limits": {"cpu": "1", "memory": "400Mi"},
    }
    assert (
        "cpu capped to fit Max in container LimitRange"
        in pod["metadata"]["annotations"][UPDATES]
    )
    # Both annotations kept: LimitRanger's and ours.
    assert "kubernetes.io/limit-ranger" in pod["metadata"]["annotations"]


def test_limitrange_default_limit_is_used_when_the_container_has_none(cluster):
    limit_range(cluster, "wire-hook", default=Resources(400, 256 * MI))
    workload_with(cluster, "hooked", "wire-hook", {"side": (100, 128 * MI)})
    decision = decide(cluster, recorded("a-replicaset-pod"))
    pod = applied(recorded("a-replicaset-pod"), decision)
    # side: request 50m/64Mi, no limit: default 400m/256Mi is the original limit.
    assert resources(pod, 1)["limits"] == {"cpu": "800m", "memory": "512Mi"}


def test_patch_that_would_break_the_limitrange_is_not_sent(cluster):
    # minAllowed above the LimitRange max: the d2 recording shows the 403 this causes.
    limit_range(
        cluster, "wire-lr", max=Resources(1000, None), default=Resources(400, 256 * MI)
    )
    workload_with(
        cluster,
        "lr",
        "wire-lr",
        {"app": (200, 128 * MI)},
        policies=[{"containerName": "*", "minAllowed": {"cpu": "2"}}],
    )
    review = owned(
        recorded("d2-limitrange-max-violated-by-webhook-patch"), "Deployment", "lr"
    )
    decision = decide(cluster, review)
    assert decision.outcome == FAILED_OPEN
    # In LimitRanger's words (the d2 recording: "maximum cpu usage per Container is 1").
    assert "maximum cpu usage per Container is 1, but limit is" in decision.reason
    assert decision.patch == ()


def test_requests_only_caps_to_the_limit_and_leaves_limits(cluster):
    workload_with(
        cluster,
        "bare",
        "wire-hook",
        {"app": (3000, 300 * MI)},
        policies=[{"containerName": "app", "controlledValues": "RequestsOnly"}],
    )
    review = owned(recorded("b-bare-pod"), "Deployment", "bare")
    pod = applied(review, decide(cluster, review))
    assert resources(pod) == {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "1", "memory": "300Mi"},
    }


def test_controlled_resources_cpu_only_leaves_memory(cluster):
    workload_with(
        cluster,
        "bare",
        "wire-hook",
        {"app": (300, 300 * MI)},
        policies=[{"containerName": "*", "controlledResources": ["cpu"]}],
    )
    review = owned(recorded("b-bare-pod"), "Deployment", "bare")
    decision = decide(cluster, review)
    assert not any("memory" in op["path"] for op in decision.patch)
    pod = applied(review, decision)
    assert resources(pod)["requests"] == {"cpu": "300m", "memory": "100Mi"}
    assert resources(pod)["limits"] == {"cpu": "3", "memory": "1Gi"}


def test_container_policy_off_and_plain_init_containers_are_left_alone(cluster):
    review = copy.deepcopy(recorded("a-replicaset-pod"))
    spec = review["request"]["object"]["spec"]
    spec["initContainers"] = [
        {"name": "migrate", "image": "x", "resources": {"requests": {"cpu": "1"}}},
        {"name": "proxy", "image": "x", "restartPolicy": "Always"},
    ]
    workload_with(
        cluster,
        "hooked",
        "wire-hook",
        {
            "app": (250, 300 * MI),
            "side": (20, 32 * MI),
            "migrate": (5, MI),
            "proxy": (30, 40 * MI),
        },
        policies=[{"containerName": "side", "mode": "Off"}],
    )
    decision = decide(cluster, review)
    pod = applied(review, decision)
    assert resources(pod, 1) == {"requests": {"cpu": "50m", "memory": "64Mi"}}
    assert resources(pod, 0, "initContainers") == {"requests": {"cpu": "1"}}
    # A native sidecar is sized, at its place in initContainers (no resources before).
    assert resources(pod, 1, "initContainers") == {
        "requests": {"cpu": "30m", "memory": "40Mi"}
    }
    side = next(p for p in decision.containers if p.name == "side")
    assert "mode is Off" in side.reason


@pytest.mark.parametrize(
    ("mode", "source", "why"),
    [
        ("Off", Policy.Source.VPAWEB, "mode is Off"),
        (
            "Initial",
            Policy.Source.VPA_OBJECT,
            "mirrors an upstream VerticalPodAutoscaler",
        ),
        (
            "Recreate",
            Policy.Source.VPA_OBJECT,
            "mirrors an upstream VerticalPodAutoscaler",
        ),
    ],
)
def test_off_and_mirrored_vpa_workloads_are_never_patched(cluster, mode, source, why):
    workload_with(
        cluster,
        "hooked",
        "wire-hook",
        {"app": (250, 300 * MI)},
        mode=mode,
        source=source,
    )
    decision = decide(cluster, recorded("a-replicaset-pod"))
    assert decision.outcome == LEFT_ALONE
    assert why in decision.reason
    assert decision.patch == ()


@pytest.mark.parametrize("mode", ["Initial", "Recreate", "InPlaceOrRecreate"])
def test_every_non_off_mode_patches_at_admission(cluster, mode):
    workload_with(cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)}, mode=mode)
    assert decide(cluster, recorded("a-replicaset-pod")).outcome == PATCHED


def test_unknown_owner_bare_pod_and_non_pod_are_left_alone(cluster):
    assert decide(cluster, recorded("a-replicaset-pod")).reason.startswith(
        "vpaweb does not know its owner (Deployment wire-hook/hooked or ReplicaSet"
    )
    assert "bare pod" in decide(cluster, recorded("b-bare-pod")).reason
    vpa = decide(cluster, recorded("f-vpa-create"))
    assert (vpa.outcome, vpa.patch) == (LEFT_ALONE, ())


def test_no_recommendation_is_left_alone(cluster):
    make_workload(
        cluster, "hooked", namespace="wire-hook", mode="Initial", containers={"app": {}}
    )
    decision = decide(cluster, recorded("a-replicaset-pod"))
    assert decision.outcome == LEFT_ALONE
    assert "has no recommendation for it yet" in decision.reason


def test_stale_recommendation_and_missing_or_stale_cache_admit_unchanged(
    cluster, settings
):
    workload = workload_with(cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)})
    review = recorded("a-replicaset-pod")
    snapshot = load_snapshot(cluster=cluster)
    now = timezone.now()
    late = now + timedelta(seconds=settings.WEBHOOK_MAX_SNAPSHOT_AGE_S + 1)
    assert (
        decide_admission(request=review["request"], snapshot=None, now=now).outcome
        == FAILED_OPEN
    )
    stale = decide_admission(request=review["request"], snapshot=snapshot, now=late)
    assert (stale.outcome, stale.patch) == (FAILED_OPEN, ())
    workload.last_seen_at = now - timedelta(days=2)
    workload.save()
    old = decide(cluster, review)
    assert old.outcome == LEFT_ALONE and "stale" in old.reason


def test_dry_run_gets_the_same_patch_and_is_not_counted(cluster):
    workload_with(cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)})
    holder = SnapshotHolder("wire")
    holder.refresh()
    review = recorded("a-replicaset-pod")
    dry = copy.deepcopy(review)
    dry["request"]["dryRun"] = True
    counters.flush_counts()
    now = timezone.now()
    real_reply, _ = admit_review(
        parse_review(json.dumps(review).encode(), content_type="application/json"),
        holder=holder,
        now=now,
    )
    dry_reply, _ = admit_review(
        parse_review(json.dumps(dry).encode(), content_type="application/json"),
        holder=holder,
        now=now,
    )
    assert dry_reply["response"]["patch"] == real_reply["response"]["patch"]
    assert counters.flush_counts() == 1  # the real one only
    assert AdmissionCount.objects.get().outcome == PATCHED
    patch = json.loads(base64.b64decode(dry_reply["response"]["patch"]))
    jsonpatch.apply_patch(dry["request"]["object"], patch)


def test_an_unreadable_pod_spec_fails_open(cluster):
    workload_with(cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)})
    review = copy.deepcopy(recorded("a-replicaset-pod"))
    side = review["request"]["object"]["spec"]["containers"][1]
    side["resources"]["requests"]["cpu"] = "lots"
    decision = decide(cluster, review)
    assert (decision.outcome, decision.patch) == (FAILED_OPEN, ())
    assert "spec.containers[1].resources.requests.cpu" in decision.reason


@pytest.mark.django_db
def test_a_flush_adds_every_count_in_one_statement(cluster, monkeypatch):
    """Counts of several clusters, minutes and outcomes: one upsert adds them to the
    rows stored already and creates the missing ones; more keys than a statement
    takes go in several, all saved or none (the failed flush's counts kept)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from recommender.models import bulk

    counters.flush_counts()
    minute = timezone.now().replace(second=0, microsecond=0)
    AdmissionCount.objects.create(
        cluster_name="a", minute=minute, outcome=PATCHED, count=5
    )
    keys = (
        ("a", minute, PATCHED, 3),
        ("a", minute, LEFT_ALONE, 2),
        ("a", minute - timedelta(minutes=1), PATCHED, 1),
        ("b", minute, PATCHED, 4),
    )

    def count_all() -> None:
        for name, at, outcome, times in keys:
            for _ in range(times):
                counters.count(cluster_name=name, outcome=outcome, at=at)

    def stored() -> dict[tuple[str, Any, str], int]:
        return {
            (row.cluster_name, row.minute, row.outcome): row.count
            for row in AdmissionCount.objects.all()
        }

    def writes(queries: CaptureQueriesContext) -> int:
        return sum(1 for q in queries.captured_queries if "SAVEPOINT" not in q["sql"])

    count_all()
    with CaptureQueriesContext(connection) as queries:
        assert counters.flush_counts() == 10
    assert writes(queries) == 1
    assert stored() == {
        ("a", minute, PATCHED): 8,
        ("a", minute, LEFT_ALONE): 2,
        ("a", minute - timedelta(minutes=1), PATCHED): 1,
        ("b", minute, PATCHED): 4,
    }
    assert counters.flush_counts() == 0 and counters.pending_total() == 0

    # Two keys a statement: the second statement breaks the count's check, and the
    # first one's counts are not kept either.
    monkeypatch.setattr(bulk, "CAS_BATCH", 2)
    before = stored()
    count_all()
    with counters._lock:
        counters._pending[("b", minute, PATCHED)] = -100
    with CaptureQueriesContext(connection) as queries:
        assert counters.flush_counts() == 0
    assert writes(queries) == 2
    assert stored() == before
    assert counters.pending_total() == 10 - 4 - 100
    with counters._lock:
        counters._pending[("b", minute, PATCHED)] = 4
    assert counters.flush_counts() == 10
    assert stored() == {
        key: n + (n - 5 if key == ("a", minute, PATCHED) else n)
        for key, n in before.items()
    }


def test_a_flush_returns_once_the_counts_another_thread_took_are_saved(
    transactional_db, monkeypatch
):
    # The webhook's background thread flushes every few seconds; a flush called
    # meanwhile (a refresh, a test reading the rows) must not return while the counts
    # it would have saved are still in the other flush's hands.
    import threading

    from django.db import connection

    def closing(work):
        def run():
            try:
                work()
            finally:
                connection.close()

        return run

    counters.flush_counts()
    now = timezone.now()
    counters.count(cluster_name="wire", outcome=PATCHED, at=now)
    inside, release = threading.Event(), threading.Event()
    real_add = counters._add

    def slow_add(*args, **kwargs):
        inside.set()
        release.wait(10)
        real_add(*args, **kwargs)

    monkeypatch.setattr(counters, "_add", slow_add)
    background = threading.Thread(target=closing(counters.flush_counts))
    background.start()
    assert inside.wait(10)
    seen = []
    second = threading.Thread(
        target=closing(
            lambda: seen.append(
                (counters.flush_counts(), AdmissionCount.objects.count())
            )
        )
    )
    second.start()
    second.join(0.5)
    assert second.is_alive()  # waits for the first flush
    release.set()
    background.join(10)
    second.join(10)
    assert seen == [(0, 1)]

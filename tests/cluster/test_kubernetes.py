"""The Kubernetes adapter against the fake API server, through the official client."""

from __future__ import annotations

import ast
import copy
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recommender.cluster.base import ClusterSnapshot, WorkloadInfo
from recommender.cluster.kube_objects import hpa_conflicts, hpa_of
from recommender.cluster.kubernetes import KubernetesAdapter
from recommender.engine.capping import LimitRangeItem, combine_limit_ranges
from recommender.engine.resources import Resources
from recommender.errors import SourceUnavailable
from tests.k8s_fake.plugin import FAST, adapter, api_server, kubeconfig, sleeps
from tests.k8s_fake.server import FakeApiServer, load_fixtures, write_kubeconfig

MI = 2**20
REPO = Path(__file__).resolve().parents[2]
__all__ = ["adapter", "api_server", "kubeconfig", "sleeps"]  # fixtures, for pytest


def workload(snapshot: ClusterSnapshot, kind: str, name: str) -> WorkloadInfo:
    found = [w for w in snapshot.workloads if (w.kind, w.name) == (kind, name)]
    assert len(found) == 1, f"{kind}/{name} found {len(found)} times"
    return found[0]


def test_discovers_each_top_level_controller_once(adapter):
    snapshot = adapter.discover()

    assert {(w.kind, w.namespace, w.name) for w in snapshot.workloads} == {
        ("Deployment", "shop", "web"),
        ("StatefulSet", "shop", "db"),
        ("DaemonSet", "monitoring", "node-exporter"),
        ("CronJob", "batch", "nightly-report"),
        ("Job", "batch", "migrate-once"),
        ("ReplicaSet", "shop", "legacy-cache"),
        # Owned by an Argo Rollout, a kind we do not list: the ReplicaSet is the top.
        ("ReplicaSet", "shop", "checkout-6b9c8d7f5"),
        ("ReplicationController", "shop", "old-frontend"),
    }
    assert snapshot.warnings == ()


def test_replica_sets_of_a_deployment_and_jobs_of_a_cron_job_are_not_workloads(adapter):
    names = {w.name for w in adapter.discover().workloads}

    assert "web-7d9f8b6c5d" not in names
    assert "web-5b6c7d8e9f" not in names
    assert "nightly-report-29397720" not in names


def test_pods_join_their_top_controller_through_the_owner_chain(adapter):
    snapshot = adapter.discover()

    web = workload(snapshot, "Deployment", "web")
    assert [p.name for p in web.pods] == [
        "web-7d9f8b6c5d-q8m2z",
        "web-7d9f8b6c5d-x2k4p",
        "web-7d9f8b6c5d-z9n3k",
    ]
    assert {(p.owner_kind, p.owner_name) for p in web.pods} == {
        ("ReplicaSet", "web-7d9f8b6c5d")
    }
    assert {p.phase for p in web.pods} == {"Running", "Pending"}
    db = workload(snapshot, "StatefulSet", "db")
    assert [(p.name, p.node_name) for p in db.pods] == [("db-0", "node-b")]
    assert db.pods[0].start_time == datetime(2026, 11, 18, 3, 12, 33, tzinfo=UTC)
    # A finished pod (Failed, Succeeded) is not a live pod of its workload.
    assert workload(snapshot, "CronJob", "nightly-report").pods == ()
    assert workload(snapshot, "Job", "migrate-once").pods == ()
    all_pods = {p.name for w in snapshot.workloads for p in w.pods}
    assert "debug-shell" not in all_pods  # a bare pod belongs to no workload


def test_template_containers_tell_init_containers_and_native_sidecars_apart(adapter):
    web = workload(adapter.discover(), "Deployment", "web")

    assert [(c.name, c.kind) for c in web.containers] == [
        ("app", "regular"),
        ("migrate", "init"),
        ("log-shipper", "sidecar"),
    ]
    app, migrate, sidecar = web.containers
    assert app.requests == Resources(250, 256 * MI)
    assert app.limits == Resources(None, 512 * MI)
    assert migrate.requests == Resources(100, 128 * MI)
    assert sidecar.requests == Resources(50, 64 * MI)
    assert sidecar.limits == Resources(None, 128 * MI)


def test_pod_requests_come_from_container_status_over_the_spec(adapter):
    web = workload(adapter.discover(), "Deployment", "web")
    pods = {p.name: p for p in web.pods}

    # Resized in place: status.containerStatuses[].resources says 300m, the spec 250m.
    resized = {c.name: c for c in pods["web-7d9f8b6c5d-x2k4p"].containers}
    assert resized["app"].requests == Resources(300, 256 * MI)
    untouched = {c.name: c for c in pods["web-7d9f8b6c5d-q8m2z"].containers}
    assert untouched["app"].requests == Resources(250, 256 * MI)
    assert untouched["log-shipper"].kind == "sidecar"


def test_template_requests_default_to_limits_as_the_api_server_does_for_pods(adapter):
    exporter = workload(adapter.discover(), "DaemonSet", "node-exporter")

    assert exporter.containers[0].requests == Resources(200, 100 * MI)
    assert exporter.replicas == 2  # status.desiredNumberScheduled


def test_selectors_and_replicas_per_kind(adapter):
    snapshot = adapter.discover()

    rc = workload(snapshot, "ReplicationController", "old-frontend")
    assert rc.selector == {"matchLabels": {"app": "old-frontend"}}
    assert rc.replicas == 1
    web = workload(snapshot, "Deployment", "web")
    assert web.selector == {"matchLabels": {"app": "web"}}
    assert web.replicas == 3
    assert web.labels == {"app": "web"}
    assert web.uid
    cron = workload(snapshot, "CronJob", "nightly-report")
    assert cron.selector == {}
    assert cron.replicas is None
    assert cron.containers[0].requests == Resources(1000, 768 * MI)


def test_oom_kills_come_from_pod_statuses_with_the_memory_request(adapter):
    kills = [k for k in adapter.discover().oom_kills if not k.is_eviction]

    assert [
        (
            k.namespace,
            k.pod,
            k.container,
            k.occurred_at,
            k.memory_request_bytes,
            k.restart_count,
            k.workload_kind,
            k.workload_name,
        )
        for k in kills
    ] == [
        # Terminated now (restartPolicy Never), in a Job of a CronJob.
        (
            "batch",
            "nightly-report-29397720-7xk2p",
            "report",
            datetime(2026, 11, 20, 2, 7, 39, tzinfo=UTC),
            768 * MI,
            0,
            "CronJob",
            "nightly-report",
        ),
        # Restarted after the kill: lastState.terminated.
        (
            "shop",
            "web-7d9f8b6c5d-x2k4p",
            "app",
            datetime(2026, 11, 20, 9, 58, 12, tzinfo=UTC),
            256 * MI,
            1,
            "Deployment",
            "web",
        ),
    ]


def test_memory_evictions_come_from_evicted_events_with_usage(adapter, api_server):
    evictions = [k for k in adapter.discover().oom_kills if k.is_eviction]

    # The ephemeral-storage eviction and the "Started" event bring nothing.
    assert [
        (k.pod, k.container, k.memory_request_bytes, k.occurred_at) for k in evictions
    ] == [
        (
            "web-7d9f8b6c5d-r2d2x",
            "app",
            900 * MI,
            datetime(2026, 11, 20, 9, 31, 7, tzinfo=UTC),
        ),
        (
            "web-7d9f8b6c5d-r2d2x",
            "log-shipper",
            20 * MI,
            datetime(2026, 11, 20, 9, 31, 7, tzinfo=UTC),
        ),
    ]
    # The evicted pod is gone, so its workload cannot be named.
    assert {k.workload_kind for k in evictions} == {""}
    (events,) = api_server.gets("/events")
    assert events.query["fieldSelector"] == ["involvedObject.kind=Pod,reason=Evicted"]


def test_eviction_of_a_listed_pod_names_its_workload(api_server, adapter):
    event = next(o for o in load_fixtures("events") if o["reason"] == "Evicted")
    event = copy.deepcopy(event)
    event["metadata"]["name"] = "db-0.1879a50000000001"
    event["involvedObject"]["name"] = "db-0"
    event["metadata"]["annotations"] = {
        "offending_containers": "postgres",
        "offending_containers_usage": "1800Mi",
        "starved_resource": "memory",
    }
    api_server.add(event)

    kills = [k for k in adapter.discover().oom_kills if k.pod == "db-0"]

    assert [
        (k.container, k.memory_request_bytes, k.workload_kind, k.workload_name)
        for k in kills
    ] == [("postgres", 1800 * MI, "StatefulSet", "db")]


def test_vpa_objects_are_imported_with_mode_policies_and_min_replicas(adapter):
    vpas = {v.name: v for v in adapter.discover().vpas}

    web = vpas["web-vpa"]
    assert (web.namespace, web.target_kind, web.target_name) == (
        "shop",
        "Deployment",
        "web",
    )
    assert web.update_mode == "Recreate"  # "Auto" is the deprecated name of Recreate
    assert web.min_replicas == 2
    assert web.container_policies == [
        {
            "containerName": "*",
            "minAllowed": {"cpu": "100m", "memory": "128Mi"},
            "maxAllowed": {"cpu": "2", "memory": "4Gi"},
            "controlledResources": ["cpu", "memory"],
        },
        {"containerName": "log-shipper", "mode": "Off"},
    ]
    assert web.recommenders == ()
    db = vpas["db-vpa"]
    assert (db.update_mode, db.min_replicas, db.container_policies) == ("Off", None, [])
    assert db.recommenders == ("vpaweb",)


def test_vpa_without_update_policy_defaults_to_recreate(api_server, adapter):
    vpa = copy.deepcopy(load_fixtures("autoscalers")[0])
    vpa["metadata"]["name"] = "legacy-vpa"
    del vpa["spec"]["updatePolicy"]
    api_server.add(vpa)

    vpas = {v.name: v for v in adapter.discover().vpas}

    assert vpas["legacy-vpa"].update_mode == "Recreate"
    assert vpas["legacy-vpa"].min_replicas is None


def test_no_vpa_crd_means_no_vpa_objects(api_server, adapter):
    api_server.unserve("autoscaling.k8s.io")

    snapshot = adapter.discover()

    assert snapshot.vpas == ()
    assert len(snapshot.workloads) == 8


def test_hpas_on_cpu_or_memory_are_flagged_on_their_target(adapter):
    snapshot = adapter.discover()

    assert workload(snapshot, "Deployment", "web").hpa_scaled_resources == (
        "cpu",
        "memory",
    )
    # Scales on an external metric only: no conflict with resource recommendations.
    assert workload(snapshot, "ReplicaSet", "legacy-cache").hpa_scaled_resources == ()
    hpas = {h["name"]: h for h in snapshot.horizontal_pod_autoscalers}
    web = hpas["web"]
    assert (web["target_kind"], web["target_name"], web["min_replicas"]) == (
        "Deployment",
        "web",
        2,
    )
    assert hpa_conflicts(web) == ["cpu", "memory"]
    assert hpa_conflicts(web, controlled_resources=("memory",)) == ["memory"]
    # The memory metric is a ContainerResource of "app"; the CPU one covers every
    # container.
    assert hpa_conflicts(web, container="log-shipper") == ["cpu"]
    assert hpa_conflicts(web, controlled_resources=("memory",), container="app") == [
        "memory"
    ]
    assert hpa_conflicts(hpas["legacy-cache"]) == []
    assert hpas["legacy-cache"]["other_metric_types"] == ["External"]
    # The targets, as the autoscaling/v2 object states them (the HPA-aware advice).
    assert web["resource_metrics"] == [
        {
            "index": 0,
            "resource": "cpu",
            "container": "",
            "target_type": "Utilization",
            "average_utilization": 70,
            "average_value": None,
        },
        {
            "index": 1,
            "resource": "memory",
            "container": "app",
            "target_type": "AverageValue",
            "average_utilization": None,
            "average_value": 400 * 2**20,
        },
    ]


def test_a_malformed_hpa_target_names_the_field():
    broken = {
        "metadata": {"namespace": "shop", "name": "web"},
        "spec": {
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "AverageValue", "averageValue": "lots"},
                    },
                }
            ]
        },
    }

    with pytest.raises(ValueError, match=r"shop/web: spec.metrics\[0\].resource"):
        hpa_of(broken)


def test_pod_disruption_budgets_and_limit_ranges_are_read(adapter):
    snapshot = adapter.discover()

    pdbs = {p["name"]: p for p in snapshot.pod_disruption_budgets}
    assert pdbs["web"]["min_available"] == 2
    assert pdbs["web"]["selector"] == {"matchLabels": {"app": "web"}}
    assert pdbs["web"]["disruptions_allowed"] == 0
    assert pdbs["db"]["max_unavailable"] == "50%"
    (limit_range,) = snapshot.limit_ranges
    assert limit_range["namespace"] == "shop"
    # The PersistentVolumeClaim item caps no container and is left out.
    assert [item["type"] for item in limit_range["limits"]] == ["Container", "Pod"]
    # The dicts carry exactly the fields of the engine's LimitRangeItem.
    items = [
        LimitRangeItem(
            type=item["type"],
            **{
                key: Resources(**item[key])
                for key in ("max", "min", "default", "default_request")
            },
        )
        for item in limit_range["limits"]
    ]
    container = combine_limit_ranges(items, "Container")
    assert container is not None
    assert container.max == Resources(2000, 4096 * MI)
    assert container.min == Resources(10, 16 * MI)
    assert container.default == Resources(500, 512 * MI)
    assert combine_limit_ranges(items, "Pod").max == Resources(4000, 8192 * MI)


def test_lists_are_paginated_with_limit_and_continue(adapter, api_server):
    snapshot = adapter.discover()

    pod_pages = api_server.gets("/api/v1/pods")
    # 12 pods at 3 per page: 4 requests, each later one carrying the previous token.
    assert len(pod_pages) == 4
    assert all(page.query["limit"] == ["3"] for page in pod_pages)
    assert "continue" not in pod_pages[0].query
    assert all("continue" in page.query for page in pod_pages[1:])
    assert len({page.query["continue"][0] for page in pod_pages[1:]}) == 3
    seen = {p.name for w in snapshot.workloads for p in w.pods}
    # All 12 pods were read: 9 live ones under workloads, plus a Failed one (its OOM
    # kill is reported), a Succeeded one and a bare one.
    assert len(seen) == 9
    assert len({k.pod for k in snapshot.oom_kills if not k.is_eviction}) == 2


def test_an_expired_continue_token_restarts_the_list(adapter, api_server):
    api_server.fail("/api/v1/pods", 410, on_continue=True)

    snapshot = adapter.discover()

    # First attempt: page 1, then 410 on page 2; second attempt: 4 pages.
    assert len(api_server.gets("/api/v1/pods")) == 2 + 4
    assert len(workload(snapshot, "Deployment", "web").pods) == 3


def test_no_write_verb_is_ever_sent(adapter, api_server, kubeconfig):
    from recommender.sources.metrics_server import MetricsServerSource

    adapter.check_connection()
    adapter.discover()
    source = MetricsServerSource(
        cluster_name="fake", context="fake", kubeconfig=str(kubeconfig), settings=FAST
    )
    source.fetch_usage(namespace=None, start_s=0.0, end_s=2e9, step_s=60.0)
    source.close()

    assert len(api_server.requests) > 20
    assert api_server.write_verbs() == []
    assert {r.method for r in api_server.requests} == {"GET"}


def test_adapter_code_has_no_write_call():
    # Belt and braces: the generated client's write methods are named create_*, patch_*,
    # replace_*, delete_* and connect_{post,put,patch,delete}_*; none may appear.
    files = [
        REPO / "recommender/cluster/kube_client.py",
        REPO / "recommender/cluster/kube_objects.py",
        REPO / "recommender/cluster/kubernetes.py",
        REPO / "recommender/cluster/owners.py",
        REPO / "recommender/sources/metrics_server.py",
    ]
    prefixes = (
        "create_",
        "patch_",
        "replace_",
        "delete_",
        "connect_post",
        "connect_put",
    )
    calls = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith(prefixes):
                calls.append(f"{path.name}:{node.lineno} {node.attr}")
            if isinstance(node, ast.Constant) and node.value in (
                "POST",
                "PUT",
                "PATCH",
            ):
                calls.append(f"{path.name}:{node.lineno} {node.value}")
    assert calls == []


def test_the_kubeconfig_token_is_sent(adapter, api_server):
    adapter.discover()

    assert {r.authorization for r in api_server.requests} == {
        f"Bearer {api_server.token}"
    }


def test_a_namespaced_adapter_lists_only_its_namespace(kubeconfig, api_server, sleeps):
    adapter = KubernetesAdapter(
        cluster_name="fake",
        context="fake",
        kubeconfig=str(kubeconfig),
        namespace="monitoring",
        settings=FAST,
        sleep=sleeps.append,
    )
    snapshot = adapter.discover()
    adapter.close()

    assert [(w.kind, w.name) for w in snapshot.workloads] == [
        ("DaemonSet", "node-exporter")
    ]
    # Besides the server's version, which is not namespaced.
    assert all(
        "/namespaces/monitoring/" in r.path
        for r in api_server.requests
        if r.path.rstrip("/") != "/version"
    )


def test_two_clusters_are_read_at_once_each_from_its_context(tmp_path, sleeps):
    shop = FakeApiServer(
        o for o in load_fixtures() if o["metadata"].get("namespace") != "monitoring"
    ).start()
    monitoring = FakeApiServer(
        [o for o in load_fixtures() if o["metadata"].get("namespace") == "monitoring"],
        token="another-token",
    ).start()
    try:
        config = write_kubeconfig(
            tmp_path / "config",
            {"shop": shop, "monitoring": monitoring},
            current="shop",
        )
        first = KubernetesAdapter(
            cluster_name="one", kubeconfig=str(config), context="", settings=FAST
        )
        second = KubernetesAdapter(
            cluster_name="two",
            kubeconfig=str(config),
            context="monitoring",
            settings=FAST,
        )
        one, two = first.discover(), second.discover()
        first.close()
        second.close()
    finally:
        shop.stop()
        monitoring.stop()

    # An empty context outside a pod means the kubeconfig's current context.
    assert len(one.workloads) == 7
    assert [w.name for w in two.workloads] == ["node-exporter"]
    assert {r.authorization for r in monitoring.requests} == {"Bearer another-token"}


def test_kubeconfig_comes_from_the_kubeconfig_variable(
    kubeconfig, api_server, monkeypatch
):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))

    adapter = KubernetesAdapter(cluster_name="fake", context="fake", settings=FAST)
    version = adapter.check_connection()
    adapter.close()

    assert version == "v1.36.2"
    assert api_server.gets("/version")


def test_an_unknown_context_is_a_clear_error(kubeconfig):
    with pytest.raises(SourceUnavailable) as caught:
        KubernetesAdapter(
            cluster_name="prod",
            context="no-such",
            kubeconfig=str(kubeconfig),
            settings=FAST,
        )

    assert "cluster 'prod'" in caught.value.message
    assert "'no-such'" in caught.value.message


def test_a_malformed_object_is_skipped_with_a_warning_naming_the_field(
    api_server, adapter
):
    broken = copy.deepcopy(
        next(o for o in load_fixtures("controllers") if o["metadata"]["name"] == "db")
    )
    broken["metadata"]["name"] = "db-broken"
    broken["metadata"]["uid"] = "00000000-0000-4000-8000-00000000dead"
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"][
        "memory"
    ] = "lots"
    api_server.add(broken)

    snapshot = adapter.discover()

    assert "db-broken" not in {w.name for w in snapshot.workloads}
    assert len(snapshot.workloads) == 8
    (warning,) = snapshot.warnings
    assert "StatefulSet shop/db-broken" in warning
    assert "containers[postgres].resources.requests.memory" in warning
    assert "'lots'" in warning


def test_fixtures_look_like_real_api_objects():
    for obj in load_fixtures():
        assert obj["apiVersion"] and obj["kind"], obj
        meta = obj["metadata"]
        # Namespaces are cluster-scoped: the only objects without a namespace.
        assert meta["name"] and (meta.get("namespace") or obj["kind"] == "Namespace"), (
            obj["kind"]
        )
        if obj["kind"] != "PodMetrics":
            assert meta["uid"] and meta["resourceVersion"], meta["name"]
        if obj["kind"] == "Pod":
            assert obj["status"]["phase"] and obj["status"]["containerStatuses"]
            assert obj["spec"]["nodeName"]
    # Lists of built-in kinds, as the server sends them, have no per-item kind.
    server = FakeApiServer(load_fixtures("pods"))
    page = server._list(server._collections[("", "v1", "pods")], None, {})
    assert "kind" not in page["items"][0]
    assert page["kind"] == "PodList"
    assert json.dumps(page)


@pytest.mark.parametrize(
    ("status", "replicas"),
    [
        ({"desiredNumberScheduled": 3, "currentNumberScheduled": 2}, 3),
        ({"currentNumberScheduled": 2}, 2),
        # A DaemonSet on no node: no pod, nothing to save.
        ({"desiredNumberScheduled": 0, "currentNumberScheduled": 0}, 0),
        # Before the controller wrote a status: unknown, not 0 or 1.
        ({}, None),
    ],
)
def test_a_daemon_set_counts_a_pod_per_node_it_runs_on(status, replicas):
    from recommender.cluster.kube_objects import replicas_of

    (daemon_set,) = [
        obj for obj in load_fixtures("controllers") if obj["kind"] == "DaemonSet"
    ]
    daemon_set = {**copy.deepcopy(daemon_set), "status": status}
    assert replicas_of("DaemonSet", daemon_set) == replicas

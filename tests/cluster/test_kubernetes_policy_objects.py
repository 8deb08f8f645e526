"""VPA objects, HPAs, PodDisruptionBudgets and LimitRanges of a Kubernetes cluster, read
by a refresh against the fake API server: what is stored, and who wins over whom."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest

from recommender.engine.capping import LimitRangeItem
from recommender.engine.resources import Resources
from recommender.models import AuditEvent, NamespaceLimitRange, Policy, Workload
from recommender.services.advice.limits import (
    limit_ranges_by_namespace,
    limit_ranges_for,
)
from recommender.services.policy.changes import adopt_policy, update_policy
from recommender.services.refresh.cycle import refresh_cluster
from tests.cluster.test_kubernetes_refresh import kubernetes_cluster
from tests.k8s_fake.plugin import api_server, kubeconfig
from tests.k8s_fake.server import load_fixtures

__all__ = ["api_server", "kubeconfig", "kubernetes_cluster"]  # fixtures, for pytest

NOW = datetime(2026, 11, 20, 10, 0, 30, tzinfo=UTC)
MIB = 2**20


def refresh(cluster, minutes=0, namespace=None):
    run = refresh_cluster(
        cluster_id=cluster.pk, now=NOW + timedelta(minutes=minutes), namespace=namespace
    )
    assert run.status == "succeeded", run.error
    return run


def workload(name):
    return Workload.objects.select_related("policy").get(name=name)


def vpa_fixture(name):
    return copy.deepcopy(
        next(
            o
            for o in load_fixtures("autoscalers")
            if o["kind"] == "VerticalPodAutoscaler" and o["metadata"]["name"] == name
        )
    )


def test_vpa_objects_are_imported_as_policies_in_the_upstream_shape(
    kubernetes_cluster, api_server
):
    run = refresh(kubernetes_cluster)

    web = workload("web").policy
    assert web.source == Policy.Source.VPA_OBJECT
    assert web.mode == Policy.Mode.RECREATE  # the deprecated Auto, as upstream reads it
    assert web.min_replicas == 2
    assert web.container_policies == [
        {
            "containerName": "*",
            "mode": "Auto",
            "minAllowed": {"cpu": "100m", "memory": "128Mi"},
            "maxAllowed": {"cpu": "2", "memory": "4Gi"},
            "controlledResources": ["cpu", "memory"],
        },
        {
            "containerName": "log-shipper",
            "mode": "Off",
            "controlledResources": ["cpu", "memory"],
        },
    ]
    # Mirrored: shown with the object's mode, never acted on by vpaweb.
    assert (web.vpa_object, web.vpa_object_mode) == ("shop/web-vpa", "Recreate")
    assert not web.is_actionable and not web.has_vpa_conflict
    assert not Policy.objects.actionable().exists()
    db = workload("db").policy
    assert (db.source, db.mode, db.container_policies) == ("vpa-object", "Off", [])
    # Workloads without a VPA object keep vpaweb's default.
    others = Policy.objects.exclude(workload__name__in=["web", "db"])
    assert set(others.values_list("source", "mode")) == {("vpaweb", "Off")}
    assert run.counts["policies_imported"] == 2
    event = AuditEvent.objects.get(action="policy.import", workload__name="web")
    assert event.actor_label == "vpa-object:shop/web-vpa"
    assert event.after["mode"] == "Recreate"
    # A second cycle imports nothing new.
    assert "policies_imported" not in refresh(kubernetes_cluster, minutes=1).counts


def test_an_operators_edit_wins_over_the_vpa_object_and_a_gone_object_resets(
    kubernetes_cluster, api_server, django_user_model
):
    refresh(kubernetes_cluster)
    operator = django_user_model.objects.create_user("op")
    web = workload("web")
    adopt_policy(workload_id=web.pk, actor=operator, now=NOW)
    update_policy(
        workload_id=web.pk,
        changes={"mode": "Off", "min_replicas": 3},
        actor=operator,
        now=NOW,
    )
    # The owner changes the VPA object, and removes the one of db.
    changed = vpa_fixture("web-vpa")
    changed["spec"]["updatePolicy"]["minReplicas"] = 5
    api_server.remove("VerticalPodAutoscaler", "shop", "web-vpa")
    api_server.add(changed)
    api_server.remove("VerticalPodAutoscaler", "shop", "db-vpa")

    run = refresh(kubernetes_cluster, minutes=1)

    web_policy = workload("web").policy
    assert (web_policy.mode, web_policy.min_replicas) == ("Off", 3)
    assert run.counts["vpa_objects_overridden"] == 1
    db_policy = workload("db").policy
    assert (db_policy.source, db_policy.mode, db_policy.container_policies) == (
        "vpaweb",
        "Off",
        [],
    )
    assert (
        AuditEvent.objects.filter(action="policy.import", workload__name="db").count()
        == 2
    )


def test_an_unusable_vpa_object_is_not_imported_and_says_why(
    kubernetes_cluster, api_server, caplog
):
    broken = vpa_fixture("web-vpa")
    broken["spec"]["resourcePolicy"]["containerPolicies"][0]["maxAllowed"] = {
        "cpu": "50m"  # below minAllowed
    }
    api_server.remove("VerticalPodAutoscaler", "shop", "web-vpa")
    api_server.add(broken)

    run = refresh(kubernetes_cluster)

    assert workload("web").policy.source == Policy.Source.VPAWEB
    assert workload("web").policy.mode == Policy.Mode.OFF
    assert run.counts["vpa_objects_invalid"] == 1
    assert "VerticalPodAutoscaler shop/web-vpa: spec.resourcePolicy." in caplog.text
    assert "maxAllowed.cpu" in caplog.text


def test_hpa_conflicts_follow_the_resources_the_policy_controls(
    kubernetes_cluster, api_server, django_user_model
):
    refresh(kubernetes_cluster)

    # HPA "web" scales on cpu (every container) and on app's memory; the imported
    # policy controls both; legacy-cache's HPA scales on an External metric only.
    assert workload("web").hpa_conflicts == [
        {
            "name": "web",
            "resources": ["cpu", "memory"],
            # Its replica bounds, for the replicas a what-if says it would run.
            "min_replicas": 2,
            "max_replicas": 10,
            # The targets the HPA-aware advice keeps in step with the requests.
            "metrics": [
                {
                    "resource": "cpu",
                    "container": "",
                    "target_type": "Utilization",
                    "average_utilization": 70,
                    "average_value": None,
                },
                {
                    "resource": "memory",
                    "container": "app",
                    "target_type": "AverageValue",
                    "average_utilization": None,
                    "average_value": 400 * 2**20,
                },
            ],
        }
    ]
    assert workload("legacy-cache").hpa_conflicts == []
    assert workload("db").hpa_conflicts == []

    operator = django_user_model.objects.create_user("op")
    adopt_policy(workload_id=workload("web").pk, actor=operator, now=NOW)
    update_policy(
        workload_id=workload("web").pk,
        changes={
            "container_policies": [
                {"containerName": "*", "controlledResources": ["memory"]},
                {
                    "containerName": "app",
                    "mode": "Off",
                    "controlledValues": "RequestsOnly",
                },
            ]
        },
        actor=operator,
        now=NOW,
    )
    refresh(kubernetes_cluster, minutes=1)

    # cpu is no longer controlled, and app (whose memory the HPA uses) is Off.
    assert workload("web").hpa_conflicts == []


def test_pod_disruption_budgets_are_stored_on_the_workloads_they_cover(
    kubernetes_cluster, api_server
):
    refresh(kubernetes_cluster)

    web = workload("web").pod_disruption_budgets
    assert [(b["name"], b["min_available"]) for b in web] == [("web", 2)]
    db = workload("db").pod_disruption_budgets
    assert [(b["name"], b["max_unavailable"]) for b in db] == [("db", "50%")]
    assert workload("old-frontend").pod_disruption_budgets == []


def test_limit_ranges_are_stored_combined_per_namespace(kubernetes_cluster, api_server):
    refresh(kubernetes_cluster)

    container, pod = limit_ranges_for(
        cluster_id=kubernetes_cluster.pk, namespace="shop"
    )
    assert container == LimitRangeItem(
        type="Container",
        max=Resources(2000, 4 * 2**30),
        min=Resources(10, 16 * MIB),
        default=Resources(500, 512 * MIB),
        # maxLimitRequestRatio cpu "10", as a MilliValue.
        max_limit_request_ratio=Resources(10_000, None),
    )
    assert pod == LimitRangeItem(type="Pod", max=Resources(4000, 8 * 2**30))
    assert limit_ranges_for(cluster_id=kubernetes_cluster.pk, namespace="batch") == (
        None,
        None,
    )
    assert list(
        limit_ranges_by_namespace(
            cluster_id=kubernetes_cluster.pk, namespaces=["shop", "batch"]
        )
    ) == ["shop"]

    # A second, stricter LimitRange combines (lowest max); a shard of another
    # namespace leaves shop's row alone; deleting both removes it.
    stricter = {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"namespace": "shop", "name": "strict", "uid": "lr-2"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]},
    }
    api_server.add(stricter)
    refresh(kubernetes_cluster, minutes=1, namespace="batch")
    assert limit_ranges_for(cluster_id=kubernetes_cluster.pk, namespace="shop")[
        0
    ].max == Resources(2000, 4 * 2**30)
    refresh(kubernetes_cluster, minutes=2, namespace="shop")
    container, _ = limit_ranges_for(cluster_id=kubernetes_cluster.pk, namespace="shop")
    assert container.max == Resources(1000, 4 * 2**30)
    assert NamespaceLimitRange.objects.get(namespace="shop").sources == [
        "limits",
        "strict",
    ]
    api_server.remove("LimitRange", "shop", "limits")
    api_server.remove("LimitRange", "shop", "strict")
    refresh(kubernetes_cluster, minutes=3)
    assert not NamespaceLimitRange.objects.exists()


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {"app": "web"}, False),
        ({}, {"app": "web"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "1"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        (
            {
                "matchExpressions": [
                    {"key": "app", "operator": "In", "values": ["a", "web"]}
                ]
            },
            {"app": "web"},
            True,
        ),
        (
            {
                "matchExpressions": [
                    {"key": "app", "operator": "NotIn", "values": ["web"]}
                ]
            },
            {"app": "web"},
            False,
        ),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {}, True),
        (
            {"matchExpressions": [{"key": "tier", "operator": "Gt"}]},
            {"tier": "1"},
            False,
        ),
    ],
)
def test_label_selectors_match_as_the_api_server_does(selector, labels, expected):
    from recommender.cluster.kube_objects import selector_matches

    assert selector_matches(selector, labels) is expected


def test_an_adopted_workload_stays_vpawebs_and_warns_while_the_object_acts(
    kubernetes_cluster, api_server, django_user_model
):
    refresh(kubernetes_cluster)
    web = workload("web")
    adopt_policy(
        workload_id=web.pk,
        actor=django_user_model.objects.create_user("op"),
        now=NOW,
    )

    refresh(kubernetes_cluster, minutes=1)

    policy = workload("web").policy
    assert (policy.source, policy.mode) == ("vpaweb", "Off")  # not re-imported
    assert (policy.vpa_object, policy.vpa_object_mode) == ("shop/web-vpa", "Recreate")
    assert policy.has_vpa_conflict
    # The owner sets the object to Off: the conflict is gone.
    quiet = vpa_fixture("web-vpa")
    quiet["spec"]["updatePolicy"]["updateMode"] = "Off"
    api_server.remove("VerticalPodAutoscaler", "shop", "web-vpa")
    api_server.add(quiet)
    refresh(kubernetes_cluster, minutes=2)
    policy = workload("web").policy
    assert (policy.vpa_object_mode, policy.has_vpa_conflict) == ("Off", False)
    # And deletes it: no object is recorded any more.
    api_server.remove("VerticalPodAutoscaler", "shop", "web-vpa")
    refresh(kubernetes_cluster, minutes=3)
    policy = workload("web").policy
    assert (policy.vpa_object, policy.vpa_object_mode, policy.source) == (
        "",
        "",
        "vpaweb",
    )

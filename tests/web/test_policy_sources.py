"""The workload page says where each policy field comes from, and shows an ignored
annotation with its reason."""

from __future__ import annotations

from datetime import UTC, datetime

from recommender.models import Policy, PolicyRule, Workload
from recommender.services.policy.rules import materialize_policies
from tests.factories import make_cluster, make_workload

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def test_the_workload_page_names_the_rule_and_the_ignored_annotation(viewer_client):
    workload = make_workload(make_cluster(), "api", namespace="shop")
    Workload.objects.filter(pk=workload.pk).update(
        policy_annotations={"vpaweb.io/approval": "sometimes"}
    )
    PolicyRule.objects.create(
        name="shop-initial", namespaces=["shop"], policy_fields={"mode": "Initial"}
    )
    materialize_policies(now=NOW, why="test")

    page = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()

    assert "<td><code>mode</code></td><td>namespace rule shop-initial</td>" in page
    assert "<td><code>profile</code></td><td>the default</td>" in page
    assert "Annotation <code>vpaweb.io/approval: sometimes</code> ignored" in page


def test_saving_the_form_makes_only_the_changed_fields_the_workloads_own(
    operator_client,
):
    workload = make_workload(make_cluster(), "api", namespace="shop")
    PolicyRule.objects.create(
        name="shop-initial", namespaces=["shop"], policy_fields={"mode": "Initial"}
    )
    materialize_policies(now=NOW, why="test")
    form = {
        "mode": "Initial",
        "profile": "vpa",
        "min_replicas": "3",
        "cp0-mode": "Auto",
        "cp0-controlled_cpu": "on",
        "cp0-controlled_memory": "on",
        "cp1-mode": "Auto",
        "cp1-controlled_cpu": "on",
        "cp1-controlled_memory": "on",
    }

    response = operator_client.post(f"/workloads/{workload.pk}/policy", form)
    assert response.status_code == 302

    policy = Policy.objects.get(workload=workload)
    assert (policy.min_replicas, policy.own_fields) == (3, ["min_replicas"])
    assert policy.provenance["mode"]["name"] == "shop-initial"

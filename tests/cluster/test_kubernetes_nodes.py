"""The adapter lists Nodes through the official client (``list_nodes``), against the
fake API server answering as the recordings in tests/fixtures/k8s-wire/nodes/ do:
paging, the shipped reader role's access, and the 403 of a role without nodes."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from recommender.cluster.base import ClusterSnapshot
from recommender.cluster.kubernetes import KubernetesAdapter
from recommender.cluster.nodes import FROM_API_SERVER
from recommender.cluster.scheduling import Taint
from tests.cluster.test_kubernetes_rbac import allowed_lists, cluster_role_rules
from tests.k8s_fake.nodes import recorded_nodes, recording
from tests.k8s_fake.plugin import FAST
from tests.k8s_fake.server import TOKEN, FakeApiServer, load_fixtures, write_kubeconfig

KI = 1024
EMPTY = ClusterSnapshot(workloads=())


def adapter_for(server: FakeApiServer, tmp_path: Path) -> KubernetesAdapter:
    config = write_kubeconfig(tmp_path / "config", {"fake": server}, current="fake")
    return KubernetesAdapter(
        cluster_name="fake", context="fake", kubeconfig=str(config), settings=FAST
    )


@pytest.fixture
def node_server():
    server = FakeApiServer(load_fixtures() + recorded_nodes()).start()
    yield server
    server.stop()


def get(server: FakeApiServer, path: str) -> tuple[int, Any]:
    request = urllib.request.Request(
        server.url + path, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_nodes_are_listed_page_by_page_with_allocatable_taints_and_cordon(
    node_server, tmp_path
):
    adapter = adapter_for(node_server, tmp_path)
    try:
        listing = adapter.list_nodes(EMPTY)
    finally:
        adapter.close()

    assert listing.source == FROM_API_SERVER and listing.problem == ""
    nodes = {n.name: n for n in listing.nodes or ()}
    assert sorted(nodes) == ["node-1", "wire-gp-a", "wire-gp-b", "wire-mem-a"]
    # Four nodes in pages of three (FAST): the second page asked with the token.
    pages = node_server.gets("/api/v1/nodes")
    assert [r.query.get("limit") for r in pages] == [["3"], ["3"]]
    assert "continue" not in pages[0].query and "continue" in pages[1].query
    gp_a, gp_b, mem_a = nodes["wire-gp-a"], nodes["wire-gp-b"], nodes["wire-mem-a"]
    # 3920m and 15242752Ki as recorded (not rounded to whole Mi).
    assert (gp_a.cpu_millicores, gp_a.memory_bytes, gp_a.pods) == (
        3920,
        15242752 * KI,
        110,
    )
    assert gp_a.label("node.kubernetes.io/instance-type") == "m5.xlarge"
    assert gp_a.label("karpenter.sh/nodepool") == "general"
    assert not gp_a.unschedulable and gp_b.unschedulable
    assert (mem_a.memory_bytes, mem_a.pods) == (31337116 * KI, 58)
    assert mem_a.taints == (
        Taint("workload", "memory", "NoSchedule"),
        Taint("node.kubernetes.io/not-ready", "", "NoSchedule"),
    )
    # The not-ready taint of a node without a kubelet is a condition, not the pool's.
    assert [t.is_hard for t in mem_a.taints] == [True, False]
    assert node_server.write_verbs() == []


def test_a_reader_without_list_nodes_gets_the_recorded_403_and_no_nodes(tmp_path):
    without_nodes = allowed_lists(cluster_role_rules()) - {("", "nodes")}
    server = FakeApiServer(
        load_fixtures() + recorded_nodes(), allowed=without_nodes
    ).start()
    try:
        status, body = get(server, "/api/v1/nodes")
        adapter = adapter_for(server, tmp_path)
        try:
            listing = adapter.list_nodes(EMPTY)
        finally:
            adapter.close()
    finally:
        server.stop()

    recorded = recording("07-sa-reader-node-list-403.json")["response"]
    assert status == recorded["status"] == 403
    assert {k: v for k, v in body.items() if k != "message"} == {
        k: v for k, v in recorded["body"].items() if k != "message"
    }
    # The same sentence, for the fake's user.
    assert (
        body["message"].split(" cannot ")[1]
        == recorded["body"]["message"].split(" cannot ")[1]
    )
    assert listing.nodes is None
    assert "HTTP 403" in listing.problem and 'cannot list resource "nodes"' in (
        listing.problem
    )


def test_one_node_by_name_a_missing_one_and_a_write_answer_as_recorded(node_server):
    status, body = get(node_server, "/api/v1/nodes/wire-mem-a")
    recorded = recording("12-sa-node-reader-node-get-200.json")["response"]
    assert (status, body) == (recorded["status"], recorded["body"])

    status, body = get(node_server, "/api/v1/nodes/wire-missing")
    recorded = recording("13-sa-node-reader-node-get-missing-404.json")["response"]
    assert (status, body) == (recorded["status"], recorded["body"])

    request = urllib.request.Request(
        node_server.url + "/api/v1/nodes/wire-gp-a",
        data=b'{"metadata": {"labels": {"x": "y"}}}',
        method="PATCH",
        headers={
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/merge-patch+json",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    body = json.loads(refused.value.read())
    recorded = recording("14-sa-node-reader-node-patch-403.json")["response"]
    assert refused.value.code == recorded["status"] == 403
    assert body["details"] == recorded["body"]["details"]
    assert body["message"].endswith(
        'cannot patch resource "nodes" in API group "" at the cluster scope'
    )


def test_a_page_of_nodes_has_the_recorded_shape(node_server):
    status, body = get(node_server, "/api/v1/nodes?limit=2")
    recorded = recording("06-node-list-admin-limit-2-continue-200.json")["response"]

    assert status == recorded["status"]
    assert (body["kind"], body["apiVersion"]) == ("NodeList", "v1")
    assert set(body["metadata"]) == set(recorded["body"]["metadata"])
    assert body["metadata"]["remainingItemCount"] == 2
    assert [i["metadata"]["name"] for i in body["items"]] == [
        i["metadata"]["name"] for i in recorded["body"]["items"]
    ]
    assert all("kind" not in i and "apiVersion" not in i for i in body["items"])
    rest_status, rest = get(
        node_server, f"/api/v1/nodes?limit=2&continue={body['metadata']['continue']}"
    )
    assert rest_status == 200 and "continue" not in rest["metadata"]
    assert [i["metadata"]["name"] for i in rest["items"]] == ["wire-gp-b", "wire-mem-a"]


def test_a_shard_or_an_opt_in_adapter_cannot_vouch_for_every_pod_on_a_node(
    node_server, tmp_path
):
    config = write_kubeconfig(
        tmp_path / "config", {"fake": node_server}, current="fake"
    )
    adapter = KubernetesAdapter(
        cluster_name="fake",
        context="fake",
        kubeconfig=str(config),
        settings=FAST,
        namespace_selector="vpaweb.io/enabled=true",
    )
    try:
        listing = adapter.list_nodes(adapter.discover())
    finally:
        adapter.close()
    assert listing.nodes and listing.pods is None

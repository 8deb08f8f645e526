"""Resolving the policies of chosen workloads reads them by their ids alone.

A shard's first contact resolves its new workloads in batches, before PostgreSQL has
statistics of the rows it has just inserted. With the shard's cluster and namespace
in the statement too, the planner went through the namespace's workloads and looked
each up among the policies: minutes a shard at 100,000 containers. The cluster and
namespace are checked on the rows read instead."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from recommender.models import Cluster, Policy, Workload
from recommender.services.policy.rules import policy_diffs

pytestmark = pytest.mark.django_db


def fleet(name: str, namespaces: tuple[str, ...]) -> Cluster:
    cluster = Cluster.objects.create(name=name, kind="simulated")
    rows = Workload.objects.bulk_create(
        Workload(
            cluster=cluster,
            kind=Workload.Kind.DEPLOYMENT,
            namespace=namespace,
            name=f"app-{i}",
            replicas=1,
            selector={},
            labels={},
        )
        for namespace in namespaces
        for i in range(5)
    )
    Policy.objects.bulk_create(Policy(workload=w) for w in rows)
    return cluster


def test_the_policies_of_chosen_workloads_are_read_by_their_ids_alone():
    shard = fleet("shard", ("big", "other"))
    elsewhere = fleet("elsewhere", ("big",))
    chosen = list(Workload.objects.values_list("pk", flat=True))
    with CaptureQueriesContext(connection) as queries:
        diffs = policy_diffs(workload_ids=chosen, cluster_id=shard.pk, namespace="big")
    reads = [
        q["sql"]
        for q in queries.captured_queries
        if 'FROM "recommender_policy"' in q["sql"]
    ]
    assert reads and not any(
        '"recommender_workload"."namespace"' in sql.split("WHERE", 1)[-1]
        or '"recommender_workload"."cluster_id"' in sql.split("WHERE", 1)[-1]
        for sql in reads
    ), reads
    # The shard's namespace only, as before: the other namespace and cluster not.
    # (Every new policy differs from what resolution gives it: its provenance.)
    resolved = Workload.objects.filter(pk__in=[d.workload_id for d in diffs])
    assert set(resolved.values_list("cluster_id", "namespace")) == {(shard.pk, "big")}
    assert elsewhere.pk not in {d.cluster_id for d in diffs}

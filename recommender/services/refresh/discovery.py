"""Discovery upsert: what a cluster adapter found becomes Workload, Container, Policy
and Checkpoint rows, and a map from pods to their workloads for the ingestion after.

A ``namespace`` makes the upsert one shard: the adapter listed only that namespace,
and only its workloads, containers and checkpoints are loaded, created, updated or
marked vanished. New namespaces are found by the periodic whole-cluster refresh
(``tasks.refresh_all_clusters``, docs/refresh.md "Shards"), which is also the only one
that moves ``Cluster.last_discovered_at``.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from recommender.cluster.base import ClusterSnapshot, PodInfo, WorkloadInfo
from recommender.models import Checkpoint, Cluster, Container, Policy, Workload
from recommender.models.bulk import STREAM_ROWS, insert_new
from recommender.services.policy.rules import (
    ANNOTATION_PREFIX,
    apply_diffs,
    policy_diffs,
)
from recommender.services.readmodels import changes
from recommender.services.readmodels.generation import note_admission_changes
from recommender.services.readmodels.pod_owners import PodOwners, load_pod_owners
from recommender.services.refresh import stored_json
from recommender.services.refresh.cluster_objects import (
    StoredWorkload,
    store_cluster_objects,
    stored_workloads,
)
from recommender.services.refresh.pods import (
    BATCH_KINDS,
    applied_resources,
    pods_requests,
    record_pods,
    record_running_hours,
    representative_pods,
)

logger = logging.getLogger(__name__)

# Rows per bulk statement: under every backend's parameter limit.
BATCH = 500
# The Workload columns discovery compares with what the adapter listed.
_WORKLOAD_FIELDS = (
    "uid",
    "selector",
    "replicas",
    "labels",
    "schedule",
    "policy_annotations",
)
# The Container columns discovery compares with the pod template and live pods.
_CONTAINER_FIELDS = (
    "kind",
    "position",
    "request_cpu_millicores",
    "request_memory_bytes",
    "limit_cpu_millicores",
    "limit_memory_bytes",
    "pods_request_cpu_millicores",
    "pods_request_memory_bytes",
    "template_resources",  # JSON: these two last (_upsert_containers)
    "resource_sources",
)
# Those of them that are JSON (read as text, parsed only to compare).
_WORKLOAD_JSON = frozenset({"selector", "labels", "policy_annotations"})
# How stale Workload.last_seen_at may be: an unchanged fleet rewrites it this often.
LAST_SEEN_RESOLUTION = timedelta(minutes=10)


@dataclass
class Discovery:
    """What one discovery pass found, keyed by database ids, for the ingestion steps."""

    cluster: Cluster
    now: datetime
    namespace: str | None
    # The workload of each pod: live ones, stored ones (owner references), and the
    # naming rule for pods discovery never saw (services/refresh/pods.py).
    pods: PodOwners = field(default_factory=PodOwners)
    # Workloads by (namespace, kind, name): the adapter's own resolution of an OOM's
    # pod.
    workload_by_key: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # Container (name, kind) of each discovered workload's pod template, by workload id.
    spec_names: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    counts: dict[str, Any] = field(default_factory=lambda: defaultdict(int))
    # One chunk of a first contact (services/refresh/chunking.py): the (namespace,
    # kind, name) of its workloads, the only ones read from the source. None: not a
    # chunk, the whole namespace (or cluster) is read.
    chunk_keys: frozenset[tuple[str, str, str]] | None = None
    # (workload id, node name) of each live pod scheduled on a node: what the
    # workloads' prices are taken from (services/refresh/node_prices.py).
    pod_nodes: list[tuple[int, str]] = field(default_factory=list)

    @property
    def pod_owner(self) -> dict[tuple[str, str], int]:
        """The workload of each live pod, by (namespace, pod)."""
        return self.pods.live

    def owner_of(
        self, namespace: str, pod: str, *, kind: str = "", name: str = ""
    ) -> int | None:
        """The workload id of a pod: the adapter's answer, else ``PodOwners``."""
        if kind and name:
            owner = self.workload_by_key.get((namespace, kind, name))
            if owner is not None:
                return owner
        return self.pods.owner_of(namespace, pod)


def _batches(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]


@transaction.atomic
def upsert_discovery(
    *,
    cluster: Cluster,
    snapshot: ClusterSnapshot,
    now: datetime,
    namespace: str | None = None,
) -> Discovery:
    """Store what discovery found (only ``namespace`` when given) and map pods to ids.

    New workloads get the policy their annotations and the policy rules give (mode
    Off and profile ``vpa`` when nothing selects them), and so do workloads whose
    labels or annotations changed; workloads no longer found become inactive and
    keep their history; every non-init container gets an empty
    checkpoint row up front, so every later write is a compare-and-swap update.
    """
    found = Discovery(cluster=cluster, now=now, namespace=namespace)
    of_shard = Workload.objects.filter(cluster=cluster)
    if namespace is not None:
        of_shard = of_shard.filter(namespace=namespace)
    # The stored rows as tuples (ORM objects per workload cost most of a cycle at
    # 100,000 containers): pk, is_active, then the fields compared, in
    # _WORKLOAD_FIELDS order, the JSON ones as their text (parsed only to compare,
    # below: Django's JSON decoding of every row cost a second at 65,000 workloads).
    # In no order: sorting by the model's ordering (a join and three text columns)
    # cost as long as reading the rows.
    existing = {
        (ns, kind, name): (pk, is_active, values)
        for pk, ns, kind, name, is_active, *values in of_shard.order_by()
        .annotate(**{f"{f}_text": stored_json.as_text(f) for f in _WORKLOAD_JSON})
        .values_list(
            "pk",
            "namespace",
            "kind",
            "name",
            "is_active",
            *(f"{f}_text" if f in _WORKLOAD_JSON else f for f in _WORKLOAD_FIELDS),
        )
        .iterator(chunk_size=STREAM_ROWS)
    }
    seen: dict[tuple[str, str, str], WorkloadInfo] = {}
    new_rows, changed = [], []
    for info in snapshot.workloads:
        if namespace is not None and info.namespace != namespace:
            # A shard's adapter lists only its namespace; another shard owns the rest.
            continue
        key = (info.namespace, info.kind, info.name)
        fields = {
            "uid": info.uid,
            "selector": info.selector,
            "replicas": info.replicas,
            "labels": info.labels,
            "schedule": info.schedule,
            "policy_annotations": policy_annotations(info.annotations),
        }
        stored = existing.get(key)
        if stored is None:
            new_rows.append(
                Workload(
                    cluster=cluster,
                    kind=info.kind,
                    namespace=info.namespace,
                    name=info.name,
                    first_seen_at=now,
                    last_seen_at=now,
                    is_active=True,
                    **fields,
                )
            )
        elif not stored[1] or _differs(stored[2], fields):
            # Only what differs from the stored row is written (docs/refresh.md).
            changed.append(
                Workload(pk=stored[0], is_active=True, last_seen_at=now, **fields)
            )
        seen[key] = info
    # A conflict skipped: a concurrent cycle (or shard) may have created it just now.
    # One JSON document a statement (bulk.insert_new), here and below: a new fleet's
    # rows in bulk_create's arrays cost PostgreSQL 2.5 times as long.
    insert_new(new_rows)
    Workload.objects.bulk_update(
        changed,
        [*_WORKLOAD_FIELDS, "is_active", "last_seen_at"],
        batch_size=BATCH,
    )
    vanished = [
        pk
        for key, (pk, is_active, _) in existing.items()
        if is_active and key not in seen
    ]
    for chunk in _batches(vanished):
        Workload.objects.filter(pk__in=chunk).update(is_active=False)
    # last_seen_at to LAST_SEEN_RESOLUTION: one statement, and rows only that often.
    # The webhook's staleness check reads last_seen_at: its caches reload these rows.
    stale = of_shard.filter(is_active=True, last_seen_at__lt=now - LAST_SEEN_RESOLUTION)
    touched = list(stale.values_list("pk", flat=True))
    if touched:
        stale.update(last_seen_at=now)
    if vanished:
        logger.info(
            "cluster %s shard %r: %d workloads vanished, marked inactive",
            cluster.name,
            namespace or "*",
            len(vanished),
        )
    found.counts["workloads_new"] = len(new_rows)
    found.counts["workloads_vanished"] = len(vanished)

    # What the rest of discovery reads of each workload, as tuples.
    workloads = stored_workloads(of_shard.filter(is_active=True))
    # The webhook's caches reload the workloads that appeared, changed, came back or
    # vanished, and those whose last_seen_at moved; the totals recompute all but the
    # last.
    written = [
        workloads[(w.namespace, w.kind, w.name)].pk
        for w in new_rows
        if (w.namespace, w.kind, w.name) in workloads
    ]
    written += [w.pk for w in changed] + vanished
    changes.note(written)
    note_admission_changes(cluster_id=cluster.pk, workload_ids=written + touched)
    with_policy = set(
        Policy.objects.filter(workload__in=of_shard).values_list(
            "workload_id", flat=True
        )
    )
    # New workloads start in Off mode (recommend only) with upstream's profile, then
    # take what their annotations and the policy rules give (below).
    new_policies = [w.pk for w in workloads.values() if w.pk not in with_policy]
    insert_new(
        [
            Policy(workload_id=pk, mode=Policy.Mode.OFF, profile="vpa", updated_at=now)
            for pk in new_policies
        ]
    )
    relabelled = _store_namespace_labels(cluster, snapshot, namespace)
    found.counts["policies_resolved"] = apply_diffs(
        policy_diffs(
            workload_ids=[
                *new_policies,
                *(w.pk for w in changed),
                *(w.pk for key, w in workloads.items() if key[0] in relabelled),
            ],
            cluster_id=cluster.pk,
            namespace=namespace,
        ),
        actor=None,
        actor_label="system",
        why="discovery",
        now=now,
    )
    store_cluster_objects(
        cluster=cluster,
        snapshot=snapshot,
        now=now,
        namespace=namespace,
        seen=seen,
        workloads=workloads,
        counts=found.counts,
    )
    # Each live pod with its workload id, in one pass over the snapshot's pods.
    live: dict[tuple[str, str], int] = {}
    live_pods: list[tuple[PodInfo, int]] = []
    for key, info in seen.items():
        workload_id = workloads[key].pk
        for pod in info.pods:
            live[(pod.namespace, pod.name)] = workload_id
            live_pods.append((pod, workload_id))
    _upsert_containers(found, seen, workloads)
    # The other pods' owners come with the live pods' rows: one read of the pods.
    stored_owners: dict[tuple[str, str], int] = {}
    pod_counts = record_pods(
        cluster_id=cluster.pk,
        namespace=namespace,
        now=now,
        pods=live_pods,
        batch=BATCH,
        batch_workload_ids={
            workloads[key].pk for key, info in seen.items() if info.kind in BATCH_KINDS
        },
        owners=stored_owners,
    )
    found.counts.update(pod_counts)
    # The live pods' owners first: the stored rows of those are not kept again.
    found.pods = load_pod_owners(
        cluster_id=cluster.pk,
        namespace=namespace,
        now=now,
        live=live,
        stored=stored_owners,
    )
    found.pod_nodes = [
        (workload_id, pod.node_name) for pod, workload_id in live_pods if pod.node_name
    ]
    found.counts["batch_hours_changed"] = record_running_hours(
        cluster_id=cluster.pk, namespace=namespace, now=now
    )
    found.counts["workloads"] = len(seen)
    if namespace is None:
        # Only a whole-cluster pass has seen every namespace; the fan-out schedules
        # the next one from this time.
        Cluster.objects.filter(pk=cluster.pk).update(last_discovered_at=now)
    return found


def _differs(stored: Sequence[Any], fields: dict[str, Any]) -> bool:
    """Whether a stored workload row (_WORKLOAD_FIELDS, JSON as text) differs from
    ``fields``: the plain columns first, then the JSON ones parsed."""
    for name, value in zip(_WORKLOAD_FIELDS, stored, strict=True):
        if name in _WORKLOAD_JSON:
            # Mostly distinct texts (labels, selectors): not kept by stored_json,
            # whose memo they would flush; policy annotations mostly "{}".
            value = (
                stored_json.parse(value)
                if name == "policy_annotations"
                else _json_value(value)
            )
        if value != fields[name]:
            return True
    return False


def _json_value(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def policy_annotations(annotations: dict[str, str]) -> dict[str, str]:
    """The annotations a policy reads (``vpaweb.io/*``), the only ones stored."""
    return {k: v for k, v in annotations.items() if k.startswith(ANNOTATION_PREFIX)}


def _store_namespace_labels(
    cluster: Cluster, snapshot: ClusterSnapshot, namespace: str | None
) -> set[str]:
    """Store the namespace labels the adapter listed; the namespaces whose labels
    changed (their workloads' rules are matched again)."""
    listed = dict(snapshot.namespace_labels)
    if namespace is not None:
        listed = {ns: labels for ns, labels in listed.items() if ns == namespace}
    stored = dict(
        Cluster.objects.filter(pk=cluster.pk)
        .values_list("namespace_labels", flat=True)
        .get()
        or {}
    )
    merged = {**stored, **listed}
    changed = {
        ns for ns in set(stored) | set(listed) if stored.get(ns) != merged.get(ns)
    }
    if changed:
        Cluster.objects.filter(pk=cluster.pk).update(namespace_labels=merged)
        cluster.namespace_labels = merged
    return changed


def _upsert_containers(
    found: Discovery,
    seen: dict[tuple[str, str, str], WorkloadInfo],
    workloads: dict[tuple[str, str, str], StoredWorkload],
) -> None:
    """Container and empty Checkpoint rows of the shard's workloads; the pod map."""
    cluster, now = found.cluster, found.now
    containers_of_cluster = Container.objects.filter(
        workload__cluster=cluster, workload__is_active=True
    )
    if found.namespace is not None:
        containers_of_cluster = containers_of_cluster.filter(
            workload__namespace=found.namespace
        )
    # The two JSON columns as text, parsed once per distinct text (stored_json.py);
    # each row as one tuple in _CONTAINER_FIELDS order, compared whole below. In no
    # order: the rows are only looked up.
    parse = stored_json.parse
    containers = {
        (workload_id, name): (
            pk,
            (*values, parse(template), parse(sources)),
        )
        for pk, workload_id, name, *values, template, sources in (
            containers_of_cluster.order_by()
            .annotate(
                template_text=stored_json.as_text("template_resources"),
                sources_text=stored_json.as_text("resource_sources"),
            )
            .values_list(
                "pk",
                "workload_id",
                "name",
                *_CONTAINER_FIELDS[:-2],
                "template_text",
                "sources_text",
            )
            .iterator(chunk_size=STREAM_ROWS)
        )
    }
    new_containers, changed_containers = [], []
    no_mean = (None, None)
    for key, info in seen.items():
        workload_id = workloads[key].pk
        found.workload_by_key[key] = workload_id
        found.spec_names[workload_id] = [(c.name, c.kind) for c in info.containers]
        representative = representative_pods(info.pods)
        # The mean request of the live pods: a pod resized in place counts its own.
        means = pods_requests(info.pods)
        for position, spec in enumerate(info.containers):
            # What the live pods carry (LimitRanger fills what the template leaves
            # out), and where each value came from.
            requests, limits, template, sources = applied_resources(
                spec, representative.get(spec.name)
            )
            mean_cpu, mean_memory = means.get(spec.name, no_mean)
            values = (
                spec.kind,
                position,
                requests.cpu_millicores,
                requests.memory_bytes,
                limits.cpu_millicores,
                limits.memory_bytes,
                mean_cpu,
                mean_memory,
                template,
                sources,
            )
            stored = containers.get((workload_id, spec.name))
            if stored is None:
                new_containers.append(
                    Container(
                        workload_id=workload_id,
                        name=spec.name,
                        **dict(zip(_CONTAINER_FIELDS, values, strict=True)),
                    )
                )
            elif stored[1] != values:
                changed_containers.append(
                    Container(
                        pk=stored[0],
                        **dict(zip(_CONTAINER_FIELDS, values, strict=True)),
                    )
                )
                changes.note([workload_id])
    changes.note(container.workload_id for container in new_containers)
    insert_new(new_containers)
    Container.objects.bulk_update(
        changed_containers, list(_CONTAINER_FIELDS), batch_size=BATCH
    )
    without_checkpoint = containers_of_cluster.filter(checkpoint__isnull=True).exclude(
        kind=Container.Kind.INIT
    )
    insert_new(
        [
            Checkpoint(container_id=pk, histogram_key="", state=b"", updated_at=now)
            for pk in without_checkpoint.values_list("pk", flat=True)
        ]
    )

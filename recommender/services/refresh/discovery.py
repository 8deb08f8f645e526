"""Discovery upsert: what a cluster adapter found becomes Workload, Container, Policy
and Checkpoint rows, and a map from pods to their workloads for the ingestion after.

A ``namespace`` makes the upsert one shard: the adapter listed only that namespace,
and only its workloads, containers and checkpoints are loaded, created, updated or
marked vanished. New namespaces are found by the periodic whole-cluster refresh
(``tasks.refresh_all_clusters``, docs/refresh.md "Shards"), which is also the only one
that moves ``Cluster.last_discovered_at``.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    OuterRef,
    Q,
    QuerySet,
)

from recommender.cluster.base import ClusterSnapshot, PodInfo, WorkloadInfo
from recommender.errors import NotFound
from recommender.models import Checkpoint, Cluster, Container, Policy, Workload
from recommender.models.bulk import STREAM_ROWS, insert_new, update_many
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
    REWRITE_BATCH,
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
# What ``Workload.discovered_digest`` covers besides the adapter's change marker: the
# columns compared, and this version, raised whenever how discovery computes what it
# stores of a workload, its containers or its pods changes (a stored digest then
# matches no more, and every workload is compared once again).
DIGEST_VERSION = 1
_DIGEST_PREFIX = f"{DIGEST_VERSION}\x1f{_WORKLOAD_FIELDS}\x1f{_CONTAINER_FIELDS}\x1f"
# Up to this many workloads compared, the containers read are theirs (and those
# whose checkpoint has no watermark, or none); past it, the shard's, as before.
READ_COMPARED_UP_TO = 10_000


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
    # The workloads with a container whose checkpoint has no watermark (met for the
    # first time: chunking.fresh_workloads), from the upsert's read of the
    # containers; None: not known, read when asked.
    fresh: frozenset[int] | None = None

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
    _read_cluster_columns(cluster, now=now, namespace=namespace)
    # The stored rows as tuples (ORM objects per workload cost most of a cycle at
    # 100,000 containers): pk, is_active, then the fields compared, in
    # _WORKLOAD_FIELDS order, the JSON ones as their text (parsed only to compare,
    # below: Django's JSON decoding of every row cost a second at 65,000 workloads);
    # then what the rest of discovery reads of each (_Stored): when nothing is
    # written, this one read serves it all (three statements before). In no order:
    # sorting by the model's ordering (a join and three text columns) cost as long
    # as reading the rows.
    existing: dict[tuple[str, str, str], tuple[int, bool, list[Any], _Stored]] = {
        (ns, kind, name): (pk, is_active, values, _Stored(*more))
        for pk, ns, kind, name, is_active, *values, more in _stored_rows(
            of_shard, now=now
        )
    }
    seen: dict[tuple[str, str, str], WorkloadInfo] = {}
    new_rows, changed = [], []
    # Workloads (ids) whose change marker is where the last compare left it: neither
    # they nor their containers and pods are compared again (docs/refresh.md,
    # "Change markers").
    skipped: set[int] = set()
    # Workloads compared and found equal whose marker moved: the new digest only.
    redigested: list[tuple[int, dict[str, Any]]] = []
    for info in snapshot.workloads:
        if namespace is not None and info.namespace != namespace:
            # A shard's adapter lists only its namespace; another shard owns the rest.
            continue
        key = (info.namespace, info.kind, info.name)
        seen[key] = info
        digest = discovered_digest(info)
        stored = existing.get(key)
        if stored is not None and stored[1] and digest and digest == stored[3].digest:
            skipped.add(stored[0])
            continue
        fields = {
            "uid": info.uid,
            "selector": info.selector,
            "replicas": info.replicas,
            "labels": info.labels,
            "schedule": info.schedule,
            "policy_annotations": policy_annotations(info.annotations),
        }
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
                    discovered_digest=digest,
                    **fields,
                )
            )
        elif not stored[1] or _differs(stored[2], fields):
            # Only what differs from the stored row is written (docs/refresh.md).
            changed.append(
                Workload(
                    pk=stored[0],
                    is_active=True,
                    last_seen_at=now,
                    discovered_digest=digest,
                    **fields,
                )
            )
        elif digest != stored[3].digest:
            redigested.append((stored[0], {"discovered_digest": digest}))
    # A conflict skipped: a concurrent cycle (or shard) may have created it just now.
    # One JSON document a statement (bulk.insert_new), here and below: a new fleet's
    # rows in bulk_create's arrays cost PostgreSQL 2.5 times as long.
    insert_new(new_rows)
    Workload.objects.bulk_update(
        changed,
        [*_WORKLOAD_FIELDS, "is_active", "last_seen_at", "discovered_digest"],
        batch_size=BATCH,
    )
    # In the upsert's transaction, with the containers compared below: a digest is
    # stored only with what its compare stored.
    update_many(Workload, rows=redigested, batch=REWRITE_BATCH)
    vanished = [
        pk
        for key, (pk, is_active, _, _) in existing.items()
        if is_active and key not in seen
    ]
    for chunk in _batches(vanished):
        Workload.objects.filter(pk__in=chunk).update(is_active=False)
    # last_seen_at to LAST_SEEN_RESOLUTION: one statement, and rows only that often
    # (which ones, from the read above). The webhook's staleness check reads
    # last_seen_at: its caches reload these rows.
    rewritten = {w.pk for w in changed}
    touched = [
        pk
        for key, (pk, is_active, _, stored) in existing.items()
        if is_active and stored.is_stale and key in seen and pk not in rewritten
    ]
    if touched:
        of_shard.filter(
            is_active=True, last_seen_at__lt=now - LAST_SEEN_RESOLUTION
        ).update(last_seen_at=now)
    if vanished:
        logger.info(
            "cluster %s shard %r: %d workloads vanished, marked inactive",
            cluster.name,
            namespace or "*",
            len(vanished),
        )
    found.counts["workloads_new"] = len(new_rows)
    found.counts["workloads_vanished"] = len(vanished)

    # What the rest of discovery reads of each workload, as tuples: the rows read
    # above when none was written, else read again.
    if new_rows or changed or vanished:
        workloads = stored_workloads(of_shard.filter(is_active=True))
    else:
        workloads = {
            key: stored.workload
            for key, (_, is_active, _, stored) in existing.items()
            if is_active
        }
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
    # New workloads start in Off mode (recommend only) with upstream's profile, then
    # take what their annotations and the policy rules give (below). A workload the
    # read above did not find is new to this pass: one another writer just stored
    # has its policy already, and this insert skips it (a conflict).
    new_policies = [
        w.pk
        for key, w in workloads.items()
        if key not in existing or not existing[key][3].has_policy
    ]
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
    # The workloads compared, their containers and pods with them.
    compared = [w.pk for w in workloads.values() if w.pk not in skipped]
    # Past READ_COMPARED_UP_TO, every stored row of the shard is read, as before.
    read_only = compared if skipped and len(compared) <= READ_COMPARED_UP_TO else None
    _upsert_containers(found, seen, workloads, skipped=skipped, compared=read_only)
    # The other pods' owners come with the live pods' rows: one read of the pods.
    stored_owners: dict[tuple[str, str], int] = {}
    pod_counts = record_pods(
        cluster_id=cluster.pk,
        namespace=namespace,
        now=now,
        pods=live_pods,
        batch_workload_ids={
            workloads[key].pk for key, info in seen.items() if info.kind in BATCH_KINDS
        },
        owners=stored_owners,
        unchanged=skipped,
        compared=read_only,
    )
    found.counts.update(pod_counts)
    # The live pods' owners first: the stored rows of those are not kept again.
    found.pods = load_pod_owners(
        cluster_id=cluster.pk,
        namespace=namespace,
        now=now,
        live=live,
        stored=stored_owners,
        # The workloads as read above, when none was written since.
        workloads=None
        if new_rows or changed or vanished
        else [
            (ns, name, kind, pk, is_active)
            for (ns, kind, name), (pk, is_active, _, _) in existing.items()
        ],
    )
    found.pod_nodes = [
        (workload_id, pod.node_name) for pod, workload_id in live_pods if pod.node_name
    ]
    found.counts["batch_hours_changed"] = record_running_hours(
        cluster_id=cluster.pk, namespace=namespace, now=now
    )
    found.counts["workloads"] = len(seen)
    return found


# The Cluster columns discovery compares (their names are their columns'): read
# once for both of their steps (_store_namespace_labels, store_cluster_objects).
_CLUSTER_COLUMNS = ("namespace_labels", "vpa_objects_without_target")


def _read_cluster_columns(
    cluster: Cluster, *, now: datetime, namespace: str | None
) -> None:
    """Read ``_CLUSTER_COLUMNS`` into ``cluster``, in the upsert's transaction; a
    whole-cluster pass also sets ``last_discovered_at`` in the same statement (only
    it has seen every namespace; the fan-out schedules the next one from this time,
    and the upsert's transaction commits it with the rest or not at all)."""
    if namespace is not None:
        cluster.refresh_from_db(fields=_CLUSTER_COLUMNS)
        return
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(Cluster._meta.db_table)}"
            f" SET {quote('last_discovered_at')} = %s WHERE {quote('id')} = %s"
            f" RETURNING {', '.join(quote(c) for c in _CLUSTER_COLUMNS)}",
            [connection.ops.adapt_datetimefield_value(now), cluster.pk],
        )
        row = cursor.fetchone()
    if row is None:
        raise NotFound(f"cluster {cluster.pk} does not exist")
    # Both backends return the JSON columns as their text.
    for name, text in zip(_CLUSTER_COLUMNS, row, strict=True):
        setattr(cluster, name, stored_json.load(text))
    cluster.last_discovered_at = now


@dataclass(frozen=True, slots=True)
class _Stored:
    """What discovery's one read of a stored workload gives besides the fields it
    compares: the row as the rest of discovery reads it, whether its
    ``last_seen_at`` is due a rewrite (``LAST_SEEN_RESOLUTION``) and whether it has
    a policy."""

    workload: StoredWorkload
    is_stale: bool
    has_policy: bool
    digest: str


def _stored_rows(of_shard: QuerySet[Workload], *, now: datetime) -> Iterator[Any]:
    """The shard's stored workloads as tuples: pk, namespace, kind, name, is_active,
    the _WORKLOAD_FIELDS (JSON as text), then ``_Stored``'s fields as a tuple."""
    for row in (
        of_shard.order_by()
        .annotate(
            **{f"{f}_text": stored_json.as_text(f) for f in _WORKLOAD_JSON},
            conflicts_text=stored_json.as_text("hpa_conflicts"),
            budgets_text=stored_json.as_text("pod_disruption_budgets"),
            is_stale=ExpressionWrapper(
                Q(last_seen_at__lt=now - LAST_SEEN_RESOLUTION),
                output_field=BooleanField(),
            ),
            has_policy=Exists(Policy.objects.filter(workload=OuterRef("pk"))),
        )
        .values_list(
            "pk",
            "namespace",
            "kind",
            "name",
            "is_active",
            *(f"{f}_text" if f in _WORKLOAD_JSON else f for f in _WORKLOAD_FIELDS),
            "cluster_id",
            "conflicts_text",
            "budgets_text",
            "is_stale",
            "has_policy",
            "discovered_digest",
        )
        .iterator(chunk_size=STREAM_ROWS)
    ):
        head = row[: 5 + len(_WORKLOAD_FIELDS)]
        cluster_id, conflicts, budgets, is_stale, has_policy, digest = row[len(head) :]
        workload = StoredWorkload(
            pk=row[0],
            cluster_id=cluster_id,
            namespace=row[1],
            kind=row[2],
            name=row[3],
            hpa_conflicts=stored_json.parse(conflicts),
            pod_disruption_budgets=stored_json.parse(budgets),
        )
        yield (*head, (workload, bool(is_stale), bool(has_policy), digest))


def discovered_digest(info: WorkloadInfo) -> str:
    """``Workload.discovered_digest`` of what the adapter listed: its change marker
    with what discovery compares (``DIGEST_VERSION``); "" without a marker."""
    if not info.version:
        return ""
    text = f"{_DIGEST_PREFIX}{info.version}"
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


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
                else stored_json.load(value)
            )
        if value != fields[name]:
            return True
    return False


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
    # As upsert_discovery read them at its start, in its transaction.
    stored = dict(cluster.namespace_labels or {})
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
    *,
    skipped: Collection[int] = frozenset(),
    compared: Collection[int] | None = None,
) -> None:
    """Container and empty Checkpoint rows of the shard's workloads; the pod map.
    The containers of ``skipped`` workloads (their change marker as the last compare
    stored it) are not compared; with ``compared`` (the others), only theirs are
    read, and those whose checkpoint has no watermark or is missing
    (``Discovery.fresh``, the empty checkpoints below)."""
    cluster, now = found.cluster, found.now
    containers_of_cluster = Container.objects.filter(
        workload__cluster=cluster, workload__is_active=True
    )
    if found.namespace is not None:
        containers_of_cluster = containers_of_cluster.filter(
            workload__namespace=found.namespace
        )
    read = containers_of_cluster
    if compared is not None:
        read = read.filter(
            Q(workload_id__in=compared) | Q(checkpoint__last_sample_at__isnull=True)
        )
    # The two JSON columns as text, parsed once per distinct text (stored_json.py);
    # each row as one tuple in _CONTAINER_FIELDS order, compared whole below. In no
    # order: the rows are only looked up.
    parse = stored_json.parse
    # Also each one's checkpoint (a left join): the kind of those without one, which
    # get theirs below unless they are init containers; the workloads with a
    # checkpoint without a watermark (Discovery.fresh).
    no_checkpoint: dict[int, str] = {}
    fresh: set[int] = set()
    containers = {}
    for (
        pk,
        workload_id,
        name,
        *values,
        template,
        sources,
        checkpoint,
        unwatermarked,
    ) in (
        read.order_by()
        .annotate(
            template_text=stored_json.as_text("template_resources"),
            sources_text=stored_json.as_text("resource_sources"),
            unwatermarked=ExpressionWrapper(
                Q(checkpoint__last_sample_at__isnull=True),
                output_field=BooleanField(),
            ),
        )
        .values_list(
            "pk",
            "workload_id",
            "name",
            *_CONTAINER_FIELDS[:-2],
            "template_text",
            "sources_text",
            "checkpoint",
            "unwatermarked",
        )
        .iterator(chunk_size=STREAM_ROWS)
    ):
        containers[(workload_id, name)] = (
            pk,
            (*values, parse(template), parse(sources)),
        )
        if checkpoint is None:
            no_checkpoint[pk] = values[0]
        elif unwatermarked:
            fresh.add(workload_id)
    new_containers, changed_containers = [], []
    no_mean = (None, None)
    for key, info in seen.items():
        workload_id = workloads[key].pk
        found.workload_by_key[key] = workload_id
        found.spec_names[workload_id] = [(c.name, c.kind) for c in info.containers]
        if workload_id in skipped:
            continue
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
                if stored[0] in no_checkpoint:
                    no_checkpoint[stored[0]] = spec.kind
                changed_containers.append(
                    Container(
                        pk=stored[0],
                        **dict(zip(_CONTAINER_FIELDS, values, strict=True)),
                    )
                )
                changes.note([workload_id])
    changes.note(container.workload_id for container in new_containers)
    insert_new(new_containers)
    # One statement for up to REWRITE_BATCH rows (bulk.update_many): a CronJob's
    # containers are rewritten whenever its runs come or go (their pods' mean
    # requests), thousands a pass at 100,000 containers, and Django's bulk_update
    # builds a CASE of every row for every field.
    update_many(
        Container,
        rows=[
            (c.pk, {name: getattr(c, name) for name in _CONTAINER_FIELDS})
            for c in changed_containers
        ],
        batch=REWRITE_BATCH,
    )
    without_checkpoint = [
        pk for pk, kind in no_checkpoint.items() if kind != Container.Kind.INIT
    ]
    # Their new, empty checkpoints (below) have no watermark either.
    by_pk = {pk: workload_id for (workload_id, _), (pk, _) in containers.items()}
    fresh.update(by_pk[pk] for pk in without_checkpoint)
    fresh.update(c.workload_id for c in new_containers if c.kind != Container.Kind.INIT)
    found.fresh = frozenset(fresh)
    if new_containers:
        # Their keys are not read back by the insert: the containers without a
        # checkpoint read again, these among them.
        without_checkpoint = list(
            containers_of_cluster.filter(checkpoint__isnull=True)
            .exclude(kind=Container.Kind.INIT)
            .values_list("pk", flat=True)
        )
    insert_new(
        [
            Checkpoint(container_id=pk, histogram_key="", state=b"", updated_at=now)
            for pk in without_checkpoint
        ]
    )

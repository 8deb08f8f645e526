"""What discovery found besides workloads: VerticalPodAutoscaler objects imported as
policies, HPA conflicts and PodDisruptionBudgets per workload, LimitRanges per
namespace. Called by ``discovery.upsert_discovery`` inside its transaction, for the
same shard (one namespace, or the whole cluster)."""
# Precedence of a VPA object over vpaweb's own policy (docs/kubernetes.md):
#
# - a policy an operator changed or adopted in vpaweb (``updated_by`` set, or a
#   ``policy.update`` / ``policy.adopt`` audit event) is never overwritten: vpaweb's
#   policy wins over the cluster's object;
# - otherwise the VPA object targeting the workload (the first by name if several do)
#   sets mode, container policies and min replicas, with source ``vpa-object``, and an
#   audit event ``policy.import`` records each change. Such a policy MIRRORS the object:
#   it is shown with the object's mode and is never ``Policy.is_actionable``, so
#   vpaweb's webhook and updater leave the workload to the upstream VPA;
# - a policy imported from a VPA object that is gone goes back to vpaweb's default (mode
#   Off, no container policies), so nothing acts on a policy nobody owns.
#
# Every policy (mirrored or vpaweb's) also records which object targets its workload and
# that object's mode (``Policy.vpa_object`` / ``vpa_object_mode``): a vpaweb policy next
# to an object in a non-Off mode shows a conflict (``Policy.has_vpa_conflict``).
#
# Importing writes only vpaweb's database: nothing is ever written to the cluster.

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from recommender.cluster.base import (
    ClusterSnapshot,
    VpaObject,
    WorkloadInfo,
    WorkloadKey,
)
from recommender.cluster.kube_objects import hpa_conflicts, selector_matches
from recommender.engine.capping import (
    MODE_OFF,
    LimitRangeItem,
    combine_limit_ranges,
    select_container_policy,
)
from recommender.engine.resources import RESOURCE_NAMES
from recommender.errors import InvalidInput
from recommender.models import (
    AuditEvent,
    Cluster,
    NamespaceLimitRange,
    Policy,
    Workload,
)
from recommender.models.bulk import STREAM_ROWS
from recommender.services.access.audit import Action, record_audit
from recommender.services.advice.limits import item_from_dict, item_to_dict
from recommender.services.policy.validation import (
    CONTAINER_POLICY_KEYS,
    parse_container_policies,
    validate_container_policies,
)
from recommender.services.readmodels.generation import note_admission_changes
from recommender.services.refresh import stored_json

logger = logging.getLogger(__name__)

# The policy fields a VPA object sets.
IMPORTED_FIELDS = ("mode", "container_policies", "min_replicas", "source")
# What discovery reads of a policy (the rest, JSON mostly, is not loaded).
_POLICY_COLUMNS = (
    "pk",
    "workload_id",
    *IMPORTED_FIELDS,
    "vpa_object",
    "vpa_object_mode",
    "updated_by_id",
    "updated_at",
)
# vpaweb's own default, restored when the imported VPA object is gone.
DEFAULT_POLICY: dict[str, Any] = {
    "mode": Policy.Mode.OFF,
    "container_policies": [],
    "min_replicas": None,
    "source": Policy.Source.VPAWEB,
}


@dataclass
class StoredWorkload:
    """A stored workload as discovery reads it (a row as a tuple, not an ORM object:
    at 100,000 containers those cost seconds a cycle), with the two columns
    ``store_cluster_objects`` compares."""

    pk: int
    cluster_id: int
    namespace: str
    kind: str
    name: str
    hpa_conflicts: Any
    pod_disruption_budgets: Any

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"

    def as_model(self) -> Workload:
        """An unsaved Workload with this row's key columns (for a foreign key)."""
        return Workload(
            pk=self.pk,
            cluster_id=self.cluster_id,
            namespace=self.namespace,
            kind=self.kind,
            name=self.name,
        )


def stored_workloads(rows: QuerySet[Workload]) -> dict[WorkloadKey, StoredWorkload]:
    """``rows`` by (namespace, kind, name), in one statement; the two JSON columns
    parsed once per distinct text (mostly ``[]``: ``stored_json.py``)."""
    return {
        (ns, kind, name): StoredWorkload(
            pk=pk,
            cluster_id=cluster_id,
            namespace=ns,
            kind=kind,
            name=name,
            hpa_conflicts=stored_json.parse(conflicts),
            pod_disruption_budgets=stored_json.parse(budgets),
        )
        for pk, cluster_id, ns, kind, name, conflicts, budgets in rows.annotate(
            conflicts_text=stored_json.as_text("hpa_conflicts"),
            budgets_text=stored_json.as_text("pod_disruption_budgets"),
        )
        .values_list(
            "pk",
            "cluster_id",
            "namespace",
            "kind",
            "name",
            "conflicts_text",
            "budgets_text",
        )
        .iterator(chunk_size=STREAM_ROWS)
    }


def store_cluster_objects(
    *,
    cluster: Cluster,
    snapshot: ClusterSnapshot,
    now: datetime,
    namespace: str | None,
    seen: Mapping[WorkloadKey, WorkloadInfo],
    workloads: Mapping[WorkloadKey, StoredWorkload],
    counts: dict[str, Any],
) -> None:
    """Import VPA objects, then store HPA conflicts, PDBs and LimitRanges."""

    def in_shard(ns: str) -> bool:
        return namespace is None or ns == namespace

    def warn(message: str) -> None:
        logger.warning("cluster %s: %s", cluster.name, message)
        counts["object_warnings"] += 1

    vpas = [v for v in snapshot.vpas if in_shard(v.namespace)]
    hpas: dict[WorkloadKey, list[dict[str, Any]]] = defaultdict(list)
    for hpa in snapshot.horizontal_pod_autoscalers:
        if in_shard(hpa["namespace"]):
            target = (hpa["namespace"], hpa["target_kind"], hpa["target_name"])
            hpas[target].append(hpa)
    # The policies this pass can touch or read: of the workloads a VPA object or an
    # HPA targets, and those that record or mirror a VPA object (to clear it when
    # it is gone). Every other policy stays as it is (at 100,000 containers loading
    # all of them was seconds per cycle).
    targeted = {(v.namespace, v.target_kind, v.target_name) for v in vpas} | set(hpas)
    seen_ids = {workloads[key].pk for key in seen}
    of_shard = Policy.objects.filter(workload__cluster=cluster)
    if namespace is not None:
        of_shard = of_shard.filter(workload__namespace=namespace)
    policies = {
        p.workload_id: p
        for p in of_shard.filter(
            Q(workload_id__in=[workloads[key].pk for key in targeted & seen.keys()])
            | ~Q(vpa_object="")
            | Q(source=Policy.Source.VPA_OBJECT)
        ).only(*_POLICY_COLUMNS)
        if p.workload_id in seen_ids
    }
    # What the webhook reads of each policy, before this pass changes any.
    policy_before = {pk: _admission_fields(p) for pk, p in policies.items()}
    _import_vpa_objects(
        vpas=vpas,
        now=now,
        seen=seen,
        workloads=workloads,
        policies=policies,
        counts=counts,
        warn=warn,
    )
    _record_vpa_objects_without_target(
        cluster=cluster,
        vpas=vpas,
        namespace=namespace,
        seen=seen,
        counts=counts,
    )
    budgets: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for pdb in snapshot.pod_disruption_budgets:
        if in_shard(pdb["namespace"]):
            budgets[pdb["namespace"]].append(pdb)
    changed = []
    with_conflicts = 0
    for key, info in seen.items():
        workload = workloads[key]
        # Most workloads have no HPA and no PDB in their namespace: nothing to match.
        targeting = hpas.get(key)
        conflicts = (
            _hpa_conflicts_of(info, targeting, policies.get(workload.pk))
            if targeting
            else []
        )
        in_namespace = budgets.get(info.namespace)
        pdbs = (
            sorted(
                (pdb for pdb in in_namespace if _selects(pdb, info)),
                key=lambda pdb: pdb["name"],
            )
            if in_namespace
            else []
        )
        with_conflicts += bool(conflicts)
        if (
            workload.hpa_conflicts != conflicts
            or workload.pod_disruption_budgets != pdbs
        ):
            workload.hpa_conflicts = conflicts
            workload.pod_disruption_budgets = pdbs
            changed.append(
                Workload(
                    pk=workload.pk,
                    hpa_conflicts=conflicts,
                    pod_disruption_budgets=pdbs,
                )
            )
    if seen:
        counts["workloads_with_hpa_conflicts"] += with_conflicts
    Workload.objects.bulk_update(
        changed, ["hpa_conflicts", "pod_disruption_budgets"], batch_size=500
    )
    # The webhook reads the HPA conflicts and the policies: its caches reload these.
    note_admission_changes(
        cluster_id=cluster.pk,
        workload_ids=[w.pk for w in changed]
        + [
            pk
            for pk, policy in policies.items()
            if _admission_fields(policy) != policy_before[pk]
        ],
    )
    _store_limit_ranges(
        cluster=cluster,
        ranges=[r for r in snapshot.limit_ranges if in_shard(r["namespace"])],
        now=now,
        namespace=namespace,
        counts=counts,
        warn=warn,
    )


def _admission_fields(policy: Policy) -> tuple[Any, ...]:
    """The columns of a policy this pass may change (all loaded: _POLICY_COLUMNS)."""
    return tuple(getattr(policy, f) for f in _POLICY_COLUMNS if f != "updated_at")


# --- VPA objects ----------------------------------------------------------------------


def _import_vpa_objects(
    *,
    vpas: list[VpaObject],
    now: datetime,
    seen: Mapping[WorkloadKey, WorkloadInfo],
    workloads: Mapping[WorkloadKey, StoredWorkload],
    policies: dict[int, Policy],
    counts: dict[str, Any],
    warn: Callable[[str], None],
) -> None:
    """Each workload's VPA object into its policy, by the precedence above."""
    by_target: dict[WorkloadKey, list[VpaObject]] = defaultdict(list)
    for vpa in sorted(vpas, key=lambda v: v.name):
        by_target[(vpa.namespace, vpa.target_kind, vpa.target_name)].append(vpa)
    _record_vpa_objects(by_target, seen=seen, workloads=workloads, policies=policies)
    candidates = [
        key
        for key in seen
        if workloads[key].pk in policies
        and (
            key in by_target
            or policies[workloads[key].pk].source == Policy.Source.VPA_OBJECT
        )
    ]
    edited = _edited_by_operators([workloads[key].pk for key in candidates], policies)
    for key in candidates:
        workload, policy = workloads[key], policies[workloads[key].pk]
        targeting = by_target.get(key, [])
        if workload.pk in edited:
            # vpaweb's operator decided; the VPA object does not override them.
            counts["vpa_objects_overridden"] += bool(targeting)
            continue
        if targeting:
            vpa = targeting[0]
            if len(targeting) > 1:
                warn(
                    f"{len(targeting)} VerticalPodAutoscalers target {workload}: "
                    f"imported {vpa.name}, ignored "
                    f"{', '.join(v.name for v in targeting[1:])}"
                )
            names = {c.name for c in seen[key].containers}
            values = _policy_of_vpa(vpa, container_names=names, warn=warn)
            if values is None:
                counts["vpa_objects_invalid"] += 1
                continue
            label = f"vpa-object:{vpa.namespace}/{vpa.name}"
            message = f"imported from VerticalPodAutoscaler {vpa.namespace}/{vpa.name}"
        elif policy.source == Policy.Source.VPA_OBJECT:
            values = DEFAULT_POLICY
            label = "system"
            message = "its VerticalPodAutoscaler is gone: back to mode Off"
        else:
            continue
        changed = [f for f in IMPORTED_FIELDS if getattr(policy, f) != values[f]]
        if not changed:
            continue
        before = {f: getattr(policy, f) for f in changed}
        for field in changed:
            setattr(policy, field, values[field])
        policy.updated_at = now
        policy.save(update_fields=[*changed, "updated_at"])
        record_audit(
            now=now,
            actor_label=label,
            action=Action.POLICY_IMPORT,
            workload=workload.as_model(),
            object_type="policy",
            object_id=policy.pk,
            before=before,
            after={f: values[f] for f in changed},
            message=f"policy of {workload} {message}",
        )
        counts["policies_imported"] += 1
        logger.info("policy of %s %s: %s", workload, message, changed)


def _record_vpa_objects_without_target(
    *,
    cluster: Cluster,
    vpas: list[VpaObject],
    namespace: str | None,
    seen: Mapping[WorkloadKey, WorkloadInfo],
    counts: dict[str, Any],
) -> None:
    """Keep VPA objects whose target does not exist visible: counted in the run,
    logged, and stored on the cluster (dashboard overview, API) until they are gone.

    A shard replaces only its namespace's entries.
    """
    found = []
    for vpa in sorted(vpas, key=lambda v: (v.namespace, v.name)):
        if (vpa.namespace, vpa.target_kind, vpa.target_name) in seen:
            continue
        message = (
            f"VPA object {vpa.namespace}/{vpa.name} targets "
            f"{vpa.target_kind}/{vpa.target_name}, which does not exist"
        )
        if vpa.target_kind not in Workload.Kind.values:
            message += f" among the kinds vpaweb sizes ({', '.join(Workload.Kind)})"
        logger.warning("cluster %s: %s", cluster.name, message)
        found.append(
            {
                "namespace": vpa.namespace,
                "name": vpa.name,
                "target_kind": vpa.target_kind,
                "target_name": vpa.target_name,
                "message": message,
            }
        )
    counts["vpa_objects_without_target"] = len(found)
    # As the caller read them in its transaction (upsert_discovery refreshes them).
    current = cluster.vpa_objects_without_target or []
    kept = [
        entry
        for entry in current
        if namespace is not None and entry.get("namespace") != namespace
    ]
    stored = sorted(kept + found, key=lambda e: (e["namespace"], e["name"]))
    if stored != current:
        Cluster.objects.filter(pk=cluster.pk).update(vpa_objects_without_target=stored)
    cluster.vpa_objects_without_target = stored


def _record_vpa_objects(
    by_target: Mapping[WorkloadKey, list[VpaObject]],
    *,
    seen: Mapping[WorkloadKey, WorkloadInfo],
    workloads: Mapping[WorkloadKey, StoredWorkload],
    policies: dict[int, Policy],
) -> None:
    """Store on each policy which VPA object targets its workload, and its mode."""
    changed = []
    for key in seen:
        policy = policies.get(workloads[key].pk)
        if policy is None:
            continue
        targeting = by_target.get(key)
        ref = (
            (
                f"{targeting[0].namespace}/{targeting[0].name}",
                targeting[0].update_mode[:32],
            )
            if targeting
            else ("", "")
        )
        if (policy.vpa_object, policy.vpa_object_mode) != ref:
            policy.vpa_object, policy.vpa_object_mode = ref
            changed.append(policy)
    Policy.objects.bulk_update(
        changed, ["vpa_object", "vpa_object_mode"], batch_size=500
    )


def _edited_by_operators(
    workload_ids: list[int], policies: dict[int, Policy]
) -> set[int]:
    """Workloads whose policy someone changed in vpaweb (API, dashboard, admin)."""
    edited = {pk for pk in workload_ids if policies[pk].updated_by_id is not None}
    # A token made on the command line acts with no user: its edits are audited.
    edited.update(
        AuditEvent.objects.filter(
            action__in=(Action.POLICY_UPDATE, Action.POLICY_ADOPT),
            workload_id__in=workload_ids,
        ).values_list("workload_id", flat=True)
    )
    return edited


def _policy_of_vpa(
    vpa: VpaObject, *, container_names: set[str], warn: Callable[[str], None]
) -> dict[str, Any] | None:
    """The policy fields a VPA object sets, or None (warned) when it cannot be used."""
    where = f"VerticalPodAutoscaler {vpa.namespace}/{vpa.name}"
    if vpa.update_mode not in Policy.Mode.values:
        warn(
            f"{where}: spec.updatePolicy.updateMode {vpa.update_mode!r} is not one of "
            f"{', '.join(Policy.Mode.values)}; its policy is not imported"
        )
        return None
    if vpa.min_replicas is not None and vpa.min_replicas < 1:
        warn(
            f"{where}: spec.updatePolicy.minReplicas {vpa.min_replicas} is not "
            "positive; its policy is not imported"
        )
        return None
    entries = []
    for position, raw in enumerate(vpa.container_policies):
        entry = {k: v for k, v in raw.items() if k in CONTAINER_POLICY_KEYS}
        dropped = sorted(set(raw) - set(entry))
        if dropped:
            warn(
                f"{where}: spec.resourcePolicy.containerPolicies[{position}]: "
                f"{', '.join(dropped)} not imported (vpaweb does not use them)"
            )
        name = entry.get("containerName")
        if name != "*" and name not in container_names:
            continue  # upstream ignores the policy of a container the pod lacks
        entries.append(entry)
    try:
        canonical = validate_container_policies(
            entries, container_names=container_names
        )
    except InvalidInput as exc:
        warn(f"{where}: spec.resourcePolicy.{exc.message}; its policy is not imported")
        return None
    return {
        "mode": vpa.update_mode,
        "container_policies": canonical,
        "min_replicas": vpa.min_replicas,
        "source": Policy.Source.VPA_OBJECT,
    }


# --- HPAs and PDBs --------------------------------------------------------------------


def _hpa_conflicts_of(
    info: WorkloadInfo, hpas: list[dict[str, Any]], policy: Policy | None
) -> list[dict[str, Any]]:
    """``[{"name", "resources", "min_replicas", "max_replicas", "metrics"}]`` of
    the HPAs scaling on a resource the policy controls for some container (a
    container policy with mode Off controls none); ``metrics`` are their resource
    metrics on those resources, as ``hpa_of`` reads them."""
    if not hpas:
        return []
    try:
        container_policies = parse_container_policies(
            policy.container_policies if policy else []
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        container_policies = []  # a broken stored policy: as if it had none
    conflicts = []
    for hpa in sorted(hpas, key=lambda h: h["name"]):
        resources: set[str] = set()
        for spec in info.containers:
            if spec.kind == "init":
                continue
            chosen = select_container_policy(container_policies, spec.name)
            if chosen is not None and chosen.mode == MODE_OFF:
                continue
            controlled = chosen.controlled_resources if chosen else RESOURCE_NAMES
            resources.update(
                hpa_conflicts(hpa, controlled_resources=controlled, container=spec.name)
            )
        if resources:
            conflicts.append(
                {
                    "name": hpa["name"],
                    "resources": sorted(resources),
                    # Its replica bounds, for the replicas it would run (what-if).
                    "min_replicas": hpa.get("min_replicas"),
                    "max_replicas": hpa.get("max_replicas"),
                    # The cpu/memory targets, for the HPA change that keeps its
                    # scaling when the requests change (services.advice.hpa).
                    "metrics": [
                        {
                            key: metric.get(key)
                            for key in (
                                "resource",
                                "container",
                                "target_type",
                                "average_utilization",
                                "average_value",
                            )
                        }
                        for metric in hpa.get("resource_metrics") or ()
                        if metric["resource"] in resources
                    ],
                }
            )
    return conflicts


def _selects(pdb: dict[str, Any], info: WorkloadInfo) -> bool:
    """Whether a PDB covers the workload's pods (its selector's labels if it has
    none running)."""
    if info.pods:
        return any(selector_matches(pdb["selector"], pod.labels) for pod in info.pods)
    labels = (info.selector or {}).get("matchLabels") or {}
    return bool(labels) and selector_matches(pdb["selector"], labels)


# --- LimitRanges ----------------------------------------------------------------------


def _store_limit_ranges(
    *,
    cluster: Cluster,
    ranges: list[dict[str, Any]],
    now: datetime,
    namespace: str | None,
    counts: dict[str, Any],
    warn: Callable[[str], None],
) -> None:
    """One NamespaceLimitRange row per namespace with Container or Pod items."""
    by_namespace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    # By name: the API lists a namespace's objects so, and "last Default" wins.
    for limit_range in sorted(ranges, key=lambda r: (r["namespace"], r["name"])):
        by_namespace[limit_range["namespace"]].append(limit_range)
    wanted: dict[str, dict[str, Any]] = {}
    for ns, objects in by_namespace.items():
        items: list[LimitRangeItem] = []
        names = []
        for limit_range in objects:
            try:
                parsed = [item_from_dict(item) for item in limit_range["limits"]]
            except ValueError as exc:
                warn(f"LimitRange {ns}/{limit_range['name']}: {exc}; not applied")
                continue
            items += [item for item in parsed if item is not None]
            names.append(limit_range["name"])
        container = combine_limit_ranges(items, "Container")
        pod = combine_limit_ranges(items, "Pod")
        if container is None and pod is None:
            continue
        wanted[ns] = {
            "container_item": item_to_dict(container),
            "pod_item": item_to_dict(pod),
            "sources": names,
        }
    rows = NamespaceLimitRange.objects.filter(cluster=cluster)
    if namespace is not None:
        rows = rows.filter(namespace=namespace)
    existing = {row.namespace: row for row in rows}
    gone = [row.pk for ns, row in existing.items() if ns not in wanted]
    NamespaceLimitRange.objects.filter(pk__in=gone).delete()
    new, changed = [], []
    for ns, values in wanted.items():
        row = existing.get(ns)
        if row is None:
            new.append(
                NamespaceLimitRange(
                    cluster=cluster, namespace=ns, updated_at=now, **values
                )
            )
        elif any(getattr(row, f) != v for f, v in values.items()):
            for field, value in values.items():
                setattr(row, field, value)
            row.updated_at = now
            changed.append(row)
    NamespaceLimitRange.objects.bulk_create(new, ignore_conflicts=True)
    NamespaceLimitRange.objects.bulk_update(
        changed, ["container_item", "pod_item", "sources", "updated_at"]
    )
    counts["limit_range_namespaces"] = len(wanted)

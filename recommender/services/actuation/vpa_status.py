"""The drop-in path: vpaweb as the recommender of existing upstream VPA objects."""
# A VerticalPodAutoscaler whose ``spec.recommenders`` names vpaweb
# (``VPAWEB_RECOMMENDER_NAME``, default ``vpaweb``) is left by upstream's own
# recommender to vpaweb: each updater cycle writes vpaweb's recommendation for the
# object's target into the object's ``status``, in the format upstream's recommender
# writes (``VerticalPodAutoscalerStatus`` in upstream
# ``pkg/apis/autoscaling.k8s.io/v1/types.go``), so upstream's admission controller and
# updater act on vpaweb's numbers:
#
# - ``recommendation.containerRecommendations[]``: ``{containerName, target, lowerBound,
#   upperBound, uncappedTarget}`` as canonical Kubernetes quantities (``"587m"``,
#   ``"250Mi"``), sorted by container name: each container's latest stored
#   recommendation, capped by the workload's policy as the refresh capped it (for a
#   mirrored policy, the object's own container policies: upstream's
#   ``ApplyVPAPolicy`` in ``pkg/utils/vpa/capping.go``);
#   containers whose policy mode is Off and plain init containers get none;
# - ``conditions`` as upstream's ``UpdateConditions`` sets them, sorted by type:
#   ``RecommendationProvided`` True when some container has a recommendation (False
#   otherwise, with ``NoPodsMatched`` / ``No pods match this VPA object`` when discovery
#   saw no running pod of the target), ``NoPodsMatched`` True while no pod matches;
#   ``lastTransitionTime`` kept while a condition's status does not flip; other
#   conditions kept, except ``ConfigUnsupported`` and ``ConfigDeprecated`` (deleted, as
#   upstream does once the object is loaded).
#
# Only objects naming vpaweb whose target vpaweb knows are ever written, and only when
# the status would change (compared by value, as upstream compares semantically), so the
# steady state sends nothing. The write is a merge patch of the ``status`` subresource
# (``ClusterWriter.write_vpa_status``, as recorded in k8s-wire admission/f4); a
# recommendation that disappears is removed (``recommendation: null``). The caller
# (``apply.run_cycle``) writes only when ``control.write_block_reason`` allows it: the
# kill switch, a paused cluster and dry run stop these writes like every other.

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from recommender.cluster.base import ClusterSnapshot, VpaObject, WorkloadKey
from recommender.cluster.writer import ClusterWriter
from recommender.engine.capping import (
    MODE_OFF,
    RecommendationLike,
    select_container_policy,
)
from recommender.engine.quantity import (
    format_cpu,
    format_memory,
    parse_cpu_millicores,
    parse_memory_bytes,
    resource_list,
)
from recommender.models import Cluster, Container, Workload
from recommender.services.actuation import permissions
from recommender.services.actuation.proposals import REC_FIELDS, RecBounds
from recommender.services.policy.validation import parse_container_policies

logger = logging.getLogger(__name__)

RECOMMENDATION_PROVIDED = "RecommendationProvided"
NO_PODS_MATCHED = "NoPodsMatched"
NO_PODS_MESSAGE = "No pods match this VPA object"
# Conditions upstream's recommender deletes once it has loaded the object.
DROPPED_CONDITIONS = ("ConfigUnsupported", "ConfigDeprecated")
QUANTITY_FIELDS = ("target", "lowerBound", "upperBound", "uncappedTarget")


def names_vpaweb(vpa: VpaObject, name: str | None = None) -> bool:
    """Whether the object's ``spec.recommenders`` names vpaweb's recommender."""
    return (name or settings.RECOMMENDER_NAME) in vpa.recommenders


def objects_naming_vpaweb(vpas: Iterable[VpaObject]) -> list[VpaObject]:
    """The objects whose status vpaweb may write."""
    return [vpa for vpa in vpas if names_vpaweb(vpa)]


def container_recommendation_entry(
    name: str, rec: RecommendationLike
) -> dict[str, Any]:
    """One ``containerRecommendations[]`` entry, upstream's fields and quantities."""
    return {
        "containerName": name,
        "target": resource_list(rec.target),
        "lowerBound": resource_list(rec.lower_bound),
        "upperBound": resource_list(rec.upper_bound),
        "uncappedTarget": resource_list(rec.uncapped_target),
    }


def _time_text(when: datetime) -> str:
    """A metav1.Time: UTC, whole seconds, ``Z`` (admission/f4)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(
    old: Mapping[str, Mapping[str, Any]],
    kind: str,
    status: bool,
    now: datetime,
    reason: str = "",
    message: str = "",
) -> dict[str, Any]:
    """Upstream's ``Conditions.Set``: the transition time moves only on a flip."""
    value = "True" if status else "False"
    previous = old.get(kind)
    since = (
        previous.get("lastTransitionTime")
        if previous is not None and previous.get("status") == value
        else None
    ) or _time_text(now)
    condition: dict[str, Any] = {
        "type": kind,
        "status": value,
        "lastTransitionTime": since,
    }
    if reason:
        condition["reason"] = reason
    if message:
        condition["message"] = message
    return condition


def build_status(
    *,
    current: Mapping[str, Any],
    entries: list[dict[str, Any]],
    pods_matched: bool,
    now: datetime,
) -> dict[str, Any]:
    """The ``status`` to write: recommendation and conditions (upstream's
    ``UpdateConditions`` and ``AsStatus``) from the object's ``current`` status."""
    old: dict[str, Mapping[str, Any]] = {}
    for item in current.get("conditions") or ():
        if isinstance(item, Mapping) and isinstance(item.get("type"), str):
            old[item["type"]] = item
    conditions = {
        kind: dict(item) for kind, item in old.items() if kind not in DROPPED_CONDITIONS
    }
    reason = message = ""
    if pods_matched:
        conditions.pop(NO_PODS_MATCHED, None)
    else:
        reason, message = NO_PODS_MATCHED, NO_PODS_MESSAGE
        conditions[NO_PODS_MATCHED] = _condition(
            old, NO_PODS_MATCHED, True, now, reason, message
        )
    if entries:
        conditions[RECOMMENDATION_PROVIDED] = _condition(
            old, RECOMMENDATION_PROVIDED, True, now
        )
    else:
        conditions[RECOMMENDATION_PROVIDED] = _condition(
            old, RECOMMENDATION_PROVIDED, False, now, reason, message
        )
    return {
        "conditions": [conditions[kind] for kind in sorted(conditions)],
        "recommendation": (
            {"containerRecommendations": sorted(entries, key=_by_name)}
            if entries
            else None
        ),
    }


def _by_name(entry: Mapping[str, Any]) -> str:
    return str(entry.get("containerName", ""))


def _canonical_quantities(values: Any) -> Any:
    """A ResourceList with each quantity in canonical form (``"0.5"`` → ``"500m"``)."""
    if not isinstance(values, Mapping):
        return values
    out: dict[str, Any] = {}
    for resource, text in values.items():
        out[resource] = text
        try:
            if resource == "cpu":
                out[resource] = format_cpu(parse_cpu_millicores(str(text)))
            elif resource == "memory":
                out[resource] = format_memory(parse_memory_bytes(str(text)))
        except (TypeError, ValueError):
            pass  # compared as sent
    return out


def _comparable(status: Mapping[str, Any]) -> tuple[Any, Any]:
    """The parts vpaweb writes, with quantities compared by value."""
    recommendation = status.get("recommendation")
    entries = None
    if isinstance(recommendation, Mapping):
        entries = [
            {
                key: _canonical_quantities(value) if key in QUANTITY_FIELDS else value
                for key, value in entry.items()
            }
            for entry in recommendation.get("containerRecommendations") or ()
            if isinstance(entry, Mapping)
        ]
        entries = sorted(entries, key=_by_name) or None
    conditions = sorted(
        (
            dict(item)
            for item in status.get("conditions") or ()
            if isinstance(item, Mapping)
        ),
        key=lambda item: str(item.get("type", "")),
    )
    return entries, conditions


def is_unchanged(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    """Whether writing ``desired`` would change nothing of what vpaweb owns."""
    return _comparable(current) == _comparable(desired)


@dataclass
class VpaStatusCounts:
    """What one pass did."""

    written: int = 0
    unchanged: int = 0
    failed: int = 0
    without_target: int = 0
    blocked: int = 0  # not sent: no permission, or stopped after a 403


def _live(phase: str, deleting: bool) -> bool:
    # Upstream's recommender lists pods without the Pending ones.
    return phase not in ("Pending", "Succeeded", "Failed") and not deleting


def desired_statuses(
    cluster: Cluster, snapshot: ClusterSnapshot, *, now: datetime
) -> tuple[list[tuple[VpaObject, dict[str, Any]]], int]:
    """The status each object naming vpaweb should have, and how many objects naming
    vpaweb have a target vpaweb does not know (two queries whatever their number)."""
    named = objects_naming_vpaweb(snapshot.vpas)
    if not named:
        return [], 0
    keys: set[WorkloadKey] = {
        (v.namespace, v.target_kind, v.target_name) for v in named
    }
    workloads: dict[WorkloadKey, Workload] = {}
    for workload in (
        Workload.objects.filter(
            cluster=cluster,
            is_active=True,
            namespace__in={k[0] for k in keys},
            name__in={k[2] for k in keys},
        )
        .select_related("policy")
        .only("id", "namespace", "kind", "name", "policy__container_policies")
    ):
        key = (workload.namespace, workload.kind, workload.name)
        if key in keys:
            workloads[key] = workload
    by_id = {w.pk: w for w in workloads.values()}
    latest: dict[int, dict[str, RecBounds]] = defaultdict(dict)
    rows = (
        Container.objects.filter(workload_id__in=list(by_id))
        .exclude(kind=Container.Kind.INIT)
        .filter(latest_recommendation__isnull=False)
        .order_by()
        .values_list(
            "workload_id", "name", *(f"latest_recommendation__{f}" for f in REC_FIELDS)
        )
    )
    for workload_id, name, *amounts in rows:
        latest[workload_id][name] = RecBounds.from_row(amounts)
    pods_of: dict[WorkloadKey, bool] = {
        (info.namespace, info.kind, info.name): any(
            _live(p.phase, p.deleting) for p in info.pods
        )
        for info in snapshot.workloads
    }
    out: list[tuple[VpaObject, dict[str, Any]]] = []
    without_target = 0
    for vpa in sorted(named, key=lambda v: (v.namespace, v.name)):
        key = (vpa.namespace, vpa.target_kind, vpa.target_name)
        target = workloads.get(key)
        if target is None:
            without_target += 1
            continue
        policy = getattr(target, "policy", None)
        policies = parse_container_policies(
            (policy.container_policies if policy is not None else None) or []
        )
        entries = []
        for name, rec in latest[target.pk].items():
            chosen = select_container_policy(policies, name)
            if chosen is not None and chosen.mode == MODE_OFF:
                continue
            entry = container_recommendation_entry(name, rec)
            if entry["target"]:
                entries.append(entry)
        desired = build_status(
            current=vpa.status,
            entries=entries,
            pods_matched=pods_of.get(key, False),
            now=now,
        )
        out.append((vpa, desired))
    return out, without_target


def write_vpa_statuses(
    cluster: Cluster,
    snapshot: ClusterSnapshot,
    *,
    writer: ClusterWriter,
    now: datetime,
) -> VpaStatusCounts:
    """Write the status of every object naming vpaweb whose status would change.

    Call only when writes to ``cluster`` are allowed (``control.write_block_reason``).
    A path without the permission, or stopped by a 403, sends nothing
    (``permissions.path_block_reason``); a 403 stops the rest of this cycle's writes.
    """
    counts = VpaStatusCounts()
    desired, counts.without_target = desired_statuses(cluster, snapshot, now=now)
    for vpa, status in desired:
        if is_unchanged(vpa.status, status):
            counts.unchanged += 1
            continue
        if permissions.path_block_reason(cluster, permissions.VPA_STATUS, now=now):
            counts.blocked += 1
            continue
        result = writer.write_vpa_status(
            namespace=vpa.namespace, name=vpa.name, status=status
        )
        permissions.record_write_result(
            cluster, permissions.VPA_STATUS, result, now=now
        )
        if result.permission_refused:
            counts.failed += 1  # logged once by record_write_result
        elif result.ok:
            counts.written += 1
            logger.info(
                "cluster %s: status of VerticalPodAutoscaler %s/%s written "
                "(%d container recommendations)",
                cluster.name,
                vpa.namespace,
                vpa.name,
                len(
                    (status["recommendation"] or {}).get("containerRecommendations", ())
                ),
            )
        else:
            counts.failed += 1
            logger.warning(
                "cluster %s: status of VerticalPodAutoscaler %s/%s not written: "
                "HTTP %d %s %s",
                cluster.name,
                vpa.namespace,
                vpa.name,
                result.status,
                result.reason,
                result.message,
            )
    return counts

"""What the webhook does to one pod: ``decide_admission`` (pure, no database)."""
# Upstream's admission flow for a Pod CREATE (``pkg/admission-controller/resource/pod/
# handler.go``, ``resource/vpa/matcher.go``), on vpaweb's data:
#
# 1. find the pod's controlling workload from its ``ownerReferences``: the controller
#    reference; a ReplicaSet named ``<deployment>-<pod-template-hash>`` (the name the
#    Deployment controller gives every ReplicaSet it creates) is resolved to that
#    Deployment *from the pod alone*, so a ReplicaSet created by a rollout after the
#    last discovery still finds its Deployment without an API call on the hot path; a
#    Job named ``<cronjob>-<scheduled minute>`` likewise to its CronJob;
# 2. look the workload up in the snapshot (one dict lookup): unknown, Off, or a policy
#    mirroring an upstream VPA object → left alone; so is every pod while the actuation
#    kill switch is on;
# 3. leave alone each container whose latest recommendation has less history than
#    ``VPAWEB_MIN_HISTORY_HOURS`` ("not enough history yet: N h of 24 h"); cap each
#    other container's latest recommendation for *this* pod and compute its limits with
#    the one advice path (``services.advice.advise.advise``, pure, on inputs cached in
#    the snapshot: LimitRanges Pod then Container item, policy min/max, RequestsOnly,
#    controlledResources, proportional limits with the LimitRange default limit);
# 4. build the JSONPatch (``patch.py``) from the exact object received and check the
#    patched pod against the namespace's LimitRanges; a patch that would break one is
#    not sent (the pod is admitted unchanged: LimitRanger would answer 403 after us).
#
# Every outcome is one of ``PATCHED``, ``LEFT_ALONE`` (nothing to do, and why) or
# ``FAILED_OPEN`` (something went wrong; the pod is admitted unchanged).

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.conf import settings

from recommender.engine.capping import MODE_OFF, select_container_policy
from recommender.engine.resources import Resources
from recommender.engine.update_band import MIN_CHANGE, within_band
from recommender.errors import InvalidInput
from recommender.services.admission.boost import boost_patch, boost_plans, boost_text
from recommender.services.admission.patch import (
    ContainerPlan,
    build_patch,
    limit_range_violations,
)
from recommender.services.admission.pod import PodContainerRef, read_containers
from recommender.services.admission.snapshot import AdmissionSnapshot, WorkloadEntry
from recommender.services.advice.advise import SOURCE_RECOMMENDATION, advise
from recommender.services.advice.history import too_young
from recommender.services.advice.pod_spec import PodContainer

PATCHED = "patched"
LEFT_ALONE = "left_alone"
FAILED_OPEN = "failed_open"
OUTCOMES = (PATCHED, LEFT_ALONE, FAILED_OPEN)


@dataclass(frozen=True)
class AdmissionDecision:
    """The webhook's answer for one pod, and everything an operator needs to see."""

    outcome: str  # one of OUTCOMES
    reason: str
    namespace: str
    pod: str  # the name, or "<generateName>%" as upstream logs unnamed pods
    workload: str = ""  # "Deployment ns/name" when matched
    workload_id: int | None = None
    containers: tuple[ContainerPlan, ...] = ()
    patch: tuple[dict[str, Any], ...] = ()


def pod_label(obj: Mapping[str, Any]) -> str:
    """The pod's name for logs; ``generateName + "%"`` before the name exists."""
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(metadata, Mapping):
        return "?"
    name = metadata.get("name")
    if isinstance(name, str) and name:
        return name
    return f"{metadata.get('generateName') or ''}%"


def owner_candidates(metadata: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Workload keys the pod may belong to, most specific resolution first."""
    refs = metadata.get("ownerReferences")
    if not isinstance(refs, list):
        return []
    controller: Mapping[str, Any] | None = None
    for ref in refs:  # upstream takes the last controller reference
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            controller = ref
    if controller is None:
        return []
    kind, name = controller.get("kind"), controller.get("name")
    if not isinstance(kind, str) or not isinstance(name, str) or not name:
        return []
    labels = metadata.get("labels")
    template_hash = (
        labels.get("pod-template-hash") if isinstance(labels, Mapping) else None
    )
    if kind == "ReplicaSet" and isinstance(template_hash, str) and template_hash:
        suffix = f"-{template_hash}"
        if name.endswith(suffix) and len(name) > len(suffix):
            return [("Deployment", name[: -len(suffix)]), (kind, name)]
    if kind == "Job":
        prefix, _, scheduled = name.rpartition("-")
        if prefix and scheduled.isdigit():
            return [(kind, name), ("CronJob", prefix)]
    return [(kind, name)]


def advise_containers(
    *, entry: WorkloadEntry, containers: Sequence[PodContainerRef]
) -> list[ContainerPlan]:
    """New requests and limits for each container of the pod (pure: no query).

    The webhook's one call into the advice logic, ``services.advice.advise.advise``
    (the same steps as every other caller: container policy, ``cap_for_pod``,
    proportional limits with the LimitRange default), on inputs cached in the snapshot.
    """
    if entry.inputs is None:
        return [ContainerPlan.unchanged(c, entry.why_not) for c in containers]
    # Initial acts only on a recommendation with enough history behind it.
    young = too_young(entry.inputs.latest)
    inputs = entry.inputs
    if young:
        inputs = replace(
            inputs,
            latest={k: v for k, v in inputs.latest.items() if k not in young},
        )
    advice = advise(
        inputs,
        [
            PodContainer(
                name=c.name,
                requests=c.requests,
                limits=c.limits,
                field=f"spec.{c.list_key}[{c.index}]",
                is_init=c.list_key == "initContainers",
            )
            for c in containers
        ],
        # Resources an HPA scales on stay as submitted (upstream's rule).
        leave_hpa_resources=True,
    )
    by_name = {a.name: a for a in advice.containers}
    plans: list[ContainerPlan] = []
    for container in containers:
        one = by_name.get(container.name)
        if one is None or one.source != SOURCE_RECOMMENDATION:
            policy = select_container_policy(entry.inputs.policies, container.name)
            if policy is not None and policy.mode == MODE_OFF:
                reason = "the container policy's mode is Off"
            elif container.name in young:
                reason = f"{entry}: {young[container.name]}"
            elif container.name not in entry.inputs.latest:
                reason = f"{entry} has no recommendation for it yet"
            else:  # e.g. a recommendation of no resource the policy controls
                reason = "no resource to set" if one is None else one.reason
            plans.append(ContainerPlan.unchanged(container, reason))
            continue
        reverted = entry.reverts.get(container.name)
        if reverted is not None and within_band(
            reverted[0], one.requests.to_dict(), min_change=REVERT_BAND
        ):
            # An eviction with these requests left a replacement that could not
            # be scheduled: the previous requests until the recommendation moves.
            previous = reverted[1]
            plans.append(
                ContainerPlan.from_advice(
                    container,
                    requests=resources_of(previous.get("requests") or {}),
                    limits=resources_of(previous.get("limits") or {}),
                    notes=(),
                    reason="reverted to the previous requests: a pod with the "
                    "recommended ones could not be scheduled",
                )
            )
            continue
        plans.append(
            ContainerPlan.from_advice(
                container,
                requests=one.requests,
                limits=one.limits,
                notes=(*one.caps(), *one.limit_annotations),
                reason=f"{one.reason}, {one.controlled_values}",
            )
        )
    return plans


# A revert holds while the recommendation stays within the updater's own threshold
# of the reverted requests (``update_band.within_band``, as a rejection holds).
REVERT_BAND = MIN_CHANGE


def resources_of(values: Mapping[str, Any]) -> Resources:
    """``Resources`` from ResizeChange's ``{"cpu": m, "memory": b}``."""
    return Resources(
        cpu_millicores=values.get("cpu"), memory_bytes=values.get("memory")
    )


def decide_admission(
    *,
    request: Mapping[str, Any],
    snapshot: AdmissionSnapshot | None,
    now: datetime,
) -> AdmissionDecision:
    """The decision for one AdmissionReview ``request`` (checked by parse_review)."""
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        obj = {}
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    namespace = str(request.get("namespace") or metadata.get("namespace") or "")
    pod = pod_label(obj)

    def answer(
        outcome: str,
        reason: str,
        entry: WorkloadEntry | None = None,
        plans: Sequence[ContainerPlan] = (),
        patch: Sequence[dict[str, Any]] = (),
    ) -> AdmissionDecision:
        return AdmissionDecision(
            outcome,
            reason,
            namespace=namespace,
            pod=pod,
            workload="" if entry is None else str(entry),
            workload_id=None if entry is None else entry.workload_id,
            containers=tuple(plans),
            patch=tuple(patch),
        )

    kind = request.get("kind") or {}
    if (
        not isinstance(kind, Mapping)
        or (kind.get("group"), kind.get("version"), kind.get("kind"))
        != ("", "v1", "Pod")
        or request.get("operation") != "CREATE"
        or request.get("subResource")
    ):
        return answer(
            LEFT_ALONE,
            "not a pod CREATE: vpaweb only sets resources of new pods",
        )
    if snapshot is None:
        return answer(
            FAILED_OPEN,
            "the admission cache is not loaded yet",
        )
    age_s = (now - snapshot.loaded_at).total_seconds()
    if age_s > settings.WEBHOOK_MAX_SNAPSHOT_AGE_S:
        return answer(
            FAILED_OPEN,
            f"the admission cache is {age_s:.0f} s old (the database is unreachable "
            f"or slow; limit VPAWEB_WEBHOOK_MAX_SNAPSHOT_AGE_S)",
        )
    candidates = owner_candidates(metadata)
    if not candidates:
        return answer(
            LEFT_ALONE,
            "the pod has no controlling owner (a bare pod)",
        )
    entry = next(
        (
            found
            for kind_name in candidates
            if (found := snapshot.workloads.get((namespace, *kind_name))) is not None
        ),
        None,
    )
    if entry is None:
        owner = " or ".join(f"{k} {namespace}/{n}" for k, n in candidates)
        return answer(
            LEFT_ALONE,
            f"vpaweb does not know its owner ({owner})",
        )
    if not entry.is_actionable:
        return answer(LEFT_ALONE, f"{entry}: {entry.why_not}", entry)
    if snapshot.kill_switch:
        return answer(
            LEFT_ALONE,
            f"{entry}: {snapshot.kill_switch}: new pods are admitted as submitted",
            entry,
        )
    seen_age_s = (now - entry.last_seen_at).total_seconds()
    if seen_age_s > settings.WEBHOOK_MAX_RECOMMENDATION_AGE_S:
        return answer(
            LEFT_ALONE,
            f"{entry}: its recommendation is stale (discovery last saw the workload "
            f"{seen_age_s / 3600:.1f} h ago)",
            entry,
        )
    try:
        containers = read_containers(obj.get("spec"))
    except InvalidInput as exc:
        return answer(FAILED_OPEN, f"the pod spec is unreadable: {exc}", entry)
    limit_ranges = snapshot.limit_ranges.get(namespace, (None, None))
    plans = advise_containers(entry=entry, containers=containers)
    plans, boost = boost_plans(entry=entry, plans=plans)
    changed = [p for p in plans if p.is_changed]
    if not changed:
        why = "; ".join(f"{p.name}: {p.reason}" for p in plans) or "no containers"
        return answer(
            LEFT_ALONE,
            f"{entry}: nothing to change ({why})",
            entry,
            plans,
        )
    violations = limit_range_violations(obj.get("spec"), plans, limit_ranges)
    if violations:
        return answer(
            FAILED_OPEN,
            f"{entry}: the patch would break the namespace's LimitRange "
            f"({'; '.join(violations)}), so it is not sent",
            entry,
            plans,
        )
    patch = build_patch(obj, plans, workload=str(entry), mode=entry.mode)
    patch += boost_patch(boost)
    return answer(
        PATCHED,
        f"{entry} (mode {entry.mode}){boost_text(boost)}",
        entry,
        plans,
        patch,
    )

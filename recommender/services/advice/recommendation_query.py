"""What should this pod request? The VPA design's ``RecommendationQuery`` (seed 000).

A caller sends a pod spec that need not exist, its namespace and its owner; vpaweb
answers with recommended resources per container. A container of a workload vpaweb knows
gets the latest recommendation, capped by the engine exactly as the admission webhook
caps it (``cap_for_pod``: the namespace's LimitRanges as discovery last stored them, Pod
then Container item, the policy's minAllowed/maxAllowed and, for RequestsOnly, the
container's limit). A container vpaweb has no recommendation for gets the namespace's
static coefficient (seed 004's first-deploy rule) or, when none is configured, nothing.
``rightsize.py`` builds on this; ``pod_spec.py`` reads the pod sent.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from recommender.engine.capping import (
    CappedRecommendation,
    ContainerPolicy,
    cap_for_pod,
    select_container_policy,
)
from recommender.engine.limits import REQUESTS_AND_LIMITS
from recommender.engine.resources import RESOURCE_NAMES, Resources
from recommender.errors import InvalidInput, NotFound
from recommender.models import (
    Cluster,
    Policy,
    Recommendation,
    StaticCoefficient,
    Workload,
)
from recommender.services.advice.limits import limit_ranges_for

# Pod reading lives in pod_spec.py; ``as`` re-exports these names (mypy --strict), so
# callers that import them from here keep working.
from recommender.services.advice.pod_spec import PodContainer as PodContainer
from recommender.services.advice.pod_spec import owner_of_pod as owner_of_pod
from recommender.services.advice.pod_spec import (
    parse_pod_containers as parse_pod_containers,
)
from recommender.services.advice.pod_spec import resource_list as resource_list
from recommender.services.policies import parse_container_policies

logger = logging.getLogger(__name__)

# Where a container's recommended requests came from.
SOURCE_RECOMMENDATION = "recommendation"
SOURCE_STATIC_COEFFICIENT = "static_coefficient"
SOURCE_NONE = "none"
# The owner kinds a pod can be resolved to (Workload.Kind), plus Pod for bare pods.
OWNER_KINDS = tuple(Workload.Kind.values)
# The largest multiplier accepted: 10x is already far outside any sane correction.
MAX_MULTIPLIER = 10.0
QUERY_API_VERSION = "vpaweb.io/v1"
QUERY_KIND = "RecommendationQuery"
NO_RESOURCES = Resources()


def find_workload(
    *, cluster: str | None, namespace: str, kind: str, name: str
) -> Workload | None:
    """The active workload with this natural key, or None; ``cluster`` None = "any
    cluster".

    Only active workloads match: a deleted workload's last recommendation is stale, so a
    key that only an inactive (deleted) workload has is treated as unknown (static
    coefficient, or unchanged), and it never makes a key ambiguous. Raises NotFound for
    an unknown cluster and InvalidInput when the key is ambiguous.
    """
    rows = Workload.objects.select_related("cluster", "policy").filter(
        namespace=namespace, kind=kind, name=name, is_active=True
    )
    if cluster:
        if not Cluster.objects.filter(name=cluster).exists():
            raise NotFound(f"cluster {cluster!r} does not exist")
        rows = rows.filter(cluster__name=cluster)
    found = list(rows[:5])
    if len(found) > 1:
        names = ", ".join(sorted(w.cluster.name for w in found))
        raise InvalidInput(
            f"{namespace}/{kind}/{name} exists in several clusters ({names}); "
            "say which with the cluster parameter",
            field="cluster",
        )
    return found[0] if found else None


def static_coefficient_for(namespace: str) -> StaticCoefficient | None:
    """The namespace's coefficient, else the global one (namespace ""), else None."""
    rows = {
        c.namespace: c
        for c in StaticCoefficient.objects.filter(namespace__in=[namespace, ""])
    }
    return rows.get(namespace) or rows.get("")


def _scaled(amount: int | None, factor: float) -> int | None:
    """``amount x factor`` rounded up to a whole unit (at least 1 when non-zero)."""
    if amount is None:
        return None
    return math.ceil(amount * factor)


def scale_resources(resources: Resources, factor: float) -> Resources:
    """Both amounts of ``resources`` multiplied by ``factor``, rounded up."""
    return Resources(
        _scaled(resources.cpu_millicores, factor),
        _scaled(resources.memory_bytes, factor),
    )


@dataclass(frozen=True)
class ContainerAdvice:
    """What vpaweb recommends for one container of a pod, and why."""

    name: str
    source: str  # SOURCE_RECOMMENDATION | SOURCE_STATIC_COEFFICIENT | SOURCE_NONE
    reason: str
    target: Resources = NO_RESOURCES  # recommended requests; empty = leave as is
    capped: CappedRecommendation | None = None
    controlled_values: str = REQUESTS_AND_LIMITS
    recommendation: Recommendation | None = None
    coefficient: StaticCoefficient | None = None
    notes: tuple[str, ...] = ()

    def caps(self) -> list[str]:
        """The capping steps applied to the target, as upstream annotates them."""
        return [] if self.capped is None else self.capped.annotations()


@dataclass(frozen=True)
class PodAdvice:
    """The advice for every container of a pod, with the workload it was matched to."""

    namespace: str
    workload: Workload | None
    containers: list[ContainerAdvice] = field(default_factory=list)


def _policies_of(workload: Workload) -> list[ContainerPolicy]:
    policy: Policy | None = getattr(workload, "policy", None)
    if policy is None:
        return []
    return parse_container_policies(policy.container_policies or [])


def advise_pod(
    *,
    namespace: str,
    owner_kind: str | None,
    owner_name: str | None,
    containers: Sequence[PodContainer],
    cluster: str | None = None,
    multiplier: float = 1.0,
) -> PodAdvice:
    """Recommended requests for each container of a pod of ``owner`` (may not exist).

    ``multiplier`` scales a recommendation before capping (seed 004's correction
    factor), so the policy's bounds still hold afterwards; static coefficients are not
    multiplied.
    """
    if not (0 < multiplier <= MAX_MULTIPLIER) or not math.isfinite(multiplier):
        raise InvalidInput(
            f"multiplier must be above 0 and at most {MAX_MULTIPLIER:g}, "
            f"not {multiplier!r}",
            field="multiplier",
        )
    workload = None
    if owner_kind and owner_name and owner_kind in OWNER_KINDS:
        workload = find_workload(
            cluster=cluster, namespace=namespace, kind=owner_kind, name=owner_name
        )
    elif cluster and not Cluster.objects.filter(name=cluster).exists():
        raise NotFound(f"cluster {cluster!r} does not exist")

    policies: list[ContainerPolicy] = []
    latest: dict[str, Recommendation] = {}
    if workload is not None:
        policies = _policies_of(workload)
        for stored in workload.containers.select_related("latest_recommendation"):
            if stored.latest_recommendation is not None:
                latest[stored.name] = stored.latest_recommendation

    # Recommendations of controlled containers, scaled, keyed by name in pod order.
    # The container policy is checked first, whether or not there is a recommendation:
    # mode Off and controlledResources bind the static coefficient too.
    pending: dict[str, CappedRecommendation] = {}
    skipped: dict[str, str] = {}
    for container in containers:
        policy = select_container_policy(policies, container.name)
        if policy is not None and policy.mode == "Off":
            skipped[container.name] = "the container policy's mode is Off"
            continue
        rec = latest.get(container.name)
        if rec is None:
            continue
        controlled = (
            policy.controlled_resources if policy is not None else RESOURCE_NAMES
        )
        pending[container.name] = CappedRecommendation(
            target=scale_resources(rec.target, multiplier).only(controlled),
            lower_bound=scale_resources(rec.lower_bound, multiplier).only(controlled),
            upper_bound=scale_resources(rec.upper_bound, multiplier).only(controlled),
            uncapped_target=rec.uncapped_target.only(controlled),
        )
    # The namespace's LimitRanges as discovery stored them, applied as the admission
    # webhook applies them (Pod item, then Container item, then the policy).
    container_range = pod_range = None
    if workload is not None:
        container_range, pod_range = limit_ranges_for(
            cluster_id=workload.cluster_id, namespace=workload.namespace
        )
    capped = (
        cap_for_pod(
            pending,
            [c.as_engine() for c in containers],
            policies=policies,
            container_limit_range=container_range,
            pod_limit_range=pod_range,
        )
        if pending
        else {}
    )

    coefficient = static_coefficient_for(namespace)
    advice: list[ContainerAdvice] = []
    for container in containers:
        policy = select_container_policy(policies, container.name)
        controlled_values = (
            policy.effective_controlled_values
            if policy is not None
            else REQUESTS_AND_LIMITS
        )
        if container.name in skipped:
            advice.append(
                ContainerAdvice(
                    name=container.name,
                    source=SOURCE_NONE,
                    reason=f"left as is: {skipped[container.name]}",
                    controlled_values=controlled_values,
                )
            )
            continue
        # Only containers with a recommendation: with a Pod LimitRange the engine also
        # returns the others (their requests, for the pod sum); they stay as they are.
        if container.name in pending and container.name in capped:
            result = capped[container.name]
            rec = latest[container.name]
            reason = (
                f"latest recommendation of {workload} "
                f"({rec.created_at:%Y-%m-%d %H:%M} UTC)"
            )
            if multiplier != 1.0:
                reason += f" x multiplier {multiplier:g}"
            advice.append(
                ContainerAdvice(
                    name=container.name,
                    source=SOURCE_RECOMMENDATION,
                    reason=reason,
                    target=result.target,
                    capped=result,
                    controlled_values=controlled_values,
                    recommendation=rec,
                )
            )
            continue
        advice.append(
            _coefficient_advice(
                container,
                coefficient,
                workload,
                controlled_values,
                namespace,
                controlled_resources=(
                    policy.controlled_resources
                    if policy is not None
                    else RESOURCE_NAMES
                ),
            )
        )
    logger.info(
        "advised pod of %s/%s/%s: %s",
        namespace,
        owner_kind,
        owner_name,
        {a.name: a.source for a in advice},
    )
    return PodAdvice(namespace=namespace, workload=workload, containers=advice)


def _coefficient_advice(
    container: PodContainer,
    coefficient: StaticCoefficient | None,
    workload: Workload | None,
    controlled_values: str,
    namespace: str,
    *,
    controlled_resources: tuple[str, ...] | list[str] = RESOURCE_NAMES,
) -> ContainerAdvice:
    """Seed 004's first deploy: the static coefficient, or nothing if none is set.

    Only ``controlled_resources`` (the container policy's) are scaled.
    """
    why = (
        "vpaweb does not know this workload yet"
        if workload is None
        else f"{workload} has no recommendation for this container yet"
    )
    if coefficient is None:
        return ContainerAdvice(
            name=container.name,
            source=SOURCE_NONE,
            reason=f"left as is: {why} and no static coefficient is configured",
            controlled_values=controlled_values,
        )
    scaled = Resources(
        _scaled(container.requests.cpu_millicores, coefficient.cpu_factor)
        if coefficient.cpu_factor is not None
        else None,
        _scaled(container.requests.memory_bytes, coefficient.memory_factor)
        if coefficient.memory_factor is not None
        else None,
    )
    target = scaled.only(controlled_resources)
    if target.is_empty() and not scaled.is_empty():
        return ContainerAdvice(
            name=container.name,
            source=SOURCE_NONE,
            reason=(
                f"left as is: {why}, and the static coefficient scales no resource "
                "the container policy controls"
            ),
            controlled_values=controlled_values,
        )
    scope = f"namespace {namespace}" if coefficient.namespace else "the global default"
    return ContainerAdvice(
        name=container.name,
        source=SOURCE_STATIC_COEFFICIENT,
        reason=(
            f"{why}: static coefficient of {scope} "
            f"(cpu x {_factor_text(coefficient.cpu_factor)}, "
            f"memory x {_factor_text(coefficient.memory_factor)})"
        ),
        target=target,
        controlled_values=controlled_values,
        coefficient=coefficient,
    )


def _factor_text(factor: float | None) -> str:
    return "1 (not set)" if factor is None else f"{factor:g}"


def container_recommendation(advice: ContainerAdvice) -> dict[str, Any] | None:
    """One ``containerRecommendations[]`` entry in the VPA status format, or None."""
    if advice.source == SOURCE_NONE or advice.target.is_empty():
        return None
    entry: dict[str, Any] = {
        "containerName": advice.name,
        "target": resource_list(advice.target),
    }
    if advice.capped is not None:
        entry["lowerBound"] = resource_list(advice.capped.lower_bound)
        entry["upperBound"] = resource_list(advice.capped.upper_bound)
        entry["uncappedTarget"] = resource_list(advice.capped.uncapped_target)
    return entry


def query_recommendation(*, query: Mapping[str, Any]) -> dict[str, Any]:
    """Answer a RecommendationQuery: the query as sent, with ``status`` filled in.

    ``query`` is ``{"metadata": {"namespace"}, "spec": {"pod": Pod, "owner": {"kind",
    "name"}, "cluster"}}``; the owner defaults to the pod's controller ownerReference.
    """
    if not isinstance(query, Mapping):
        raise InvalidInput("the query must be an object", field="query")
    kind = query.get("kind", QUERY_KIND)
    if kind != QUERY_KIND:
        raise InvalidInput(f"kind must be {QUERY_KIND}, not {kind!r}", field="kind")
    metadata = query.get("metadata") or {}
    spec = query.get("spec")
    if not isinstance(metadata, Mapping):
        raise InvalidInput("metadata must be an object", field="metadata")
    if not isinstance(spec, Mapping):
        raise InvalidInput('spec is required: {"pod": {...}}', field="spec")
    pod = spec.get("pod")
    if not isinstance(pod, Mapping):
        raise InvalidInput("spec.pod is required: a Pod with a spec", field="spec.pod")
    pod_metadata = pod.get("metadata") or {}
    if not isinstance(pod_metadata, Mapping):
        raise InvalidInput(
            "spec.pod.metadata must be an object", field="spec.pod.metadata"
        )
    # A Pod object has its containers under .spec; a bare PodSpec is accepted as well.
    pod_spec = pod.get("spec") if "spec" in pod else pod
    containers = parse_pod_containers(pod_spec, field="spec.pod.spec")

    namespace = metadata.get("namespace") or pod_metadata.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise InvalidInput(
            "metadata.namespace must be a string", field="metadata.namespace"
        )
    owner = spec.get("owner")
    if owner is not None:
        if not isinstance(owner, Mapping):
            raise InvalidInput("spec.owner must be {kind, name}", field="spec.owner")
        owner_kind, owner_name = owner.get("kind"), owner.get("name")
        if owner_kind not in OWNER_KINDS:
            raise InvalidInput(
                f"spec.owner.kind must be one of {', '.join(OWNER_KINDS)}, "
                f"not {owner_kind!r}",
                field="spec.owner.kind",
            )
        if not isinstance(owner_name, str) or not owner_name:
            raise InvalidInput("spec.owner.name is required", field="spec.owner.name")
    else:
        owner_kind, owner_name = owner_of_pod(pod_metadata)
    cluster = spec.get("cluster")
    if cluster is not None and not isinstance(cluster, str):
        raise InvalidInput("spec.cluster must be a cluster name", field="spec.cluster")

    advice = advise_pod(
        namespace=namespace,
        owner_kind=owner_kind,
        owner_name=owner_name,
        containers=containers,
        cluster=cluster,
    )
    recommendations = [
        entry
        for entry in (
            container_recommendation(a)
            for a in sorted(advice.containers, key=lambda a: a.name)
        )
        if entry is not None
    ]
    workload = advice.workload
    answer = dict(query)
    answer["apiVersion"] = query.get("apiVersion") or QUERY_API_VERSION
    answer["kind"] = QUERY_KIND
    answer["status"] = {
        "recommendation": {"containerRecommendations": recommendations},
        "workload": None
        if workload is None
        else {
            "id": workload.pk,
            "cluster": workload.cluster.name,
            "namespace": workload.namespace,
            "kind": workload.kind,
            "name": workload.name,
        },
        "containers": [
            {
                "containerName": a.name,
                "source": a.source,
                "reason": a.reason,
                "caps": a.caps(),
                "explanation": a.recommendation.explanation
                if a.recommendation
                else None,
            }
            for a in advice.containers
        ],
    }
    return answer

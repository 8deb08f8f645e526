"""What should this pod request? The one answer: the API, the dashboard's patch, the
webhook (``advise``) and the updater (``capped_recommendations``, ``new_resources``)
all run upstream's steps (``capping.go``, ``recommendation_provider.go``) in order:
1. ``controlled_recommendations``: the container policy (Off leaves it alone,
   ``controlledResources`` drops the others; a multiplier scales before capping);
2. ``capped_for_pod``: LimitRanges (Pod, then Container), minAllowed/maxAllowed;
3. ``ContainerAdvice.resources_for``: limits kept at the limit:request ratio
   (``engine.limits``); then a pod no node of its cluster could hold is left as it is
   (``fits_no_node``). Inputs are read in one place (``load_advice_inputs``); the steps
   are pure, so the webhook answers from a cache.
"""
# Without a recommendation: the namespace's static coefficient, or nothing. The nodes
# are the largest allocatable the node-pools step stored (readmodels/node_pools.py);
# no caller proposes or writes a request no node can hold.

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from recommender.cluster.base import PodInfo, WorkloadKey
from recommender.engine.binpack import fits_a_node
from recommender.engine.capping import (
    MODE_OFF,
    CappedRecommendation,
    ContainerPolicy,
    LimitRangeItem,
    RecommendationLike,
    cap_for_pod,
    select_container_policy,
)
from recommender.engine.limits import (
    REQUESTS_AND_LIMITS,
    ContainerResources,
    NewContainerResources,
    requests_and_limits_for_container,
)
from recommender.engine.quantity import format_cpu, format_memory
from recommender.engine.resources import RESOURCE_NAMES, Resources
from recommender.errors import InvalidInput, NotFound
from recommender.models import (
    Cluster,
    Container,
    Policy,
    Recommendation,
    StaticCoefficient,
    Workload,
)
from recommender.services.advice.history import too_young
from recommender.services.advice.hpa import (
    adjustments_for_workload,
    held_reason,
    hpa_held_resources,
    requests_of,
)
from recommender.services.advice.limits import limit_ranges_by_namespace
from recommender.services.advice.pod_spec import PodContainer, readable_pod_resources
from recommender.services.policy.validation import parse_container_policies
from recommender.services.readmodels.node_pools import node_allocatables

logger = logging.getLogger(__name__)

# Where a container's recommended requests came from.
SOURCE_RECOMMENDATION = "recommendation"
SOURCE_STATIC_COEFFICIENT = "static_coefficient"
SOURCE_NONE = "none"
# The owner kinds a pod can be resolved to (Workload.Kind), plus Pod for bare pods.
OWNER_KINDS = tuple(Workload.Kind.values)
# The largest multiplier accepted: 10x is already far outside any sane correction.
MAX_MULTIPLIER = 10.0
NO_RESOURCES = Resources()


@dataclass(frozen=True)
class AdviceInputs:
    """Everything ``advise`` needs from the database for pods of one owner.

    ``workload`` is None for an owner vpaweb does not know (then only the static
    coefficient and the LimitRange default limit apply).
    """

    namespace: str
    workload: Workload | None = None
    policies: tuple[ContainerPolicy, ...] = ()
    latest: Mapping[str, Recommendation] = field(default_factory=dict)
    container_range: LimitRangeItem | None = None
    pod_range: LimitRangeItem | None = None
    coefficient: StaticCoefficient | None = None
    # (cpu millicores, memory bytes) allocatable of the cluster's largest nodes
    # (``readmodels.node_pools.node_allocatables``); None: no node is known.
    node_allocatables: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class ContainerAdvice:
    """What vpaweb recommends for one container of a pod, and why.

    ``requests``/``limits`` are what to write (empty amounts: leave as is); ``target``
    is the capped target they come from.
    """

    name: str
    source: str  # SOURCE_RECOMMENDATION | SOURCE_STATIC_COEFFICIENT | SOURCE_NONE
    reason: str
    target: Resources = NO_RESOURCES  # recommended requests; empty = leave as is
    capped: CappedRecommendation | None = None
    controlled_values: str = REQUESTS_AND_LIMITS
    recommendation: Recommendation | None = None
    coefficient: StaticCoefficient | None = None
    # The container's current requests and limits, and the Container LimitRange's
    # default limit (for a container without a limit).
    current: PodContainer | None = None
    default_limit: Resources = NO_RESOURCES
    # The Container LimitRange's maxLimitRequestRatio (MilliValues): a request whose
    # limit stays is raised to keep it (engine/limits.py).
    max_ratio: Resources = NO_RESOURCES
    requests: Resources = NO_RESOURCES
    limits: Resources = NO_RESOURCES
    limit_annotations: tuple[str, ...] = ()

    def caps(self) -> list[str]:
        """The capping steps applied to the target, as upstream annotates them."""
        return [] if self.capped is None else self.capped.annotations()

    def resources_for(self, target: Resources) -> NewContainerResources:
        """Requests and limits for another ``target`` (e.g. after seed 004's
        never-raise rule), by the same proportional-limit step."""
        assert self.current is not None, "advice without a container has no limits"
        return requests_and_limits_for_container(
            self.current.as_engine(),
            target,
            controlled_values=self.controlled_values,
            default_limit=self.default_limit,
            max_limit_request_ratio=self.max_ratio,
        )


@dataclass(frozen=True)
class PodAdvice:
    """The advice for every container of a pod, with the workload it was matched to."""

    namespace: str
    workload: Workload | None
    containers: list[ContainerAdvice] = field(default_factory=list)
    # Why the pod is left as it is because no node could hold it at the advice's
    # requests ("" when one can): the page and rightsize's notes show it.
    fits_no_node: str = ""


# --- Reading the inputs ---------------------------------------------------------------


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
    return _coefficients([namespace]).get(namespace)


def _coefficients(namespaces: Iterable[str]) -> dict[str, StaticCoefficient]:
    """Each namespace's coefficient (its own, else the global one), in one query."""
    wanted = set(namespaces)
    rows = {
        c.namespace: c
        for c in StaticCoefficient.objects.filter(namespace__in=[*wanted, ""])
    }
    found = {}
    for namespace in wanted:
        row = rows.get(namespace) or rows.get("")
        if row is not None:
            found[namespace] = row
    return found


def _policies_of(workload: Workload) -> tuple[ContainerPolicy, ...]:
    policy: Policy | None = getattr(workload, "policy", None)
    if policy is None:
        return ()
    return tuple(parse_container_policies(policy.container_policies or []))


def load_advice_inputs(
    *, cluster_id: int | None, keys: Iterable[WorkloadKey]
) -> dict[WorkloadKey, AdviceInputs]:
    """The inputs of ``advise`` for many owners of one cluster, in five queries.

    ``keys`` are (namespace, kind, name); an owner vpaweb does not know (or knows only
    as a deleted workload) gets inputs without a workload. ``cluster_id`` None (the
    caller named no cluster) reads no LimitRange: vpaweb cannot tell which cluster's
    namespace the pod would run in. The nodes are not read: the caller (the
    admission snapshot, page by page) sets them once for all (``node_allocatables``).
    """
    keys = list(dict.fromkeys(keys))
    workloads: dict[WorkloadKey, Workload] = {}
    if cluster_id is not None and keys:
        rows = Workload.objects.select_related("cluster", "policy").filter(
            cluster_id=cluster_id,
            is_active=True,
            namespace__in={namespace for namespace, _, _ in keys},
            name__in={name for _, _, name in keys},
        )
        wanted = set(keys)
        for row in rows:
            key = (row.namespace, row.kind, row.name)
            if key in wanted:
                workloads[key] = row
    return _assemble(
        cluster_id, [(key, workloads.get(key)) for key in keys], with_nodes=False
    )


def _assemble(
    cluster_id: int | None,
    owners: list[tuple[WorkloadKey, Workload | None]],
    coefficients: dict[str, StaticCoefficient] | None = None,
    *,
    with_nodes: bool = True,
) -> dict[WorkloadKey, AdviceInputs]:
    """AdviceInputs of owners whose workloads are read: recommendations, LimitRanges,
    static coefficients and (``with_nodes``) the cluster's largest nodes, one query
    each."""
    found = [w for _, w in owners if w is not None]
    latest: dict[int, dict[str, Recommendation]] = {w.pk: {} for w in found}
    for container in Container.objects.filter(
        workload_id__in=list(latest), latest_recommendation__isnull=False
    ).select_related("latest_recommendation"):
        assert container.latest_recommendation is not None
        latest[container.workload_id][container.name] = container.latest_recommendation
    namespaces = {key[0] for key, _ in owners}
    ranges = (
        limit_ranges_by_namespace(cluster_id=cluster_id, namespaces=namespaces)
        if cluster_id is not None
        else {}
    )
    if coefficients is None:
        coefficients = _coefficients(namespaces)
    nodes = (
        node_allocatables(cluster_id=cluster_id)
        if with_nodes and cluster_id is not None
        else None
    )
    inputs = {}
    for key, workload in owners:
        namespace = key[0]
        container_range, pod_range = ranges.get(namespace, (None, None))
        inputs[key] = AdviceInputs(
            namespace=namespace,
            workload=workload,
            policies=() if workload is None else _policies_of(workload),
            latest={} if workload is None else latest[workload.pk],
            container_range=container_range,
            pod_range=pod_range,
            coefficient=coefficients.get(namespace),
            node_allocatables=nodes,
        )
    return inputs


def inputs_for_workload(workload: Workload) -> AdviceInputs:
    """The inputs for pods of a workload already read (``cluster`` and ``policy``
    selected), active or not: the dashboard's workload page."""
    key = (workload.namespace, workload.kind, workload.name)
    return _assemble(workload.cluster_id, [(key, workload)])[key]


def inputs_for_pod(
    *,
    namespace: str,
    owner_kind: str | None,
    owner_name: str | None,
    cluster: str | None = None,
) -> AdviceInputs:
    """The inputs for one pod's owner, found in ``cluster`` (None: in any cluster).

    Raises NotFound for an unknown cluster and InvalidInput for an owner that exists
    in several clusters when none is named.
    """
    workload = None
    if owner_kind and owner_name and owner_kind in OWNER_KINDS:
        workload = find_workload(
            cluster=cluster, namespace=namespace, kind=owner_kind, name=owner_name
        )
    cluster_id: int | None = None
    if workload is not None:
        cluster_id = workload.cluster_id
    elif cluster:
        cluster_id = (
            Cluster.objects.filter(name=cluster).values_list("pk", flat=True).first()
        )
        if cluster_id is None:
            raise NotFound(f"cluster {cluster!r} does not exist")
    key = (namespace, owner_kind or "", owner_name or "")
    return _assemble(cluster_id, [(key, workload)])[key]


# (namespace, owner kind, owner name) of one pod; kind and name may be unknown.
PodKey = tuple[str, str | None, str | None]


def inputs_for_pods(
    *, pods: Iterable[PodKey], cluster: str | None = None
) -> dict[PodKey, AdviceInputs]:
    """``inputs_for_pod`` of many pods at once (rightsize's manifests), with the same
    answers and errors, in a number of queries that does not grow with the pods: two,
    then at most two per cluster their owners are in (``_assemble``).
    """
    keys = list(dict.fromkeys(pods))
    cluster_id: int | None = None
    if cluster:
        cluster_id = (
            Cluster.objects.filter(name=cluster).values_list("pk", flat=True).first()
        )
        if cluster_id is None:
            raise NotFound(f"cluster {cluster!r} does not exist")
    owners = {
        (namespace, kind, name)
        for namespace, kind, name in keys
        if kind and name and kind in OWNER_KINDS
    }
    found: dict[PodKey, list[Workload]] = {}
    if owners:
        rows = Workload.objects.select_related("cluster", "policy").filter(
            is_active=True,
            namespace__in={namespace for namespace, _, _ in owners},
            kind__in={kind for _, kind, _ in owners},
            name__in={name for _, _, name in owners},
        )
        if cluster_id is not None:
            rows = rows.filter(cluster_id=cluster_id)
        for row in rows.order_by("pk"):
            key = (row.namespace, row.kind, row.name)
            if key in owners:  # the three IN lists also match mixed keys
                found.setdefault(key, []).append(row)
    by_cluster: dict[int | None, list[tuple[PodKey, WorkloadKey, Workload | None]]]
    by_cluster = {}
    for pod in keys:
        pod_namespace, pod_kind, pod_name = pod
        matches = found.get(pod, [])
        if len(matches) > 1:
            names = ", ".join(sorted(w.cluster.name for w in matches))
            raise InvalidInput(
                f"{pod_namespace}/{pod_kind}/{pod_name} exists in several clusters "
                f"({names}); say which with the cluster parameter",
                field="cluster",
            )
        workload = matches[0] if matches else None
        group = workload.cluster_id if workload is not None else cluster_id
        by_cluster.setdefault(group, []).append(
            (pod, (pod_namespace, pod_kind or "", pod_name or ""), workload)
        )
    coefficients = _coefficients(namespace for namespace, _, _ in keys)
    inputs: dict[PodKey, AdviceInputs] = {}
    for group, members in by_cluster.items():
        assembled = _assemble(
            group, [(read, w) for _, read, w in members], coefficients
        )
        for pod, read, _ in members:
            inputs[pod] = assembled[read]
    return inputs


# --- The computation (pure: no database) ----------------------------------------------


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


def check_multiplier(multiplier: float) -> None:
    """InvalidInput unless 0 < multiplier <= MAX_MULTIPLIER."""
    if not (0 < multiplier <= MAX_MULTIPLIER) or not math.isfinite(multiplier):
        raise InvalidInput(
            f"multiplier must be above 0 and at most {MAX_MULTIPLIER:g}, "
            f"not {multiplier!r}",
            field="multiplier",
        )


OFF_REASON = "the container policy's mode is Off"


def controlled_recommendations(
    names: Iterable[str],
    latest: Mapping[str, RecommendationLike],
    policies: Sequence[ContainerPolicy],
    *,
    held: Mapping[str, frozenset[str]],
    multiplier: float = 1.0,
) -> tuple[dict[str, CappedRecommendation], dict[str, str]]:
    """Step 1, the container policy: (the recommendations of the containers it lets
    vpaweb set, scaled and cut to the controlled resources; the containers it leaves
    alone, with why). ``held``: the resources an HPA scales on, per container."""
    pending: dict[str, CappedRecommendation] = {}
    skipped: dict[str, str] = {}
    for name in names:
        policy = select_container_policy(list(policies), name)
        if policy is not None and policy.mode == MODE_OFF:
            skipped[name] = OFF_REASON
            continue
        hpa = held.get(name, frozenset())
        controlled = tuple(
            r
            for r in (
                policy.controlled_resources if policy is not None else RESOURCE_NAMES
            )
            if r not in hpa
        )
        if hpa and not controlled:
            skipped[name] = held_reason(hpa)
            continue
        rec = latest.get(name)
        if rec is None:
            continue
        pending[name] = CappedRecommendation(
            target=scale_resources(rec.target, multiplier).only(controlled),
            lower_bound=scale_resources(rec.lower_bound, multiplier).only(controlled),
            upper_bound=scale_resources(rec.upper_bound, multiplier).only(controlled),
            uncapped_target=rec.uncapped_target.only(controlled),
        )
    return pending, skipped


def capped_for_pod(
    pending: Mapping[str, CappedRecommendation],
    containers: Sequence[ContainerResources],
    policies: Sequence[ContainerPolicy],
    ranges: tuple[LimitRangeItem | None, LimitRangeItem | None],
) -> dict[str, CappedRecommendation]:
    """Step 2: ``pending`` capped over the pod's ``containers`` by the (Container,
    Pod) LimitRanges and the policies; only the containers of ``pending``."""
    if not pending:
        return {}
    capped = cap_for_pod(
        dict(pending),
        list(containers),
        policies=list(policies),
        container_limit_range=ranges[0],
        pod_limit_range=ranges[1],
    )
    return {k: v for k, v in capped.items() if k in pending}


def controlled_values_of(policies: Sequence[ContainerPolicy], name: str) -> str:
    """The container's ``controlledValues`` (RequestsAndLimits without a policy)."""
    policy = select_container_policy(list(policies), name)
    return (
        policy.effective_controlled_values
        if policy is not None
        else REQUESTS_AND_LIMITS
    )


def resources_json(requests: Resources, limits: Resources) -> dict[str, Any]:
    """``{"requests": {...}, "limits": {...}}`` as ResizeChange stores them."""
    return {"requests": requests.to_dict(), "limits": limits.to_dict()}


def capped_recommendations(
    pod: PodInfo,
    latest: Mapping[str, RecommendationLike],
    policies: list[ContainerPolicy],
    ranges: tuple[LimitRangeItem | None, LimitRangeItem | None],
    hpa_conflicts: Sequence[Mapping[str, Any]] = (),
    *,
    node_allocatables: Sequence[tuple[int, int]] | None = None,
) -> tuple[dict[str, CappedRecommendation], frozenset[str]]:
    """Steps 1 and 2 for a running pod (the updater): the capped recommendation of
    each container that may be resized (init containers cannot be), and the
    containers whose policy mode is Off. An HPA's resources are left out; none is
    given when the pod at those targets would fit no node of ``node_allocatables``
    (``fits_no_node``)."""
    containers = [c for c in pod.containers if c.kind != "init"]
    # A policy that controls no resource leaves its container out (unless it is Off:
    # then the container is named among the Off ones).
    pending, skipped = controlled_recommendations(
        [
            c.name
            for c in containers
            if (policy := select_container_policy(policies, c.name)) is None
            or policy.mode == MODE_OFF
            or policy.controlled_resources
        ],
        latest,
        policies,
        held={c.name: hpa_held_resources(hpa_conflicts, c.name) for c in containers},
    )
    off = frozenset(name for name, why in skipped.items() if why == OFF_REASON)
    engine = [ContainerResources(c.name, c.requests, c.limits) for c in containers]
    capped = capped_for_pod(pending, engine, policies, ranges)
    targets = []
    for container in pod.containers:
        requests = container.requests
        rec = capped.get(container.name)
        if rec is not None:
            for resource in RESOURCE_NAMES:
                amount = rec.target.get(resource)
                if amount is not None:
                    requests = requests.with_amount(resource, amount)
        targets.append((container.kind == "init", requests))
    too_large = fits_no_node(node_allocatables, *pod_request(targets))
    if too_large:
        logger.info("no resize of pod %s/%s: %s", pod.namespace, pod.name, too_large)
        return {}, off
    return capped, off


def new_resources(
    pod: PodInfo,
    capped: Mapping[str, CappedRecommendation],
    policies: list[ContainerPolicy],
    container_range: LimitRangeItem | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Step 3 for a running pod: before and after ({container: {requests, limits}})
    as the webhook would set them; a limit the container has not is not added."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for container in pod.containers:
        rec = capped.get(container.name)
        if rec is None:
            continue
        current = PodContainer(
            name=container.name,
            requests=container.requests,
            limits=container.limits,
            field=container.name,
        )
        new = ContainerAdvice(
            name=container.name,
            source=SOURCE_RECOMMENDATION,
            reason="",
            controlled_values=controlled_values_of(policies, container.name),
            current=current,
            default_limit=(
                container_range.default if container_range else NO_RESOURCES
            ),
            max_ratio=(
                container_range.max_limit_request_ratio
                if container_range
                else NO_RESOURCES
            ),
        ).resources_for(rec.target)
        requests = container.requests
        for resource in RESOURCE_NAMES:
            amount = new.requests.get(resource)
            if amount is not None:
                requests = requests.with_amount(resource, amount)
        limits = container.limits
        for resource in RESOURCE_NAMES:
            amount = new.limits.get(resource)
            if amount is not None and container.limits.get(resource) is not None:
                limits = limits.with_amount(resource, amount)
        before[container.name] = resources_json(container.requests, container.limits)
        after[container.name] = resources_json(requests, limits)
    return before, after


def advise(
    inputs: AdviceInputs,
    containers: Sequence[PodContainer],
    *,
    multiplier: float = 1.0,
    leave_hpa_resources: bool = False,
) -> PodAdvice:
    """Recommended requests and limits for each container of a pod (pure).

    ``containers`` carry the pod's current requests and limits (for the admission
    webhook: as the API server sends them, after LimitRanger's defaulting).
    ``multiplier`` scales a recommendation before capping (seed 004's correction
    factor), so the policy's bounds still hold afterwards; static coefficients are not
    multiplied. ``leave_hpa_resources`` (actuation: the webhook) drops the resources an
    HPA of the workload scales on, as the policy's controlledResources would.
    """
    check_multiplier(multiplier)
    policies = list(inputs.policies)
    workload = inputs.workload
    hpas = workload.hpa_conflicts if workload and leave_hpa_resources else []
    held: dict[str, frozenset[str]] = {
        c.name: hpa_held_resources(hpas, c.name) for c in containers
    }
    # Recommendations of controlled containers, scaled, keyed by name in pod order.
    # The container policy is checked first, whether or not there is a recommendation:
    # mode Off and controlledResources bind the static coefficient too.
    pending, skipped = controlled_recommendations(
        [c.name for c in containers],
        inputs.latest,
        policies,
        held=held,
        multiplier=multiplier,
    )
    capped = capped_for_pod(
        pending,
        [c.as_engine() for c in containers],
        policies,
        (inputs.container_range, inputs.pod_range),
    )
    default_limit = (
        inputs.container_range.default
        if inputs.container_range is not None
        else NO_RESOURCES
    )
    max_ratio = (
        inputs.container_range.max_limit_request_ratio
        if inputs.container_range is not None
        else NO_RESOURCES
    )
    advice: list[ContainerAdvice] = []
    for container in containers:
        policy = select_container_policy(policies, container.name)
        controlled_values = controlled_values_of(policies, container.name)
        if container.name in skipped:
            advice.append(
                ContainerAdvice(
                    name=container.name,
                    source=SOURCE_NONE,
                    reason=f"left as is: {skipped[container.name]}",
                    controlled_values=controlled_values,
                    current=container,
                    default_limit=default_limit,
                )
            )
            continue
        # Only containers with a recommendation: with a Pod LimitRange the engine also
        # returns the others (their requests, for the pod sum); they stay as they are.
        if container.name in pending and container.name in capped:
            result = capped[container.name]
            rec = inputs.latest[container.name]
            reason = (
                f"latest recommendation of {workload} "
                f"({rec.created_at:%Y-%m-%d %H:%M} UTC)"
            )
            if multiplier != 1.0:
                reason += f" x multiplier {multiplier:g}"
            if held[container.name]:
                reason += f"; {held_reason(held[container.name])}"
            one = ContainerAdvice(
                name=container.name,
                source=SOURCE_RECOMMENDATION,
                reason=reason,
                target=result.target,
                capped=result,
                controlled_values=controlled_values,
                recommendation=rec,
                current=container,
                default_limit=default_limit,
            )
        else:
            one = _coefficient_advice(
                container,
                inputs.coefficient,
                workload,
                controlled_values,
                inputs.namespace,
                controlled_resources=(
                    policy.controlled_resources
                    if policy is not None
                    else RESOURCE_NAMES
                ),
                default_limit=default_limit,
            )
        advice.append(_with_limits(replace(one, max_ratio=max_ratio)))
    too_large = _fits_no_node(inputs.node_allocatables, containers, advice)
    if too_large:
        logger.info("left a pod of %s as it is: %s", workload, too_large)
        advice = [
            a
            if a.source == SOURCE_NONE
            else ContainerAdvice(
                name=a.name,
                source=SOURCE_NONE,
                reason=f"left as is: {too_large}",
                controlled_values=a.controlled_values,
                current=a.current,
                default_limit=a.default_limit,
            )
            for a in advice
        ]
    return PodAdvice(
        namespace=inputs.namespace,
        workload=workload,
        containers=advice,
        fits_no_node=too_large,
    )


def pod_request(amounts: Iterable[tuple[bool, Resources]]) -> tuple[int, int]:
    """A pod's effective request from its containers' (is_init, requests): the
    larger of the others' sum and the largest init container (the scheduler's
    rule; an absent amount counts 0)."""
    total = [0, 0]
    largest_init = [0, 0]
    for is_init, requests in amounts:
        for i, amount in enumerate((requests.cpu_millicores, requests.memory_bytes)):
            if is_init:
                largest_init[i] = max(largest_init[i], amount or 0)
            else:
                total[i] += amount or 0
    return max(total[0], largest_init[0]), max(total[1], largest_init[1])


def fits_no_node(
    allocatables: Sequence[tuple[int, int]] | None, cpu: int, memory: int
) -> str:
    """Why a pod of these requests fits no node of its cluster ("" when one holds
    it, or no node is known)."""
    if allocatables is None or fits_a_node(allocatables, cpu, memory):
        return ""
    largest = ", ".join(
        f"{format_cpu(c)} cpu and {format_memory(m)} memory" for c, m in allocatables
    )
    return (
        f"at {format_cpu(cpu)} cpu and {format_memory(memory)} memory the pod fits "
        f"no node of the cluster (the largest allocatable: {largest or 'none'}), so "
        "vpaweb writes no such request"
    )


def _fits_no_node(
    allocatables: Sequence[tuple[int, int]] | None,
    containers: Sequence[PodContainer],
    advice: Sequence[ContainerAdvice],
) -> str:
    """``fits_no_node`` of the pod at the advice's requests (the others' as they
    are), when the advice changes a request."""
    by_name = {a.name: a for a in advice}
    amounts = []
    changes = False
    for container in containers:
        one = by_name.get(container.name)
        requests = container.requests
        if one is not None and one.source != SOURCE_NONE:
            for resource in RESOURCE_NAMES:
                amount = one.requests.get(resource)
                if amount is not None:
                    changes = True
                    requests = requests.with_amount(resource, amount)
        amounts.append((container.is_init, requests))
    if not changes:
        return ""
    return fits_no_node(allocatables, *pod_request(amounts))


def gated_advice(
    inputs: AdviceInputs, advice: PodAdvice, *, include_short_history: bool = False
) -> tuple[PodAdvice, dict[str, str]]:
    """The history gate (``history.too_young``) on a pod's advice, as the webhook and
    the updater apply it: a container whose recommendation has too little history
    is left as is (its reason says why), unless ``include_short_history`` keeps its
    value (the caller flags it low confidence). Also returns, by container name, why
    each gated container's recommendation is held back."""
    young = too_young(inputs.latest)
    held = {
        one.name: young[one.name]
        for one in advice.containers
        if one.source == SOURCE_RECOMMENDATION and one.name in young
    }
    if not held or include_short_history:
        return advice, held
    containers = [
        replace(
            one,
            source=SOURCE_NONE,
            reason=(
                f"left as is: {held[one.name]}; the webhook and the updater do not "
                "act on it yet either (include_short_history=true gives the value, "
                "flagged low_confidence)"
            ),
            target=NO_RESOURCES,
            requests=NO_RESOURCES,
            limits=NO_RESOURCES,
        )
        if one.name in held
        else one
        for one in advice.containers
    ]
    return replace(advice, containers=containers), held


def workload_pod(containers: Sequence[Container]) -> list[PodContainer]:
    """A workload's stored containers as the advice reads a pod: their current
    requests and limits (what the live pods carry, see discovery)."""
    return [
        PodContainer(
            name=c.name,
            requests=c.requests,
            limits=c.limits,
            field=f"containers[{c.name}]",
            is_init=c.kind != Container.Kind.REGULAR,
        )
        for c in containers
        if c.kind != Container.Kind.INIT
    ]


def written_resources(
    inputs: AdviceInputs, pod: Sequence[PodContainer], advice: PodAdvice
) -> dict[str, tuple[Resources, Resources]]:
    """(requests, limits) to write per container, as readable quantities rounded up
    over the pod (a container without a recommendation counts as it is)."""
    by_name = {a.name: a for a in advice.containers}
    writes = [
        (c, one.requests, one.limits)
        if (one := by_name.get(c.name)) is not None
        and one.source == SOURCE_RECOMMENDATION
        else (c, Resources(), Resources())
        for c in pod
    ]
    return dict(
        zip(
            (c.name for c, _, _ in writes),
            readable_pod_resources(
                writes,
                container_range=inputs.container_range,
                pod_range=inputs.pod_range,
            ),
            strict=True,
        )
    )


def workload_hpa_adjustments(workload: Workload) -> list[dict[str, Any]]:
    """The HPA change that keeps the workload's HPAs scaling as before at the
    requests the advice writes (``hpa.adjustments``); [] without a Utilization HPA."""
    if not any(h.get("metrics") for h in workload.hpa_conflicts or ()):
        return []
    inputs = inputs_for_workload(workload)
    pod = workload_pod(list(workload.containers.all()))
    written = written_resources(inputs, pod, advise(inputs, pod))
    return adjustments_for_workload(
        workload.hpa_conflicts,
        before=requests_of(pod),
        after={name: amounts[0] for name, amounts in written.items()},
    )


def _with_limits(advice: ContainerAdvice) -> ContainerAdvice:
    """The advice with the requests and limits to write (proportional limits, as
    upstream's ``recommendation_provider.go``)."""
    if advice.source == SOURCE_NONE or advice.target.is_empty():
        return advice
    new = advice.resources_for(advice.target)
    return replace(
        advice,
        requests=new.requests,
        limits=new.limits,
        limit_annotations=new.annotations,
    )


def advise_pod(
    *,
    namespace: str,
    owner_kind: str | None,
    owner_name: str | None,
    containers: Sequence[PodContainer],
    cluster: str | None = None,
    multiplier: float = 1.0,
) -> PodAdvice:
    """``advise`` for a pod of ``owner`` (which may not exist), inputs read now."""
    check_multiplier(multiplier)
    inputs = inputs_for_pod(
        namespace=namespace,
        owner_kind=owner_kind,
        owner_name=owner_name,
        cluster=cluster,
    )
    result = advise(inputs, containers, multiplier=multiplier)
    logger.info(
        "advised pod of %s/%s/%s: %s",
        namespace,
        owner_kind,
        owner_name,
        {a.name: a.source for a in result.containers},
    )
    return result


def _coefficient_advice(
    container: PodContainer,
    coefficient: StaticCoefficient | None,
    workload: Workload | None,
    controlled_values: str,
    namespace: str,
    *,
    controlled_resources: tuple[str, ...] | list[str] = RESOURCE_NAMES,
    default_limit: Resources = NO_RESOURCES,
) -> ContainerAdvice:
    """Seed 004's first deploy: the static coefficient, or nothing if none is set.

    Only ``controlled_resources`` (the container policy's) are scaled.
    """
    why = (
        "vpaweb does not know this workload yet"
        if workload is None
        else f"{workload} has no recommendation for this container yet"
    )
    base = ContainerAdvice(
        name=container.name,
        source=SOURCE_NONE,
        reason="",
        controlled_values=controlled_values,
        current=container,
        default_limit=default_limit,
    )
    if coefficient is None:
        return replace(
            base, reason=f"left as is: {why} and no static coefficient is configured"
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
        return replace(
            base,
            reason=(
                f"left as is: {why}, and the static coefficient scales no resource "
                "the container policy controls"
            ),
        )
    scope = f"namespace {namespace}" if coefficient.namespace else "the global default"
    return replace(
        base,
        source=SOURCE_STATIC_COEFFICIENT,
        reason=(
            f"{why}: static coefficient of {scope} "
            f"(cpu x {_factor_text(coefficient.cpu_factor)}, "
            f"memory x {_factor_text(coefficient.memory_factor)})"
        ),
        target=target,
        coefficient=coefficient,
    )


def _factor_text(factor: float | None) -> str:
    return "1 (not set)" if factor is None else f"{factor:g}"

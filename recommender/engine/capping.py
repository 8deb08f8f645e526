"""Capping recommendations to VPA policies and LimitRanges, as upstream VPA does.

Two entry points:
- ``apply_vpa_policy``: the recommender side, upstream
  ``ApplyVPAPolicy`` in ``vertical-pod-autoscaler/pkg/utils/vpa/capping.go``.
- ``cap_for_pod``: the admission controller and updater side, upstream
  ``cappingRecommendationProcessor.Apply`` in the same file."""
# CPU is int millicores and memory int bytes (``Resources``); upstream compares
# quantities with ``Cmp`` or ``MilliValue()``, both exact on these integers. Every cap
# is kept as a ``Cap`` so the explanation can show it; ``Cap.is_annotated`` marks the
# ones upstream writes into the pod's ``vpaUpdates`` annotation (only caps of Target in
# ``cap_for_pod``).

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from .limits import (
    CONTROLLED_VALUES,
    REQUESTS_AND_LIMITS,
    REQUESTS_ONLY,
    ContainerResources,
    check_resources,
    is_valid_resources,
    proportional_limit,
    scale_proportionally,
)
from .resources import CPU, MEMORY, NO_RESOURCES, RESOURCE_NAMES, Resources

__all__ = [
    "BOUNDS",
    "MODE_AUTO",
    "MODE_INITIAL",
    "MODE_IN_PLACE",
    "MODE_IN_PLACE_OR_RECREATE",
    "MODE_OFF",
    "MODE_RECREATE",
    "Cap",
    "CappedRecommendation",
    "ContainerPolicy",
    "ContainerResources",
    "LimitRangeItem",
    "apply_vpa_policy",
    "cap_for_pod",
    "caps_nothing",
    "combine_limit_ranges",
    "select_container_policy",
]

# ContainerScalingMode (apis/autoscaling.k8s.io/v1/types.go).
MODE_AUTO = "Auto"
MODE_OFF = "Off"
MODES = (MODE_AUTO, MODE_OFF)
# UpdateMode (types.go): how a workload's pods are acted on (Off as above). Auto, a
# deprecated update mode, means Recreate.
MODE_INITIAL = "Initial"
MODE_RECREATE = "Recreate"
MODE_IN_PLACE_OR_RECREATE = "InPlaceOrRecreate"
# Upstream VPA 1.7: resize in place only, never evict.
MODE_IN_PLACE = "InPlace"
# The default container policy's name (DefaultContainerResourcePolicy, types.go).
DEFAULT_CONTAINER_NAME = "*"
# LimitRange item types (k8s.io/api/core/v1 LimitTypeContainer, LimitTypePod).
LIMIT_TYPE_CONTAINER = "Container"
LIMIT_TYPE_POD = "Pod"
LIMIT_TYPES = (LIMIT_TYPE_CONTAINER, LIMIT_TYPE_POD)

# The three capped bounds, in the names of our dataclasses.
TARGET = "target"
LOWER = "lower"
UPPER = "upper"
BOUNDS = (TARGET, LOWER, UPPER)

# cappingAction texts (utils/vpa/capping.go); an annotation is "<resource> <action>".
CAPPED_TO_MIN_ALLOWED = "capped to minAllowed"
CAPPED_TO_MAX_ALLOWED = "capped to maxAllowed"
CAPPED_TO_LIMIT = "capped to container limit"
CAPPED_TO_CONTAINER_LR_MAX = "capped to fit Max in container LimitRange"
CAPPED_TO_CONTAINER_LR_MIN = "capped to fit Min in container LimitRange"
CAPPED_TO_POD_LR_MAX = "capped to fit Max in Pod LimitRange"
CAPPED_TO_POD_LR_MIN = "capped to fit Min in Pod LimitRange"
_CONTAINER_LR_REASONS = (CAPPED_TO_CONTAINER_LR_MIN, CAPPED_TO_CONTAINER_LR_MAX)
_POLICY_REASONS = (CAPPED_TO_MIN_ALLOWED, CAPPED_TO_MAX_ALLOWED)
# Ours, not upstream's: the recommender's --container-recommendation-max-allowed-*
# flags.
CAPPED_TO_GLOBAL_MAX = "capped to the recommender's global maxAllowed"


@dataclass(frozen=True)
class ContainerPolicy:
    """One ``resourcePolicy.containerPolicies[]`` entry; ``"*"`` is the default policy.

    ``controlled_values`` None means "not specified" (upstream default
    RequestsAndLimits): only an
    explicit RequestsAndLimits together with mode Off is rejected, as upstream
    validation does.
    """

    container_name: str
    mode: str = MODE_AUTO
    min_allowed: Resources = NO_RESOURCES
    max_allowed: Resources = NO_RESOURCES
    controlled_resources: tuple[str, ...] = (CPU, MEMORY)
    controlled_values: str | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the field, per the VPA webhook's validation
        (upstream ``pkg/admission-controller/resource/vpa/handler.go``)."""
        if not isinstance(self.container_name, str) or not self.container_name:
            raise ValueError(
                f"container_name must be a non-empty string, not "
                f"{self.container_name!r}"
            )
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {self.mode!r}")
        check_resources("min_allowed", self.min_allowed)
        check_resources("max_allowed", self.max_allowed)
        # admission-controller/resource/vpa/handler.go: "max resource for %v is lower
        # than min".
        for resource in RESOURCE_NAMES:
            low, high = self.min_allowed.get(resource), self.max_allowed.get(resource)
            if low is not None and high is not None and high < low:
                raise ValueError(
                    f"max_allowed {resource} ({high}) is lower than min_allowed ({low})"
                )
        if not isinstance(self.controlled_resources, tuple) or any(
            r not in RESOURCE_NAMES for r in self.controlled_resources
        ):
            raise ValueError(
                "controlled_resources must be a tuple of 'cpu' and 'memory', "
                f"not {self.controlled_resources!r}"
            )
        if (
            self.controlled_values is not None
            and self.controlled_values not in CONTROLLED_VALUES
        ):
            raise ValueError(
                f"controlled_values must be one of {CONTROLLED_VALUES} or None, "
                f"not {self.controlled_values!r}"
            )
        if self.mode == MODE_OFF and self.controlled_values == REQUESTS_AND_LIMITS:
            raise ValueError(
                "controlled_values shouldn't be specified if container scaling mode "
                "is off "
                f"(mode {self.mode!r}, controlled_values {self.controlled_values!r})"
            )

    @property
    def effective_controlled_values(self) -> str:
        """Controlled values with upstream's default (RequestsAndLimits) filled in."""
        return self.controlled_values or REQUESTS_AND_LIMITS


def select_container_policy(
    policies: Sequence[ContainerPolicy], name: str
) -> ContainerPolicy | None:
    """The policy named ``name``, else the ``"*"`` one, else None; never merged.

    ``GetContainerResourcePolicy`` (utils/vpa/api.go): the first exact match wins at
    once,
    the last ``"*"`` seen is the fallback.
    """
    default: ContainerPolicy | None = None
    for policy in policies:
        if not isinstance(policy, ContainerPolicy):
            raise ValueError(
                f"policies must hold ContainerPolicy items, not {policy!r}"
            )
        if policy.container_name == name:
            return policy
        if policy.container_name == DEFAULT_CONTAINER_NAME:
            default = policy
    return default


def controlled_values_for(policies: Sequence[ContainerPolicy], name: str) -> str:
    """``GetContainerControlledValues``, RequestsAndLimits default."""
    policy = select_container_policy(policies, name)
    return REQUESTS_AND_LIMITS if policy is None else policy.effective_controlled_values


@dataclass(frozen=True)
class Cap:
    """One capping step: ``resource`` of ``bound`` went from ``before`` to ``after``."""

    resource: str
    bound: str  # "target" | "lower" | "upper"
    reason: str  # upstream's annotation text, e.g. "cpu capped to minAllowed"
    before: int
    after: int
    is_annotated: bool = True  # upstream writes it into the pod's vpaUpdates annotation


@dataclass(frozen=True)
class CappedRecommendation:
    """A container recommendation after capping, with the caps that were applied."""

    target: Resources
    lower_bound: Resources
    upper_bound: Resources
    uncapped_target: Resources
    caps: tuple[Cap, ...] = ()

    def annotations(self) -> list[str]:
        """The capping texts upstream adds to ``vpaUpdates``, in upstream's order."""
        return [c.reason for c in self.caps if c.is_annotated and c.bound == TARGET]


class RecommendationLike(Protocol):
    """Anything with the four bounds, e.g. ``ContainerRecommendation``."""

    @property
    def target(self) -> Resources: ...
    @property
    def lower_bound(self) -> Resources: ...
    @property
    def upper_bound(self) -> Resources: ...
    @property
    def uncapped_target(self) -> Resources: ...


def _bounds_of(rec: RecommendationLike, argument: str) -> dict[str, Resources]:
    try:
        bounds = {TARGET: rec.target, LOWER: rec.lower_bound, UPPER: rec.upper_bound}
        uncapped = rec.uncapped_target
    except AttributeError:
        raise ValueError(
            f"{argument} needs target, lower_bound, upper_bound and "
            f"uncapped_target: {rec!r}"
        ) from None
    for name, value in bounds.items():
        if not is_valid_resources(value):
            check_resources(f"{argument}.{name}", value)
    if not is_valid_resources(uncapped):
        check_resources(f"{argument}.uncapped_target", uncapped)
    return bounds


class _Capper:
    """Mutable working copy of one recommendation's bounds, recording every cap."""

    def __init__(self, bounds: dict[str, Resources]) -> None:
        self.values = {b: {r: bounds[b].get(r) for r in RESOURCE_NAMES} for b in BOUNDS}
        self.caps: list[Cap] = []

    def set(
        self, bound: str, resource: str, after: int, reason: str, annotate: bool
    ) -> None:
        before = self.values[bound][resource]
        assert before is not None
        self.values[bound][resource] = after
        self.caps.append(
            Cap(resource, bound, f"{resource} {reason}", before, after, annotate)
        )

    def cap_between(
        self,
        bound: str,
        minimum: Mapping[str, int | None],
        maximum: Mapping[str, int | None],
        reasons: tuple[str, str],
        annotate: bool,
    ) -> None:
        """``maybeCapToMin``, then ``maybeCapToMax``, per resource; zeros ignored."""
        for resource in RESOURCE_NAMES:
            value, low = self.values[bound][resource], minimum.get(resource)
            if value is not None and low and value < low:
                self.set(bound, resource, low, reasons[0], annotate)
            value, high = self.values[bound][resource], maximum.get(resource)
            if value is not None and high and value > high:
                self.set(bound, resource, high, reasons[1], annotate)

    def result(self, uncapped_target: Resources) -> CappedRecommendation:
        def res(bound: str) -> Resources:
            return Resources(self.values[bound][CPU], self.values[bound][MEMORY])

        return CappedRecommendation(
            target=res(TARGET),
            lower_bound=res(LOWER),
            upper_bound=res(UPPER),
            uncapped_target=uncapped_target,
            caps=tuple(self.caps),
        )


def apply_vpa_policy(
    rec: RecommendationLike,
    policy: ContainerPolicy | None,
    *,
    global_max: Resources = NO_RESOURCES,
) -> CappedRecommendation:
    """Recommender-side capping (upstream's ``ApplyVPAPolicy``): minAllowed, then
    maxAllowed or the global max.

    ``applyVPAPolicyForContainer`` (utils/vpa/capping.go): per resource the VPA's
    maxAllowed
    wins and ``global_max`` fills the resources it lacks; a missing or zero bound is
    ignored;
    UncappedTarget is left untouched. ``policy`` is the one ``select_container_policy``
    chose.
    """
    bounds = _bounds_of(rec, "rec")
    check_resources("global_max", global_max)
    if policy is not None and not isinstance(policy, ContainerPolicy):
        raise ValueError(f"policy must be a ContainerPolicy or None, not {policy!r}")
    if caps_nothing(policy, global_max):
        # No bound at all (most containers): nothing to cap, the values as they are.
        return CappedRecommendation(
            target=bounds[TARGET],
            lower_bound=bounds[LOWER],
            upper_bound=bounds[UPPER],
            uncapped_target=rec.uncapped_target,
            caps=(),
        )
    own_min = NO_RESOURCES if policy is None else policy.min_allowed
    own_max = NO_RESOURCES if policy is None else policy.max_allowed
    capper = _Capper(bounds)
    for resource in RESOURCE_NAMES:
        minimum = {resource: own_min.get(resource)}
        if own_max.get(resource) is not None:
            maximum, reason = {resource: own_max.get(resource)}, CAPPED_TO_MAX_ALLOWED
        else:
            maximum, reason = {resource: global_max.get(resource)}, CAPPED_TO_GLOBAL_MAX
        for bound in BOUNDS:
            # Upstream annotates nothing on this path: the caps are kept as data only.
            capper.cap_between(
                bound, minimum, maximum, (CAPPED_TO_MIN_ALLOWED, reason), False
            )
    return capper.result(rec.uncapped_target)


def caps_nothing(
    policy: ContainerPolicy | None, global_max: Resources = NO_RESOURCES
) -> bool:
    """Whether ``apply_vpa_policy`` leaves every value as it is: no minAllowed, no
    maxAllowed and no global max (most containers)."""
    return global_max == NO_RESOURCES and (
        policy is None or policy.min_allowed == policy.max_allowed == NO_RESOURCES
    )


@dataclass(frozen=True)
class LimitRangeItem:
    """One ``LimitRange.spec.limits[]`` item; absent resources are None."""

    type: str  # "Container" | "Pod"
    max: Resources = NO_RESOURCES
    min: Resources = NO_RESOURCES
    default: Resources = NO_RESOURCES
    default_request: Resources = NO_RESOURCES
    # maxLimitRequestRatio as the quantity's MilliValue, for both resources (limit ÷
    # request x 1000: "3500m" is 3500 in ``cpu_millicores`` and "2" for memory is 2000
    # in ``memory_bytes``), the unit LimitRanger compares in.
    max_limit_request_ratio: Resources = NO_RESOURCES

    def __post_init__(self) -> None:
        if self.type not in LIMIT_TYPES:
            raise ValueError(f"type must be one of {LIMIT_TYPES}, not {self.type!r}")
        for name in (
            "max",
            "min",
            "default",
            "default_request",
            "max_limit_request_ratio",
        ):
            check_resources(name, getattr(self, name))


def combine_limit_ranges(
    items: Iterable[LimitRangeItem], limit_type: str
) -> LimitRangeItem | None:
    """Merge a namespace's ``limit_type`` items: lowest Max, highest Min, last Default,
    lowest maxLimitRequestRatio.

    ``getLimitRangeItem`` (utils/limitrange/limit_range_calculator.go). An item with no
    max, min, default or ratio is skipped; None when nothing applies.
    ``default_request`` is not merged (upstream's result does not carry it). LimitRanger
    checks every item on its own; a pod passes them all iff it passes the lowest Max,
    the highest Min and the lowest ratio, so the merged item judges as they do.
    """
    if limit_type not in LIMIT_TYPES:
        raise ValueError(f"limit_type must be one of {LIMIT_TYPES}, not {limit_type!r}")
    lowest_max: dict[str, int | None] = {CPU: None, MEMORY: None}
    highest_min: dict[str, int | None] = {CPU: None, MEMORY: None}
    lowest_ratio: dict[str, int | None] = {CPU: None, MEMORY: None}
    default = Resources()
    for item in items:
        if not isinstance(item, LimitRangeItem):
            raise ValueError(f"items must hold LimitRangeItem values, not {item!r}")
        if item.type != limit_type:
            continue
        if (
            item.max.is_empty()
            and item.min.is_empty()
            and item.default.is_empty()
            and item.max_limit_request_ratio.is_empty()
        ):
            continue
        # A whole Default replaces the previous one, not resource by resource.
        if not item.default.is_empty():
            default = item.default
        for resource in RESOURCE_NAMES:
            _keep(lowest_max, resource, item.max.get(resource), min)
            _keep(highest_min, resource, item.min.get(resource), max)
            _keep(
                lowest_ratio, resource, item.max_limit_request_ratio.get(resource), min
            )
    maximum = Resources(lowest_max[CPU], lowest_max[MEMORY])
    minimum = Resources(highest_min[CPU], highest_min[MEMORY])
    ratio = Resources(lowest_ratio[CPU], lowest_ratio[MEMORY])
    if all(r.is_empty() for r in (maximum, minimum, default, ratio)):
        return None
    return LimitRangeItem(
        type=limit_type,
        max=maximum,
        min=minimum,
        default=default,
        max_limit_request_ratio=ratio,
    )


def _keep(
    kept: dict[str, int | None],
    resource: str,
    value: int | None,
    pick: Callable[[int, int], int],
) -> None:
    """Fold one item's amount into ``kept`` with ``pick`` (min or max)."""
    if value is not None:
        current = kept[resource]
        kept[resource] = value if current is None else pick(current, value)


def _boundary_request(
    resource: str,
    request: int | None,
    limit: int | None,
    boundary: int | None,
    default_limit: int | None,
) -> int | None:
    """Upstream ``GetBoundaryRequest``: the request whose limit would be ``boundary``.

    limit_and_request_scaling.go: at the container's limit/request ratio, the limit sits
    exactly on ``boundary``; None = no boundary.
    """
    if not limit:
        limit = default_limit
    if not limit:
        return None
    if not request:
        return boundary
    # CPU works in milli and memory in whole bytes: both our integers, floored.
    return scale_proportionally(request, limit, boundary or 0)


def _container_limit_range_bounds(
    container: ContainerResources, limit_range: LimitRangeItem
) -> tuple[dict[str, int | None], dict[str, int | None]]:
    """``getMinAllowedRecommendation``, ``getMaxAllowedRecommendation``."""
    minimum: dict[str, int | None] = {}
    maximum: dict[str, int | None] = {}
    for resource in RESOURCE_NAMES:
        request = container.requests.get(resource)
        limit = container.limits.get(resource)
        default = limit_range.default.get(resource)
        maximum[resource] = _boundary_request(
            resource, request, limit, limit_range.max.get(resource), default
        )
        lr_min = limit_range.min.get(resource)
        for_limit = _boundary_request(resource, request, limit, lr_min, default)
        # Kubernetes wants both the request and the limit at or above Min.
        minimum[resource] = max(for_limit or 0, lr_min or 0)
    return minimum, maximum


def _apply_pod_limit_range(
    working: dict[str, _Capper],
    containers: Sequence[ContainerResources],
    limit_range: LimitRangeItem,
    resource: str,
    bound: str,
) -> None:
    """``applyPodLimitRange``: scale one bound of one resource over the pod."""
    minimum = limit_range.min.get(resource) or 0
    maximum = limit_range.max.get(resource) or 0
    default = limit_range.default.get(resource)
    sum_limit = 0
    sum_rec = 0
    for container in containers:
        request = container.requests.get(resource)
        capper = working.get(container.name)
        # No recommendation: the container keeps its current request.
        rec = (
            (request or 0) if capper is None else (capper.values[bound][resource] or 0)
        )
        limit, _ = proportional_limit(
            resource, container.limits.get(resource), request, rec, default
        )
        sum_limit += limit or 0
        sum_rec += rec
    if (
        minimum <= sum_limit
        and minimum <= sum_rec
        and (maximum == 0 or maximum >= sum_limit)
    ):
        return
    if minimum > sum_rec and sum_limit != 0:
        # Raise every recommendation so that their sum reaches Min: CPU milli ceiling
        # (roundUpToFullUnit in scaleQuantityProportionallyCPU), memory floor.
        for container in containers:
            capper = working.get(container.name)
            value = None if capper is None else capper.values[bound][resource]
            if capper is None or value is None:
                continue
            after = scale_proportionally(
                value, sum_rec, minimum, round_up=resource == CPU
            )
            if after != value:
                capper.set(bound, resource, after, CAPPED_TO_POD_LR_MIN, False)
        return
    if sum_limit == 0:
        return
    target_total = 0
    if minimum > sum_limit:
        target_total = minimum
    if maximum != 0 and maximum < sum_limit:
        target_total = maximum
    # Scale so that the limits sum to the target total: CPU milli floor, memory floor.
    reason = CAPPED_TO_POD_LR_MAX if target_total < sum_limit else CAPPED_TO_POD_LR_MIN
    for container in containers:
        capper = working.get(container.name)
        value = None if capper is None else capper.values[bound][resource]
        if capper is None or value is None:
            continue
        after = scale_proportionally(value, sum_limit, target_total)
        if after != value:
            capper.set(bound, resource, after, reason, False)


def cap_for_pod(
    recommendations: Mapping[str, RecommendationLike],
    containers: Sequence[ContainerResources],
    *,
    policies: Sequence[ContainerPolicy] = (),
    container_limit_range: LimitRangeItem | None = None,
    pod_limit_range: LimitRangeItem | None = None,
) -> dict[str, CappedRecommendation]:
    """Admission/updater capping (upstream's ``cappingRecommendationProcessor.Apply``)
    of a VPA's recommendations for one pod.

    ``recommendations`` maps container name to its recommendation (in the VPA's order);
    ``containers`` are the pod's containers with current requests and limits; the limit
    ranges are the namespace's merged items (``combine_limit_ranges``). Returns capped
    recommendations by container name; names not in the pod are dropped. With a Pod
    LimitRange, containers without a recommendation but with requests get one (target =
    requests), as upstream's ``insertRequestsForMissingRecommendations`` does.
    """
    if not isinstance(recommendations, Mapping):
        raise ValueError(f"recommendations must be a mapping, not {recommendations!r}")
    for container in containers:
        if not isinstance(container, ContainerResources):
            raise ValueError(
                f"containers must hold ContainerResources, not {container!r}"
            )
    for argument, item, kind in (
        ("container_limit_range", container_limit_range, LIMIT_TYPE_CONTAINER),
        ("pod_limit_range", pod_limit_range, LIMIT_TYPE_POD),
    ):
        if item is not None and (
            not isinstance(item, LimitRangeItem) or item.type != kind
        ):
            raise ValueError(
                f"{argument} must be a {kind!r} LimitRangeItem, not {item!r}"
            )
    if not recommendations and not policies:
        return {}
    working: dict[str, _Capper] = {}
    uncapped: dict[str, Resources] = {}
    for name, rec in recommendations.items():
        working[name] = _Capper(_bounds_of(rec, f"recommendations[{name!r}]"))
        uncapped[name] = rec.uncapped_target

    if pod_limit_range is not None:
        for container in containers:
            if container.name not in working and not container.requests.is_empty():
                synthetic = {
                    TARGET: container.requests,
                    LOWER: Resources(),
                    UPPER: Resources(),
                }
                working[container.name] = _Capper(synthetic)
                uncapped[container.name] = Resources()
        # capProportionallyToPodLimitRange: UpperBound, then Target, then LowerBound.
        for bound in (UPPER, TARGET, LOWER):
            for resource in (CPU, MEMORY):
                _apply_pod_limit_range(
                    working, containers, pod_limit_range, resource, bound
                )

    by_name = {c.name: c for c in containers}
    result: dict[str, CappedRecommendation] = {}
    for name, capper in working.items():
        if name not in by_name:
            continue
        container = by_name[name]
        policy = select_container_policy(policies, name)
        if container_limit_range is not None:
            lr_min, lr_max = _container_limit_range_bounds(
                container, container_limit_range
            )
        requests_only = controlled_values_for(policies, name) == REQUESTS_ONLY
        limits = {r: container.limits.get(r) for r in RESOURCE_NAMES}
        # getCappedRecommendationForContainer: Target (annotated), LowerBound,
        # UpperBound.
        for bound in (TARGET, LOWER, UPPER):
            annotate = bound == TARGET
            if container_limit_range is not None:
                capper.cap_between(
                    bound, lr_min, lr_max, _CONTAINER_LR_REASONS, annotate
                )
            if policy is not None:
                capper.cap_between(
                    bound,
                    policy.min_allowed.to_dict(),
                    policy.max_allowed.to_dict(),
                    _POLICY_REASONS,
                    annotate,
                )
            if requests_only:
                # capRecommendationToContainerLimit: any present limit, even 0, caps.
                for resource in RESOURCE_NAMES:
                    value, limit = capper.values[bound][resource], limits[resource]
                    if value is not None and limit is not None and value > limit:
                        capper.set(bound, resource, limit, CAPPED_TO_LIMIT, annotate)
        result[name] = capper.result(uncapped[name])
    return result

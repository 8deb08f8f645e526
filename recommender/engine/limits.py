"""Limits kept in proportion to requests, as upstream's admission controller does.

Rules from ``vertical-pod-autoscaler/pkg/utils/vpa/limit_and_request_scaling.go``
and ``admission-controller/resource/pod/recommendation/recommendation_provider.go``.
CPU is in int millicores and memory in int bytes, so upstream's ``MilliValue()``
(CPU) and ``Value()`` (memory) are the numbers themselves; products use Python's
unbounded ints where upstream uses ``math/big``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

from .resources import CPU, MEMORY, NO_RESOURCES, RESOURCE_NAMES, Resources

# math.MaxInt64: the cap upstream applies when a scaled limit leaves int64
# (scaleQuantityProportionallyCPU / scaleQuantityProportionallyMem).
MAX_INT64 = 2**63 - 1

# VPA ContainerControlledValues (apis/autoscaling.k8s.io/v1/types.go).
REQUESTS_AND_LIMITS = "RequestsAndLimits"
REQUESTS_ONLY = "RequestsOnly"
CONTROLLED_VALUES = (REQUESTS_AND_LIMITS, REQUESTS_ONLY)


def check_amount(argument: str, value: object) -> int | None:
    """Return ``value`` if None or an int in [0, MaxInt64]; else raise ValueError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{argument} must be an int or None, not {value!r}")
    if not 0 <= value <= MAX_INT64:
        raise ValueError(f"{argument} must be between 0 and 2**63-1, not {value!r}")
    return value


def is_valid_resources(value: object) -> TypeGuard[Resources]:
    """Whether ``check_resources`` accepts ``value``, without naming anything: the
    check of every bound of every container each cycle (the names cost more than the
    check). Plain ints only: the rest goes to ``check_resources``."""
    if not isinstance(value, Resources):
        return False
    cpu, memory = value.cpu_millicores, value.memory_bytes
    return (cpu is None or (type(cpu) is int and 0 <= cpu <= MAX_INT64)) and (
        memory is None or (type(memory) is int and 0 <= memory <= MAX_INT64)
    )


def check_resources(argument: str, value: object) -> Resources:
    """Return ``value`` if a ``Resources`` of valid amounts; else raise ValueError."""
    if is_valid_resources(value):
        return value
    if not isinstance(value, Resources):
        raise ValueError(f"{argument} must be a Resources, not {value!r}")
    check_amount(f"{argument}.cpu_millicores", value.cpu_millicores)
    check_amount(f"{argument}.memory_bytes", value.memory_bytes)
    return value


def check_resource_name(argument: str, value: object) -> str:
    """Return ``value`` if it is "cpu" or "memory"; else raise ValueError."""
    if value not in RESOURCE_NAMES:
        raise ValueError(f"{argument} must be 'cpu' or 'memory', not {value!r}")
    return value


@dataclass(frozen=True)
class ContainerResources:
    """A container's current requests and limits (the caller picks status over spec)."""

    name: str
    requests: Resources = NO_RESOURCES
    limits: Resources = NO_RESOURCES

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, not {self.name!r}")
        check_resources("requests", self.requests)
        check_resources("limits", self.limits)


def scale_proportionally(
    amount: int, base: int, result: int, *, round_up: bool = False
) -> int:
    """``amount * result / base`` floored (or ceiled), capped at MaxInt64."""
    if base <= 0:
        raise ValueError(f"base must be positive, not {base!r}")
    numerator = amount * result
    scaled = -(-numerator // base) if round_up else numerator // base
    return min(scaled, MAX_INT64)


def proportional_limit(
    resource: str,
    original_limit: int | None,
    original_request: int | None,
    new_request: int | None,
    default_limit: int | None = None,
) -> tuple[int | None, str | None]:
    """The limit keeping the original limit/request ratio at ``new_request``
    (upstream's ``getProportionalResourceLimit``).

    Returns ``(limit, annotation)``; ``limit`` None means "write no limit". Mirrors
    ``getProportionalResourceLimit`` in utils/vpa/limit_and_request_scaling.go.
    """
    check_resource_name("resource", resource)
    check_amount("original_limit", original_limit)
    check_amount("original_request", original_request)
    check_amount("new_request", new_request)
    check_amount("default_limit", default_limit)
    if not original_limit:
        original_limit = default_limit
    if not original_limit:
        return None, f"{resource}: limit NOT set since originalLimit is nil or 0"
    if not new_request:
        return None, f"{resource}: limit NOT set since recommendedRequest is nil or 0"
    # K8s treats a missing request as equal to the limit: keep limit == request.
    if not original_request:
        return new_request, None
    # Compared as MilliValue() upstream; for whole bytes that is plain equality.
    if original_request == original_limit:
        return new_request, None
    # CPU divides MilliValue()s and memory Value()s; both are our integers, floored.
    scaled = original_limit * new_request // original_request
    if scaled > MAX_INT64:
        return (
            MAX_INT64,
            f"{resource}: failed to keep limit to request ratio; "
            "capping limit to int64",
        )
    return scaled, None


@dataclass(frozen=True)
class NewContainerResources:
    """What to write into one container: ``None`` amounts are left as they are."""

    requests: Resources
    limits: Resources
    annotations: tuple[str, ...] = ()


def ratio_exceeded(limit: int, request: int, ratio_milli: int) -> bool:
    """LimitRanger's ``limitRequestRatioConstraint`` comparison, in its float64
    arithmetic: limit ÷ request x 1000 above the ratio's MilliValue."""
    return float(limit) / float(request) * 1000 > float(ratio_milli)


def request_for_ratio(limit: int, ratio_milli: int) -> int:
    """The smallest request whose ratio to ``limit`` LimitRanger admits."""
    if ratio_milli <= 0:
        raise ValueError(f"ratio_milli must be positive, not {ratio_milli!r}")
    request = max(1, -(-limit * 1000 // ratio_milli))
    while ratio_exceeded(limit, request, ratio_milli):
        request += 1  # float rounding at the boundary: at most a step or two
    return request


def requests_and_limits_for_container(
    container: ContainerResources,
    target: Resources,
    *,
    controlled_values: str = REQUESTS_AND_LIMITS,
    default_limit: Resources = NO_RESOURCES,
    max_limit_request_ratio: Resources = NO_RESOURCES,
) -> NewContainerResources:
    """Requests = the capped target; limits proportional unless RequestsOnly
    (upstream's ``recommendation_provider.go``).

    ``target`` is the capped Target from ``cap_for_pod``; ``default_limit`` is the
    container LimitRange's ``default``. Upstream passes a nil resource policy when the
    VPA's update mode is Off, which makes controlled values RequestsAndLimits: callers
    do the same. ``max_limit_request_ratio`` (the Container LimitRange's, as
    MilliValues) raises a request whose limit stays as it is (RequestsOnly, or no
    limit written) to the smallest one LimitRanger admits with that limit; upstream
    VPA does not, and its patch is then refused (a proportional limit keeps the pod's
    own ratio).
    """
    if not isinstance(container, ContainerResources):
        raise ValueError(f"container must be a ContainerResources, not {container!r}")
    check_resources("target", target)
    check_resources("default_limit", default_limit)
    check_resources("max_limit_request_ratio", max_limit_request_ratio)
    if controlled_values not in CONTROLLED_VALUES:
        raise ValueError(
            f"controlled_values must be one of {CONTROLLED_VALUES}, "
            f"not {controlled_values!r}"
        )
    if controlled_values == REQUESTS_ONLY:
        requests, notes = _within_ratio(
            target, container.limits, NO_RESOURCES, max_limit_request_ratio
        )
        return NewContainerResources(
            requests=requests, limits=NO_RESOURCES, annotations=notes
        )
    limits: dict[str, int | None] = {}
    annotations: list[str] = []
    # GetProportionalLimit: CPU then memory, annotations in that order.
    for resource in (CPU, MEMORY):
        limit, annotation = proportional_limit(
            resource,
            container.limits.get(resource),
            container.requests.get(resource),
            target.get(resource),
            default_limit.get(resource),
        )
        limits[resource] = limit
        if annotation is not None:
            annotations.append(annotation)
    new_limits = Resources(cpu_millicores=limits[CPU], memory_bytes=limits[MEMORY])
    requests, notes = _within_ratio(
        target, container.limits, new_limits, max_limit_request_ratio
    )
    # GetProportionalLimit returns nil (and the provider keeps no annotation) when no
    # resource gets a limit.
    if new_limits.is_empty():
        return NewContainerResources(
            requests=requests, limits=NO_RESOURCES, annotations=notes
        )
    return NewContainerResources(
        requests=requests,
        limits=new_limits,
        annotations=(*annotations, *notes),
    )


def _within_ratio(
    requests: Resources,
    current_limits: Resources,
    new_limits: Resources,
    ratio_milli: Resources,
) -> tuple[Resources, tuple[str, ...]]:
    """``requests`` with each one whose limit is kept (not in ``new_limits``) raised
    to what ``ratio_milli`` admits with that limit; and a note per raise."""
    notes: list[str] = []
    for resource in RESOURCE_NAMES:
        request, ratio = requests.get(resource), ratio_milli.get(resource)
        limit = current_limits.get(resource)
        if request is None or not ratio or not limit:
            continue
        if new_limits.get(resource) is not None:
            continue  # proportional: the pod's own limit:request ratio
        needed = request_for_ratio(limit, ratio)
        if request < needed:
            requests = requests.with_amount(resource, needed)
            notes.append(
                f"{resource}: request raised from {_text(resource, request)} to "
                f"{_text(resource, needed)} to keep the LimitRange's "
                f"maxLimitRequestRatio {ratio / 1000:g} with the limit "
                f"{_text(resource, limit)}"
            )
    return requests, tuple(notes)


def _text(resource: str, amount: int) -> str:
    return f"{amount}m" if resource == CPU else f"{amount} bytes"

"""What the API server's LimitRanger refuses in a pod, after mutating webhooks."""
# kube-apiserver's LimitRanger admission plugin (plugin/pkg/admission/limitranger,
# ``PodValidateLimitFunc``) validates a pod against each LimitRange item of its
# namespace after every mutating webhook ran (and a pod resize as well), and refuses it
# with 403 on the first broken rule. The rules, per resource of the item:
#
# - ``min`` (``minConstraint``): the request must exist and be at least min; a limit, if
#   any, too;
# - ``max`` (``maxConstraint``): the limit must exist and be at most max; a request, if
#   any, too;
# - ``maxLimitRequestRatio`` (``limitRequestRatioConstraint``): request and limit must
#   exist and be non-zero, and limit ÷ request x 1000 (float64) at most the ratio's
#   MilliValue.
#
# A Container item judges every container and init container on its own; a Pod item
# judges the pod's totals (``podRequests``/``podLimits``): the containers' sum, with
# native sidecars added, and at least each plain init container's amount plus the
# sidecars started before it. A resource is in a total when any container has it.
# The API server's own validation also refuses a request above its limit (422).
#
# ``defaultRequest`` and ``default`` are applied by LimitRanger *before* the webhooks
# (the webhook sees the pod with them); they matter here only through the pod received.
#
# Amounts are ``Resources`` (int millicores, int bytes): the comparisons of upstream's
# MilliValues are exact on them. Problems are keyed ``(scope, resource, rule)`` so a
# caller can tell what a change newly breaks from what the pod broke already.

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .capping import LIMIT_TYPE_CONTAINER, LIMIT_TYPE_POD, LimitRangeItem
from .limits import ratio_exceeded
from .quantity import format_cpu, format_memory
from .resources import CPU, RESOURCE_NAMES, Resources

__all__ = [
    "APP",
    "INIT",
    "SIDECAR",
    "LimitedContainer",
    "limit_ranger_problems",
    "pod_limits",
    "pod_requests",
]

# What a container is to the pod's totals.
APP = "container"
INIT = "init"  # a plain init container: runs before the others, alone
SIDECAR = "sidecar"  # an init container with restartPolicy Always
KINDS = (APP, INIT, SIDECAR)

ProblemKey = tuple[str, str, str]


@dataclass(frozen=True)
class LimitedContainer:
    """One container's requests and limits, as LimitRanger sees them."""

    name: str
    kind: str
    requests: Resources
    limits: Resources

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {self.kind!r}")


def _total(containers: Sequence[LimitedContainer], *, limits: bool) -> Resources:
    """``podRequests`` / ``podLimits`` of limitranger/admission.go (no overhead)."""
    amounts: dict[str, int | None] = {}
    for resource in RESOURCE_NAMES:
        total: int | None = None
        sidecars: int | None = None
        init_peak: int | None = None
        for container in containers:
            value = (container.limits if limits else container.requests).get(resource)
            if container.kind == APP:
                total = _add(total, value)
            elif container.kind == SIDECAR:
                total = _add(total, value)
                sidecars = _add(sidecars, value)
                init_peak = _max(init_peak, sidecars)
            else:
                init_peak = _max(init_peak, _add(_add(None, value), sidecars))
        amounts[resource] = _max(total, init_peak)
    return Resources(amounts[CPU], amounts["memory"])


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else a + b


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def pod_requests(containers: Sequence[LimitedContainer]) -> Resources:
    """The pod's requests as LimitRanger's Pod item judges them."""
    return _total(containers, limits=False)


def pod_limits(containers: Sequence[LimitedContainer]) -> Resources:
    """The pod's limits as LimitRanger's Pod item judges them."""
    return _total(containers, limits=True)


def _text(resource: str, amount: int) -> str:
    return format_cpu(amount) if resource == CPU else format_memory(amount)


def _item_problems(
    scope: str,
    limit_type: str,
    requests: Resources,
    limits: Resources,
    item: LimitRangeItem,
) -> dict[ProblemKey, str]:
    """The rules of ``item`` that ``requests``/``limits`` break, in LimitRanger's
    words."""
    found: dict[ProblemKey, str] = {}
    per = f"per {limit_type}"
    for resource in RESOURCE_NAMES:
        request, limit = requests.get(resource), limits.get(resource)
        low = item.min.get(resource)
        if low is not None:
            shown = _text(resource, low)
            if request is None:
                found[(scope, resource, "min")] = (
                    f"{scope}: minimum {resource} usage {per} is {shown}, "
                    "no request is specified"
                )
            elif request < low or (limit is not None and limit < low):
                amount, what = (
                    (request, "request") if request < low else (limit, "limit")
                )
                assert amount is not None
                found[(scope, resource, "min")] = (
                    f"{scope}: minimum {resource} usage {per} is {shown}, but {what} "
                    f"is {_text(resource, amount)}"
                )
        high = item.max.get(resource)
        if high is not None:
            shown = _text(resource, high)
            if limit is None:
                found[(scope, resource, "max")] = (
                    f"{scope}: maximum {resource} usage {per} is {shown}, "
                    "no limit is specified"
                )
            elif limit > high or (request is not None and request > high):
                amount, what = (
                    (limit, "limit") if limit > high else (request, "request")
                )
                assert amount is not None
                found[(scope, resource, "max")] = (
                    f"{scope}: maximum {resource} usage {per} is {shown}, but {what} "
                    f"is {_text(resource, amount)}"
                )
        ratio = item.max_limit_request_ratio.get(resource)
        if ratio is not None:
            shown = f"{ratio / 1000:g}"
            if not request or not limit:
                found[(scope, resource, "ratio")] = (
                    f"{scope}: {resource} max limit to request ratio {per} is {shown}, "
                    "but no request or no limit is specified (or one is 0)"
                )
            elif ratio_exceeded(limit, request, ratio):
                found[(scope, resource, "ratio")] = (
                    f"{scope}: {resource} max limit to request ratio {per} is {shown}, "
                    f"but provided ratio is {limit / request:f}"
                )
    return found


def limit_ranger_problems(
    containers: Sequence[LimitedContainer],
    container_item: LimitRangeItem | None,
    pod_item: LimitRangeItem | None,
) -> dict[ProblemKey, str]:
    """What the API server would refuse in a pod of ``containers``: LimitRanger's
    rules of the namespace's merged Container and Pod items, and a request above its
    limit."""
    found: dict[ProblemKey, str] = {}
    for container in containers:
        for resource in RESOURCE_NAMES:
            request = container.requests.get(resource)
            limit = container.limits.get(resource)
            if request is not None and limit is not None and request > limit:
                found[(container.name, resource, "request<=limit")] = (
                    f"{container.name}: {resource} request "
                    f"{_text(resource, request)} above its limit "
                    f"{_text(resource, limit)}"
                )
        if container_item is not None:
            found.update(
                _item_problems(
                    container.name,
                    LIMIT_TYPE_CONTAINER,
                    container.requests,
                    container.limits,
                    container_item,
                )
            )
    if pod_item is not None:
        found.update(
            _item_problems(
                "pod",
                LIMIT_TYPE_POD,
                pod_requests(containers),
                pod_limits(containers),
                pod_item,
            )
        )
    return found

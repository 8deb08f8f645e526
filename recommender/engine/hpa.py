"""The HorizontalPodAutoscaler target that keeps an HPA scaling at the same usage after
the requests it measures utilization against change.

An autoscaling/v2 ``Resource`` (or ``ContainerResource``) metric with a ``Utilization``
target compares the pods' average usage with ``averageUtilization`` percent of their
request (the sum of the requests of the pod's containers, or of the one container):
the HPA controller's ``GetResourceUtilizationRatio`` (pkg/controller/podautoscaler/
metrics/utilization.go) computes ``usage * 100 / request``. Lowering the request raises
that ratio and the HPA adds replicas for the same load; raising it removes replicas."""
# The HPA keeps its behaviour when it triggers at the same absolute usage per pod:
#
#     new averageUtilization = old averageUtilization x old request / new request
#
# rounded to the nearest whole percent (the field is an int32), and at least 1 (the API
# server's validation: ``must be greater than 0``, autoscaling/v2 ValidateMetricTarget).
# When the rounded percent would leave that range, or when rounding would move the
# trigger point by more than ``MAX_ROUNDING_ERROR`` of it, the equivalent
# ``AverageValue`` target (the same usage per pod as an absolute quantity) is returned
# instead.
#
# ``desired_replicas`` is the replica count such an HPA asks for at a usage and a
# request (upstream's formula, with its 0.1 tolerance and the min/max clamp).
#
# Pure: amounts in, amounts out (CPU in millicores, memory in bytes).

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recommender.engine.resources import RESOURCE_NAMES

# autoscaling/v2 ValidateMetricTarget: averageUtilization must be greater than 0.
MIN_UTILIZATION_PERCENT = 1
# averageUtilization is an int32 (k8s.io/api/autoscaling/v2 MetricTarget).
MAX_UTILIZATION_PERCENT = 2**31 - 1
# Rounding to a whole percent may move the trigger point by at most this share of it
# (0.5 % at a 100 % target; a 3 % target rounds by up to 17 %): past that, the exact
# AverageValue target is given instead.
MAX_ROUNDING_ERROR = 0.05
UTILIZATION = "Utilization"
AVERAGE_VALUE = "AverageValue"


@dataclass(frozen=True)
class HpaTarget:
    """An HPA metric target: ``Utilization`` percent or ``AverageValue`` per pod."""

    type: str  # UTILIZATION | AVERAGE_VALUE
    average_utilization: int | None = None
    average_value: int | None = None  # millicores (cpu) or bytes (memory)

    def trigger_amount(self, request: int) -> float:
        """Usage per pod at which the HPA starts to scale out, for pods requesting
        ``request`` (ignored for an AverageValue target)."""
        if self.type == UTILIZATION:
            assert self.average_utilization is not None
            return self.average_utilization * request / 100.0
        assert self.average_value is not None
        return float(self.average_value)


def adjusted_target(
    *, resource: str, target: HpaTarget, old_request: int, new_request: int
) -> HpaTarget:
    """The target that triggers at the same usage per pod once the pods request
    ``new_request`` instead of ``old_request`` (sums over the measured containers).

    An AverageValue target does not depend on the request: it is returned as is.
    Raises ValueError naming the argument for a resource other than cpu/memory or a
    request that is not positive.
    """
    if resource not in RESOURCE_NAMES:
        raise ValueError(f"resource must be one of {RESOURCE_NAMES}, not {resource!r}")
    for name, amount in (("old_request", old_request), ("new_request", new_request)):
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise ValueError(f"{name} must be a positive integer, not {amount!r}")
    if target.type == AVERAGE_VALUE:
        return target
    if target.type != UTILIZATION or target.average_utilization is None:
        raise ValueError(f"target must be Utilization or AverageValue, not {target!r}")
    if target.average_utilization < MIN_UTILIZATION_PERCENT:
        raise ValueError(
            "target.average_utilization must be at least "
            f"{MIN_UTILIZATION_PERCENT}, not {target.average_utilization}"
        )
    exact = target.average_utilization * old_request / new_request
    percent = round(exact)
    trigger = target.average_utilization * old_request / 100.0
    if (
        MIN_UTILIZATION_PERCENT <= percent <= MAX_UTILIZATION_PERCENT
        and abs(percent - exact) <= MAX_ROUNDING_ERROR * exact
    ):
        return HpaTarget(UTILIZATION, average_utilization=percent)
    # The same usage per pod, as a quantity: whole millicores or bytes, at least 1
    # (the API server accepts no zero target).
    return HpaTarget(AVERAGE_VALUE, average_value=max(1, round(trigger)))


def is_request_based(resource: str, target: HpaTarget) -> bool:
    """Whether the target depends on the request (a cpu/memory Utilization target)."""
    return resource in RESOURCE_NAMES and target.type == UTILIZATION


# The HPA controller's default --horizontal-pod-autoscaler-tolerance: a usage ratio
# within 10 % of 1 keeps the replica count.
HPA_TOLERANCE = 0.1


def desired_replicas(
    *,
    replicas: np.ndarray,
    usage: np.ndarray,
    request: np.ndarray,
    target_utilization: int,
    min_replicas: int,
    max_replicas: int | None,
) -> np.ndarray:
    """The replica count a Utilization HPA asks for at each moment (float64; NaN
    where there are no pods or no request), upstream's formula
    (pkg/controller/podautoscaler/replica_calculator.go):

        utilization = usage / (replicas x request) x 100
        ratio = utilization / target_utilization
        desired = replicas if |ratio - 1| <= HPA_TOLERANCE else ceil(replicas x ratio)

    clamped to [min_replicas, max_replicas]. ``usage`` is the measured pods' summed
    usage, ``request`` one pod's request (same unit), ``replicas`` the pods running.
    Behaviour policies and stabilization windows are not modelled.
    """
    pods = np.asarray(replicas, dtype=np.float64)
    per_pod = np.asarray(request, dtype=np.float64)
    valid = (pods > 0) & (per_pod > 0) & np.isfinite(per_pod) & np.isfinite(usage)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.asarray(usage, dtype=np.float64) / (pods * per_pod)
        ratio = ratio * 100.0 / target_utilization
        # ceil without float noise: 490m at 100m against 70 % is 7 pods, not 8.
        scaled = np.ceil(np.round(pods * ratio, 9))
    desired = np.where(np.abs(ratio - 1.0) <= HPA_TOLERANCE, pods, scaled)
    desired = np.maximum(desired, min_replicas)
    if max_replicas is not None:
        desired = np.minimum(desired, max_replicas)
    return np.where(valid, desired, np.nan)

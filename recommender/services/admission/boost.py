"""The webhook's CPU startup boost: a new pod's app containers admitted with more CPU.

``boost_plans`` raises each recommended container's CPU request (and its limit at the
same ratio) by the policy's ``startup_boost`` (``engine.startup_boost``). Guarantees:
the QoS class never changes; no boosted request is above maxAllowed, and a pod that
would fit no node boosted is not boosted; only modes whose updater resizes running pods
boost; every boosted pod carries ``vpaweb.io/startup-boost`` (the unboosted CPU request
and limit of each boosted container, and the duration) for the updater's shrink
(services/actuation/boost.py).
"""
# Initial never touches a running pod, so a pod it boosted could never be shrunk back:
# it boosts nothing (the decision's reason says so).

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from recommender import metrics
from recommender.engine.capping import select_container_policy
from recommender.engine.limits import REQUESTS_ONLY
from recommender.engine.quantity import format_cpu
from recommender.engine.resources import CPU
from recommender.engine.startup_boost import BOOST_ANNOTATION, boosted_cpu, parse_boost
from recommender.models.policy import ACTING_MODES
from recommender.services.admission.patch import ContainerPlan, escape_pointer
from recommender.services.admission.snapshot import WorkloadEntry
from recommender.services.advice.advise import fits_no_node, pod_request


@dataclass(frozen=True)
class Boost:
    """What the webhook boosted in one pod (``containers`` empty: nothing, ``why``
    says why not)."""

    duration_s: int = 0
    # name -> {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}}: unboosted
    containers: dict[str, dict[str, dict[str, str]]] | None = None
    why: str = ""

    def annotation(self) -> str:
        """The ``vpaweb.io/startup-boost`` value."""
        return json.dumps(
            {"duration_s": self.duration_s, "containers": self.containers or {}},
            separators=(",", ":"),
            sort_keys=True,
        )


def boost_plans(
    *, entry: WorkloadEntry, plans: Sequence[ContainerPlan]
) -> tuple[list[ContainerPlan], Boost | None]:
    """The plans with boosted CPU, and the boost (None: the policy has none)."""
    inputs = entry.inputs
    policy = (
        None
        if inputs is None or inputs.workload is None
        else (getattr(inputs.workload, "policy", None))
    )
    try:
        spec = parse_boost(getattr(policy, "startup_boost", None))
    except ValueError:  # validated on save; a hand-edited row is no boost
        spec = None
    if spec is None or inputs is None:
        return list(plans), None
    if entry.mode not in ACTING_MODES:
        return list(plans), Boost(
            why=f"mode {entry.mode} never resizes a running pod, so it is not boosted"
        )
    boosted: list[ContainerPlan] = []
    unboosted: dict[str, dict[str, dict[str, str]]] = {}
    skipped: list[str] = []
    for plan in plans:
        request = plan.requests_after.cpu_millicores
        # Only app containers the advice sized (a recommendation) are boosted; a
        # container the advice left alone has an ``unchanged`` plan.
        sized = not plan.reason.startswith("left as is")
        if plan.list_key != "containers" or not sized or request is None:
            boosted.append(plan)
            continue
        policy_entry = select_container_policy(inputs.policies, plan.name)
        limit = plan.limits_after.cpu_millicores
        one = boosted_cpu(
            spec,
            request_millicores=request,
            limit_millicores=limit,
            requests_only=policy_entry is not None
            and policy_entry.controlled_values == REQUESTS_ONLY,
            cap_millicores=None
            if policy_entry is None
            else policy_entry.max_allowed.cpu_millicores,
        )
        if one.skip:
            skipped.append(f"{plan.name}: {one.skip}")
            boosted.append(plan)
            continue
        record = {"requests": {CPU: format_cpu(request)}}
        set_limits = plan.set_limits
        if limit is not None and one.limit_millicores is not None:
            record["limits"] = {CPU: format_cpu(limit)}
            set_limits = set_limits.with_amount(CPU, one.limit_millicores)
        unboosted[plan.name] = record
        boosted.append(
            replace(
                plan,
                set_requests=plan.set_requests.with_amount(CPU, one.request_millicores),
                set_limits=set_limits,
                notes=(
                    *plan.notes,
                    f"startup boost: cpu {format_cpu(request)} -> "
                    f"{format_cpu(one.request_millicores)} until Ready + "
                    f"{spec.duration_s} s",
                ),
            )
        )
    if not unboosted:
        return list(plans), Boost(why="; ".join(skipped) or "no container to boost")
    too_big = fits_no_node(
        inputs.node_allocatables,
        *pod_request(
            (p.list_key == "initContainers", p.requests_after) for p in boosted
        ),
    )
    if too_big:
        return list(plans), Boost(why=f"not boosted: {too_big}")
    return boosted, Boost(duration_s=spec.duration_s, containers=unboosted)


def boost_patch(boost: Boost | None) -> list[dict[str, Any]]:
    """The annotation operation of a boosted pod (after ``build_patch``, which makes
    sure ``/metadata/annotations`` exists)."""
    if boost is None or not boost.containers:
        return []
    return [
        {
            "op": "add",
            "path": "/metadata/annotations/" + escape_pointer(BOOST_ANNOTATION),
            "value": boost.annotation(),
        }
    ]


def boost_text(boost: Boost | None) -> str:
    """What the decision's reason says of the boost ("" without one)."""
    if boost is None:
        return ""
    if boost.containers:
        return (
            f"; startup boost of {', '.join(sorted(boost.containers))} until Ready "
            f"+ {boost.duration_s} s"
        )
    return f"; no startup boost: {boost.why}"


def count_boost(patch: Sequence[dict[str, Any]]) -> None:
    """Count a sent patch that boosts (vpaweb_startup_boosts_total, event boosted)."""
    path = "/metadata/annotations/" + escape_pointer(BOOST_ANNOTATION)
    if any(op.get("path") == path for op in patch):
        metrics.STARTUP_BOOSTS.labels(event="boosted").inc()

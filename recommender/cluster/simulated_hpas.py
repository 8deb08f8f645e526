"""The demo fleet's HorizontalPodAutoscalers, so the HPA panel, the HPA-aware outputs
and the coordinated HPA mode can be seen without writing one.

About one Deployment in ``HPA_SHARE`` (chosen by ``stable_hash``, so the fleet's other
draws are unchanged) has an autoscaling/v2 HPA in the API server's shape after
defaulting (``minReplicas`` set, no ``behavior``: k8s-wire hpa/02, 04), summarised by
``kube_objects.hpa_of`` as discovery summarises a real cluster's. What the simulated
writer patched (``HpaOverride``) replaces its ``spec.metrics`` and bumps its
``resourceVersion``."""
# The shapes users meet:
# - ``cpu-utilization``: a ``Resource`` cpu ``Utilization`` target (60 to 80 %);
# - ``memory-average-value``: a ``Resource`` memory ``AverageValue`` target (80 % of
#   the pod's memory request, in MiB);
# - ``two-metrics``: both, the memory one as a ``ContainerResource`` metric of the
#   main container.

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recommender.cluster.kube_objects import hpa_of
from recommender.engine.quantity import format_memory

MIB = 2**20
# One Deployment in this many has an HPA.
HPA_SHARE = 8
SHAPES = ("cpu-utilization", "memory-average-value", "two-metrics")
CPU_TARGETS = (60, 70, 75, 80)


@dataclass(frozen=True)
class HpaOverride:
    """An HPA as the simulated writer left it: its metrics and resourceVersion."""

    metrics: tuple[dict[str, Any], ...]
    resource_version: int


def _cpu(utilization: int) -> dict[str, Any]:
    return {
        "type": "Resource",
        "resource": {
            "name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": utilization},
        },
    }


def hpa_object(seed: int, workload: Any, *, stable_hash: Any) -> dict[str, Any] | None:
    """The HPA of a simulated workload (a ``SimWorkload``), or None."""
    if workload.kind != "Deployment":
        return None
    draw = stable_hash(seed, "hpa", workload.namespace, workload.name)
    if draw % HPA_SHARE:
        return None
    shape = SHAPES[(draw // HPA_SHARE) % len(SHAPES)]
    regular = [c for c in workload.containers if c.kind == "regular"]
    main = regular[0]
    memory = sum(c.requests.memory_bytes or 0 for c in regular) or 512 * MIB
    per_pod = format_memory(max(1, round(memory * 0.8 / MIB)) * MIB)
    utilization = CPU_TARGETS[(draw // 97) % len(CPU_TARGETS)]
    if shape == "cpu-utilization":
        metrics = [_cpu(utilization)]
    elif shape == "memory-average-value":
        metrics = [
            {
                "type": "Resource",
                "resource": {
                    "name": "memory",
                    "target": {"type": "AverageValue", "averageValue": per_pod},
                },
            }
        ]
    else:
        main_memory = main.requests.memory_bytes or 512 * MIB
        metrics = [
            _cpu(utilization),
            {
                "type": "ContainerResource",
                "containerResource": {
                    "name": "memory",
                    "container": main.name,
                    "target": {
                        "type": "AverageValue",
                        "averageValue": format_memory(
                            max(1, round(main_memory * 0.8 / MIB)) * MIB
                        ),
                    },
                },
            },
        ]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": workload.name,
            "namespace": workload.namespace,
            "uid": "{:032x}".format(stable_hash("hpa-uid", seed, workload.uid)),
            "resourceVersion": "1",
        },
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": workload.name,
            },
            "minReplicas": workload.replicas,
            "maxReplicas": workload.replicas * 3,
            "metrics": metrics,
        },
    }


def with_override(obj: dict[str, Any], override: HpaOverride | None) -> dict[str, Any]:
    """The object as the writer left it (a copy), or ``obj`` itself."""
    if override is None:
        return obj
    return {
        **obj,
        "metadata": {
            **obj["metadata"],
            "resourceVersion": str(override.resource_version),
        },
        "spec": {**obj["spec"], "metrics": [dict(m) for m in override.metrics]},
    }


def summaries(
    objects: tuple[dict[str, Any], ...],
    overrides: Mapping[tuple[str, str], HpaOverride],
) -> list[dict[str, Any]]:
    """``hpa_of`` of every object, as the writer left it."""
    return [
        hpa_of(
            with_override(
                obj,
                overrides.get((obj["metadata"]["namespace"], obj["metadata"]["name"])),
            )
        )
        for obj in objects
    ]

"""Generated (LimitRange, pod, recommendation) cases, judged by the fake LimitRanger.

One case: a namespace's LimitRange (Container and/or Pod items with any of min, max,
default, defaultRequest and maxLimitRequestRatio, as the API server would accept them),
a pod of a StatefulSet (containers, maybe a native sidecar and a plain init container,
each with or without requests and limits), a container policy (controlledValues,
controlledResources, minAllowed/maxAllowed) and a recommendation per container. The
pod goes through what kube-apiserver does before the webhook (``admit_pod``:
defaulting), then vpaweb's webhook decision (pure: a snapshot built in memory), then
LimitRanger's validation (``validate_pod``) before and after the patch.

Used by ``tests/services/test_limit_range_property.py`` (a few thousand cases) and by
``python -m benchmarks limitranger`` (10,000 and more).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import jsonpatch

from recommender.cluster.kube_objects import limit_range_of
from recommender.engine.capping import combine_limit_ranges
from recommender.models import Policy, Recommendation, Workload
from recommender.services.admission.decision import PATCHED, decide_admission
from recommender.services.admission.snapshot import AdmissionSnapshot, WorkloadEntry
from recommender.services.advice.advise import AdviceInputs
from recommender.services.advice.limits import item_from_dict
from recommender.services.policy.validation import parse_container_policies
from tests.k8s_fake.limit_ranger import (
    admit_pod,
    default_limit_range,
    validate_pod,
)

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
NAMESPACE = "lr"
MI = 2**20


def _cpu(rng: random.Random) -> int:
    return rng.choice([1, 5, 10, 50, 100, 250, 333, 500, 750, 1000, 1500, 2000, 4000])


def _memory(rng: random.Random) -> int:
    return rng.choice([1, 16, 64, 100, 128, 200, 256, 512, 1000, 1024, 2048, 4096]) * MI


def _text(resource: str, amount: int) -> str:
    return f"{amount}m" if resource == "cpu" else str(amount)


def _limit_item(rng: random.Random, kind: str) -> dict[str, Any]:
    """One item; min <= defaultRequest <= default <= max where present."""
    item: dict[str, Any] = {"type": kind}
    for resource, draw in (("cpu", _cpu), ("memory", _memory)):
        values = sorted(draw(rng) for _ in range(4))
        fields = {"min": values[0], "max": values[3]}
        if kind == "Container":
            fields.update(defaultRequest=values[1], default=values[2])
        for name, amount in fields.items():
            if rng.random() < 0.45:
                item.setdefault(name, {})[resource] = _text(resource, amount)
        if rng.random() < 0.4:
            ratio = rng.choice(["1", "1500m", "2", "3500m", "4", "10"])
            item.setdefault("maxLimitRequestRatio", {})[resource] = ratio
    return item


def limit_range(rng: random.Random) -> dict[str, Any]:
    """A LimitRange of one or two items (Container, Pod or both)."""
    kinds = rng.choice([["Container"], ["Pod"], ["Container", "Pod"]])
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "limits", "namespace": NAMESPACE},
        "spec": {"limits": [_limit_item(rng, kind) for kind in kinds]},
    }


def _resources(rng: random.Random) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for resource, draw in (("cpu", _cpu), ("memory", _memory)):
        request, limit = sorted((draw(rng), draw(rng)))
        if rng.random() < 0.6:
            resources.setdefault("requests", {})[resource] = _text(resource, request)
        if rng.random() < 0.6:
            resources.setdefault("limits", {})[resource] = _text(resource, limit)
    return resources


def _container(rng: random.Random, name: str, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "registry.example/app:1"}
    resources = _resources(rng)
    if resources:
        container["resources"] = resources
    container.update(extra)
    return container


def pod(rng: random.Random) -> dict[str, Any]:
    """A pod of StatefulSet ``web`` with 1-3 containers, maybe init containers."""
    spec: dict[str, Any] = {
        "containers": [_container(rng, f"c{i}") for i in range(rng.randint(1, 3))]
    }
    init = []
    if rng.random() < 0.25:
        init.append(_container(rng, "setup"))
    if rng.random() < 0.25:
        init.append(_container(rng, "proxy", restartPolicy="Always"))
    if init:
        spec["initContainers"] = init
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0",
            "namespace": NAMESPACE,
            "ownerReferences": [
                {"kind": "StatefulSet", "name": "web", "controller": True}
            ],
        },
        "spec": spec,
    }


def _policy(rng: random.Random) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"containerName": "*"}
    if rng.random() < 0.5:
        entry["controlledValues"] = "RequestsOnly"
    if rng.random() < 0.2:
        entry["controlledResources"] = [rng.choice(["cpu", "memory"])]
    if rng.random() < 0.2:
        entry["minAllowed"] = {"cpu": f"{_cpu(rng)}m"}
    if rng.random() < 0.2:
        entry["maxAllowed"] = {"memory": str(_memory(rng))}
    return [entry]


def _recommendation(rng: random.Random) -> Recommendation:
    return recommendation(rng.randint(1, 5000), rng.randint(1, 8192) * MI)


def recommendation(cpu: int, memory: int) -> Recommendation:
    """A recommendation of ``cpu`` millicores and ``memory`` bytes (bounds ±20 %)."""
    return Recommendation(
        created_at=NOW,
        target_cpu_millicores=cpu,
        target_memory_bytes=memory,
        lower_cpu_millicores=cpu * 8 // 10,
        lower_memory_bytes=memory * 8 // 10,
        upper_cpu_millicores=cpu * 12 // 10,
        upper_memory_bytes=memory * 12 // 10,
        uncapped_cpu_millicores=cpu,
        uncapped_memory_bytes=memory,
        confidence=8.0,  # days of history: enough to act on
    )


@dataclass
class Tally:
    """What a run of cases found."""

    cases: int = 0
    original_admitted: int = 0
    patched: int = 0
    # Patched pods LimitRanger refuses although it admits the original: must be 0.
    refused: list[dict[str, Any]] = field(default_factory=list)
    left_alone_for_limit_range: int = 0


def decide_case(
    stored_range: dict[str, Any],
    received: dict[str, Any],
    policy: list[dict[str, Any]],
    latest: dict[str, Recommendation],
) -> tuple[Any, dict[str, Any] | None]:
    """vpaweb's webhook decision for ``received`` (a pod of StatefulSet ``web`` after
    the API server's defaulting) and the pod it would store (None: not patched)."""
    items = [item_from_dict(i) for i in limit_range_of(stored_range)["limits"]]
    ranges = tuple(
        combine_limit_ranges([i for i in items if i is not None], kind)
        for kind in ("Container", "Pod")
    )
    inputs = AdviceInputs(
        namespace=NAMESPACE,
        workload=Workload(namespace=NAMESPACE, kind="StatefulSet", name="web"),
        policies=tuple(parse_container_policies(policy)),
        latest=latest,
        container_range=ranges[0],
        pod_range=ranges[1],
    )
    entry = WorkloadEntry(
        workload_id=1,
        namespace=NAMESPACE,
        kind="StatefulSet",
        name="web",
        mode=Policy.Mode.INITIAL,
        is_actionable=True,
        why_not="",
        last_seen_at=NOW,
        inputs=inputs,
    )
    snapshot = AdmissionSnapshot(
        cluster_name="generated",
        loaded_at=NOW,
        workloads={(NAMESPACE, "StatefulSet", "web"): entry},
        limit_ranges={NAMESPACE: (ranges[0], ranges[1])},
    )
    request = {
        "uid": "case",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": NAMESPACE,
        "object": received,
    }
    decision = decide_admission(request=request, snapshot=snapshot, now=NOW)
    if decision.outcome != PATCHED:
        return decision, None
    return decision, jsonpatch.apply_patch(received, list(decision.patch))


def run_case(rng: random.Random, tally: Tally) -> None:
    """Generate one case, decide it, and judge the patched pod."""
    stored_range = default_limit_range(limit_range(rng))
    received = admit_pod(pod(rng), [stored_range])
    policy = _policy(rng)
    names = [c["name"] for c in received["spec"]["containers"]]
    names += [
        c["name"]
        for c in received["spec"].get("initContainers", ())
        if c.get("restartPolicy") == "Always"
    ]
    latest = {name: _recommendation(rng) for name in names}
    decision, patched = decide_case(stored_range, received, policy, latest)
    tally.cases += 1
    if validate_pod(received, [stored_range]):
        return  # refused unpatched: nothing to keep
    tally.original_admitted += 1
    if "LimitRange" in decision.reason:
        tally.left_alone_for_limit_range += 1
    if patched is None:
        return
    tally.patched += 1
    errors = validate_pod(patched, [stored_range])
    if errors:
        tally.refused.append(
            {
                "limit_range": stored_range["spec"],
                "pod": received["spec"],
                "patched": patched["spec"],
                "errors": errors,
            }
        )


def run_cases(count: int, *, seed: int) -> Tally:
    """``count`` cases from one seed."""
    rng = random.Random(seed)
    tally = Tally()
    for _ in range(count):
        run_case(rng, tally)
    return tally

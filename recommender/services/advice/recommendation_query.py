"""Answer a RecommendationQuery (the Kubernetes VPA design proposal's): a pod spec
that need not exist, its namespace and its owner in; recommended resources per
container out.

The answer is ``advise.advise_pod``'s, the one advice path shared with ``/rightsize``,
the dashboard and the admission webhook; this module only reads the query and writes
the answer in the VPA status format.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recommender.engine.resources import Resources
from recommender.errors import InvalidInput
from recommender.services.advice.advise import (
    OWNER_KINDS,
    SOURCE_NONE,
    ContainerAdvice,
    advise,
    inputs_for_pod,
)
from recommender.services.advice.hpa import adjustments_for_workload, requests_of
from recommender.services.advice.pod_spec import (
    owner_of_pod,
    parse_pod_containers,
    readable_pod_resources,
    resource_list,
)

QUERY_API_VERSION = "vpaweb.io/v1"
QUERY_KIND = "RecommendationQuery"


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

    for where, given in (
        ("metadata.namespace", metadata.get("namespace")),
        ("spec.pod.metadata.namespace", pod_metadata.get("namespace")),
    ):
        if given is not None and not isinstance(given, str):
            raise InvalidInput(f"{where} must be a string", field=where)
    namespace = metadata.get("namespace") or pod_metadata.get("namespace") or "default"
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

    inputs = inputs_for_pod(
        namespace=namespace,
        owner_kind=owner_kind,
        owner_name=owner_name,
        cluster=cluster,
    )
    advice = advise(inputs, containers)
    by_name = {a.name: a for a in advice.containers}
    # What to write, as /rightsize writes it: readable quantities, rounded up.
    # Every container of the pod counts in its sums (those left alone as they are).
    written = dict(
        zip(
            (c.name for c in containers),
            readable_pod_resources(
                [
                    (c, by_name[c.name].requests, by_name[c.name].limits)
                    if c.name in by_name
                    else (c, Resources(), Resources())
                    for c in containers
                ],
                container_range=inputs.container_range,
                pod_range=inputs.pod_range,
            ),
            strict=True,
        )
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
                # What to write into the container (limits: empty = leave as is).
                "requests": resource_list(written[a.name][0]),
                "limits": resource_list(written[a.name][1]),
                "explanation": a.recommendation.explanation
                if a.recommendation
                else None,
            }
            for a in advice.containers
        ],
        # The HPA change that keeps the owner's HPAs scaling as before at those
        # requests (its HPAs as discovery last stored them).
        "hpaAdjustments": []
        if workload is None
        else adjustments_for_workload(
            workload.hpa_conflicts,
            before=requests_of(containers),
            after={name: amounts[0] for name, amounts in written.items()},
        ),
    }
    return answer

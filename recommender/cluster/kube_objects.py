"""Kubernetes API objects (JSON dicts) turned into the adapter dataclasses of
``base.py``.

Pure functions, no I/O. A malformed field raises ``ValueError`` naming the object and
the field (``Deployment shop/web:
spec.template.spec.containers[app].resources.requests.cpu …``); the adapter skips that
object and reports the message in ``ClusterSnapshot.warnings``."""
# Shapes of the dicts this module returns for ``ClusterSnapshot`` (all keys always
# present):
#
# - LimitRange: ``{"namespace", "name", "uid", "limits": [{"type": "Container" | "Pod",
#   "max" | "min" | "default" | "default_request" | "max_limit_request_ratio":
#   {"cpu_millicores": int | None, "memory_bytes": int | None}}]}``: the fields of
#   ``engine.capping.LimitRangeItem`` (the ratio as MilliValues).
# - PodDisruptionBudget: ``{"namespace", "name", "uid", "selector", "min_available",
#   "max_unavailable", "disruptions_allowed", "current_healthy", "desired_healthy",
#   "expected_pods"}`` (``min_available``/``max_unavailable`` as the API gives them: an
#   int, a percentage string, or None).
# - HorizontalPodAutoscaler: ``{"namespace", "name", "uid", "target_api_version",
#   "target_kind", "target_name", "min_replicas", "max_replicas", "resource_metrics":
#   [{"resource": "cpu", "container": "" | name}], "scaled_resources": ["cpu", …],
#   "other_metric_types": ["External", …]}``.

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from recommender.cluster.base import (
    ContainerSpec,
    ContainerState,
    OomKill,
    PodCondition,
    PodInfo,
    Termination,
    VpaObject,
    WorkloadInfo,
)
from recommender.cluster.nodes import NodeRecord
from recommender.cluster.scheduling import NodePlacement, placement_of, taints_of
from recommender.engine.capping import MODE_AUTO, MODE_RECREATE
from recommender.engine.quantity import parse_cpu_millicores, parse_memory_bytes
from recommender.engine.resources import CPU, MEMORY, Resources

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

OOM_KILLED = "OOMKilled"
EVICTED = "Evicted"
# Annotations the kubelet's eviction manager puts on an Evicted event (read by
# upstream's ``pkg/recommender/input/oom/observer.go``).
OFFENDING_CONTAINERS = "offending_containers"
OFFENDING_CONTAINERS_USAGE = "offending_containers_usage"
STARVED_RESOURCE = "starved_resource"
# Upstream's default mode when spec.updatePolicy or its updateMode is absent
# (``GetUpdateMode`` in ``pkg/utils/vpa/api.go``).
DEFAULT_UPDATE_MODE = MODE_RECREATE
# LimitRange item types that cap container requests (PersistentVolumeClaim items do
# not).
LIMIT_RANGE_TYPES = ("Container", "Pod")
FINISHED_PHASES = ("Succeeded", "Failed")


def describe(kind: str, obj: Obj) -> str:
    """``Kind namespace/name`` for messages."""
    meta = obj.get("metadata") or {}
    return f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}"


def parse_time(text: Any, where: str) -> datetime | None:
    """An RFC 3339 timestamp as an aware UTC datetime; None when absent."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not an RFC 3339 time") from None
    if when.tzinfo is None:
        raise ValueError(f"{where}: {text!r} has no time zone")
    return when


def resources_of(resource_list: Mapping[str, Any] | None, where: str) -> Resources:
    """CPU and memory of a ResourceList (other resources are ignored)."""
    return _parsed(resource_list, where, parse_cpu_millicores, parse_memory_bytes)


def ratios_of(resource_list: Mapping[str, Any] | None, where: str) -> Resources:
    """A ``maxLimitRequestRatio``'s CPU and memory ratios as MilliValues (what
    LimitRanger compares: "3500m" is 3500, "2" is 2000), in ``Resources``' fields."""
    return _parsed(resource_list, where, parse_cpu_millicores, parse_cpu_millicores)


def _parsed(
    resource_list: Mapping[str, Any] | None,
    where: str,
    cpu: Callable[[str], int],
    memory: Callable[[str], int],
) -> Resources:
    if not resource_list:
        return Resources()
    if not isinstance(resource_list, Mapping):
        raise ValueError(
            f"{where}: expected a map of quantities, got {resource_list!r}"
        )
    amounts: dict[str, int | None] = {CPU: None, MEMORY: None}
    for name, parse in ((CPU, cpu), (MEMORY, memory)):
        text = resource_list.get(name)
        if text is None:
            continue
        try:
            amounts[name] = parse(str(text))
        except ValueError as exc:
            raise ValueError(f"{where}.{name}: {exc}") from None
    return Resources(amounts[CPU], amounts[MEMORY])


def _defaulted_requests(requests: Resources, limits: Resources) -> Resources:
    # The API server defaults a pod's missing requests to its limits (SetDefaults_Pod);
    # a template is not defaulted, so do it here to report what its pods will really
    # get.
    return Resources(
        requests.cpu_millicores
        if requests.cpu_millicores is not None
        else limits.cpu_millicores,
        requests.memory_bytes
        if requests.memory_bytes is not None
        else limits.memory_bytes,
    )


def _container_kind(container: Obj, *, is_init: bool) -> str:
    if not is_init:
        return "regular"
    # A native sidecar is an init container that keeps running (KEP-753).
    return "sidecar" if container.get("restartPolicy") == "Always" else "init"


def containers_of(
    pod_spec: Obj, where: str, *, statuses: Sequence[Obj] | None = None
) -> tuple[ContainerSpec, ...]:
    """The containers of a pod spec: regular ones first, then init containers and
    sidecars.

    With ``statuses`` (a running pod's container statuses), a status's ``resources`` win
    over the spec, as upstream's ``ContainerRequestsAndLimits`` does after an in-place
    resize.
    """
    by_name = {status.get("name"): status for status in statuses or ()}
    result = []
    for field, is_init in (("containers", False), ("initContainers", True)):
        for container in pod_spec.get(field) or ():
            name = container.get("name", "")
            at = f"{where}: spec.{field}[{name}]"
            spec_resources = container.get("resources") or {}
            status_resources = (by_name.get(name) or {}).get("resources")
            if status_resources is not None:
                source, at = (
                    status_resources,
                    f"{where}: status.containerStatuses[{name}]",
                )
            else:
                source = spec_resources
            requests = resources_of(source.get("requests"), f"{at}.resources.requests")
            limits = resources_of(source.get("limits"), f"{at}.resources.limits")
            result.append(
                ContainerSpec(
                    name=name,
                    kind=_container_kind(container, is_init=is_init),
                    requests=_defaulted_requests(requests, limits),
                    limits=limits,
                )
            )
    return tuple(result)


def pod_template_spec(kind: str, obj: Obj) -> Obj:
    """The pod spec of a controller's template (a CronJob's is in its job template)."""
    spec = obj.get("spec") or {}
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    return (spec.get("template") or {}).get("spec") or {}


def selector_of(kind: str, obj: Obj) -> dict[str, Any]:
    """The controller's pod selector as a LabelSelector dict ({} when it has none)."""
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    if kind == "ReplicationController":
        # A ReplicationController's selector is a plain map, not a LabelSelector.
        return {"matchLabels": dict(selector)} if selector else {}
    if kind == "CronJob":
        return {}
    return dict(selector) if isinstance(selector, dict) else {}


def replicas_of(kind: str, obj: Obj) -> int | None:
    """Desired pods: spec.replicas, a DaemonSet's desired count, a Job's parallelism."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if kind in ("Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"):
        # The API server defaults an absent spec.replicas to 1.
        replicas = spec.get("replicas")
        return 1 if replicas is None else int(replicas)
    if kind == "DaemonSet":
        # One pod per node it runs on: the nodes it should run on, else the nodes it
        # runs on; None (unknown, shown as such) before its controller wrote a status.
        for name in ("desiredNumberScheduled", "currentNumberScheduled"):
            if status.get(name) is not None:
                return int(status[name])
        return None
    if kind == "Job":
        parallelism = spec.get("parallelism")
        return 1 if parallelism is None else int(parallelism)
    return None


def workload_of(
    kind: str,
    obj: Obj,
    *,
    pods: Iterable[PodInfo] = (),
    hpa_scaled_resources: Iterable[str] = (),
) -> WorkloadInfo:
    """A top-level controller as a ``WorkloadInfo`` (its template's containers)."""
    meta = obj.get("metadata") or {}
    where = describe(kind, obj)
    pods = tuple(pods)
    return WorkloadInfo(
        kind=kind,
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        containers=containers_of(pod_template_spec(kind, obj), where),
        uid=meta.get("uid", ""),
        selector=selector_of(kind, obj),
        replicas=replicas_of(kind, obj),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        pods=pods,
        hpa_scaled_resources=tuple(sorted(set(hpa_scaled_resources))),
        schedule=str((obj.get("spec") or {}).get("schedule") or "")
        if kind == "CronJob"
        else "",
        placement=_placement(kind, obj, where),
        version=change_marker(meta, pods),
    )


def change_marker(meta: Obj, pods: Sequence[PodInfo]) -> str:
    """``WorkloadInfo.version``: the controller's resourceVersion and its pods'
    (by name), which the API server changes with any change of the object; "" when
    one is missing (then discovery compares the workload every pass)."""
    version = meta.get("resourceVersion")
    if not version or any(not pod.resource_version for pod in pods):
        return ""
    named = sorted(f"{pod.name}={pod.resource_version}" for pod in pods)
    return f"{version}/{','.join(named)}"


def _placement(kind: str, obj: Obj, where: str) -> NodePlacement | None:
    """A DaemonSet's hard placement rules (which nodes it runs on); None for other
    kinds, or when they cannot be read (then its pods show where it runs)."""
    if kind != "DaemonSet":
        return None
    try:
        return placement_of(pod_template_spec(kind, obj), f"{where} spec.template.spec")
    except ValueError as exc:
        logger.warning("%s: placement not read: %s", where, exc)
        return None


# The nodes of a pool carry the same few allocatable quantities: each parsed once.
_node_cpu = functools.lru_cache(maxsize=4096)(parse_cpu_millicores)
_node_memory = functools.lru_cache(maxsize=4096)(parse_memory_bytes)


def node_of(obj: Obj) -> NodeRecord:
    """A Node as a ``NodeRecord``: its allocatable cpu, memory and pods, labels,
    hard-rule taints and cordon (``pool`` is left for the caller to name)."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    where = f"Node {name}"
    spec = obj.get("spec") or {}
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    if not isinstance(allocatable, Mapping):
        raise ValueError(f"{where}: status.allocatable is not a map")
    amounts = []
    for resource, parse in (
        (CPU, _node_cpu),
        (MEMORY, _node_memory),
        ("pods", _node_cpu),
    ):
        text = allocatable.get(resource)
        if text is None:
            raise ValueError(f"{where}: status.allocatable has no {resource}")
        try:
            amounts.append(parse(str(text)))
        except ValueError as exc:
            raise ValueError(f"{where}: status.allocatable.{resource}: {exc}") from None
    return NodeRecord(
        name=name,
        pool="",
        cpu_millicores=amounts[0],
        memory_bytes=amounts[1],
        # A count: the quantity's MilliValue over 1000 ("110" is 110).
        pods=amounts[2] // 1000,
        labels=dict(meta.get("labels") or {}),
        taints=taints_of(spec.get("taints"), f"{where}: spec.taints"),
        unschedulable=bool(spec.get("unschedulable")),
    )


def _all_statuses(pod: Obj) -> list[Obj]:
    status = pod.get("status") or {}
    return list(status.get("containerStatuses") or ()) + list(
        status.get("initContainerStatuses") or ()
    )


# Set by the API server's LimitRanger admission plugin on a pod it filled in, e.g.
# "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit
# for container app" (tests/fixtures/k8s-wire/admission/d-limitrange-pod.*; the text is
# built by mergeContainerResources in plugin/pkg/admission/limitranger).
LIMIT_RANGER_ANNOTATION = "kubernetes.io/limit-ranger"
LIMIT_RANGER_PREFIX = "LimitRanger plugin set: "
_LIMIT_RANGER_PART = re.compile(
    r"^(?P<resources>[^;]+?) (?P<field>request|limit) for "
    r"(?:init )?container (?P<container>\S+)$"
)


def limit_ranger_fields(text: str) -> frozenset[tuple[str, str, str]]:
    """(container, "request" | "limit", resource) triples LimitRanger says it set.

    Unknown parts (a future wording) are ignored: the values then count as the
    pod's own, which is what they are as far as vpaweb can tell.
    """
    if not text.startswith(LIMIT_RANGER_PREFIX):
        return frozenset()
    found = set()
    for part in text[len(LIMIT_RANGER_PREFIX) :].split("; "):
        match = _LIMIT_RANGER_PART.match(part.strip())
        if match is None:
            continue
        for resource in match["resources"].split(", "):
            found.add((match["container"], match["field"], resource.strip()))
    return frozenset(found)


def pod_of(pod: Obj) -> PodInfo:
    """A pod with its containers' current requests (status over spec)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    where = describe("Pod", pod)
    owner: dict[str, Any] = next(
        (ref for ref in meta.get("ownerReferences") or () if ref.get("controller")), {}
    )
    limit_ranger = (meta.get("annotations") or {}).get(LIMIT_RANGER_ANNOTATION) or ""
    if not isinstance(limit_ranger, str):
        limit_ranger = ""
    return PodInfo(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        phase=status.get("phase", ""),
        containers=containers_of(
            pod.get("spec") or {}, where, statuses=_all_statuses(pod)
        ),
        spec_containers=containers_of(pod.get("spec") or {}, where),
        start_time=parse_time(status.get("startTime"), f"{where}: status.startTime"),
        labels=dict(meta.get("labels") or {}),
        uid=meta.get("uid", ""),
        owner_kind=owner.get("kind", ""),
        owner_name=owner.get("name", ""),
        node_name=(pod.get("spec") or {}).get("nodeName", ""),
        annotations=dict(meta.get("annotations") or {}),
        deleting=bool(meta.get("deletionTimestamp")),
        conditions=tuple(
            PodCondition(
                type=str(c.get("type") or ""),
                status=str(c.get("status") or ""),
                reason=str(c.get("reason") or ""),
                message=str(c.get("message") or ""),
                last_transition=parse_time(
                    c.get("lastTransitionTime"), f"{where}: status.conditions"
                ),
                observed_generation=_generation(c.get("observedGeneration")),
            )
            for c in status.get("conditions") or ()
            if isinstance(c, dict)
        ),
        last_terminations=tuple(_terminations(pod, where)),
        created_at=parse_time(
            meta.get("creationTimestamp"), f"{where}: metadata.creationTimestamp"
        ),
        limit_ranger_set=limit_ranger_fields(limit_ranger),
        limit_ranger=limit_ranger,
        container_states=tuple(_states(pod)),
        generation=_generation(meta.get("generation")),
        observed_generation=_generation(status.get("observedGeneration")),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


def _generation(value: Any) -> int | None:
    """A generation as the API server writes it (an integer), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _states(pod: Obj) -> list[ContainerState]:
    out = []
    for status in _all_statuses(pod):
        if not isinstance(status, dict):
            continue
        found = status.get("state") or {}
        state = next(
            (k for k in ("running", "waiting", "terminated") if k in found), ""
        )
        detail = found.get(state) or {}
        out.append(
            ContainerState(
                name=str(status.get("name") or ""),
                state=state,
                reason=str(detail.get("reason") or "") if state != "running" else "",
                ready=bool(status.get("ready")),
                restart_count=int(status.get("restartCount") or 0),
                container_id=str(status.get("containerID") or ""),
            )
        )
    return out


def _terminations(pod: Obj, where: str) -> list[Termination]:
    out = []
    for status in _all_statuses(pod):
        terminated = (status.get("lastState") or {}).get("terminated") or {}
        if not terminated:
            continue
        name = status.get("name", "")
        out.append(
            Termination(
                container=name,
                reason=str(terminated.get("reason") or ""),
                started_at=parse_time(
                    terminated.get("startedAt"), f"{where}: {name} lastState"
                ),
                finished_at=parse_time(
                    terminated.get("finishedAt"), f"{where}: {name} lastState"
                ),
            )
        )
    return out


def is_live(pod: PodInfo) -> bool:
    """A pod that still runs (or will): not Succeeded or Failed."""
    return pod.phase not in FINISHED_PHASES


def oom_kills_of_pod(
    pod: Obj, info: PodInfo, *, workload_kind: str = "", workload_name: str = ""
) -> list[OomKill]:
    """OOM kills visible in a pod's container statuses, current and last state.

    Upstream's observer sees each kill once through a watch; we poll, so the same kill
    is seen on every pass until the container terminates again: consumers de-duplicate
    on (container, pod, finish time). The memory is the container's current request
    (status over spec), which upstream takes from the new pod for a fresh kill.
    """
    requests = {container.name: container.requests for container in info.containers}
    kills: dict[tuple[str, datetime], OomKill] = {}
    where = describe("Pod", pod)
    for status in _all_statuses(pod):
        name = status.get("name", "")
        for state_field in ("state", "lastState"):
            terminated = (status.get(state_field) or {}).get("terminated") or {}
            if terminated.get("reason") != OOM_KILLED:
                continue
            at = (
                f"{where}: status.containerStatuses[{name}]"
                f".{state_field}.terminated.finishedAt"
            )
            finished = parse_time(terminated.get("finishedAt"), at)
            if finished is None:
                continue  # cannot be placed in time; upstream would not see it either
            memory = requests.get(name, Resources()).memory_bytes or 0
            kills[(name, finished)] = OomKill(
                namespace=info.namespace,
                pod=info.name,
                container=name,
                occurred_at=finished,
                memory_request_bytes=memory,
                restart_count=int(status.get("restartCount") or 0),
                workload_kind=workload_kind,
                workload_name=workload_name,
            )
    return list(kills.values())


def evictions_of_event(event: Obj) -> list[OomKill]:
    """Memory evictions recorded by an ``Evicted`` event of a pod (upstream's
    ``pkg/recommender/input/oom/observer.go``).

    The three annotations are comma lists of equal length; only entries whose starved
    resource is memory count, with the container's usage at eviction as the memory.
    """
    involved = event.get("involvedObject") or {}
    if event.get("reason") != EVICTED or involved.get("kind") != "Pod":
        return []
    meta = event.get("metadata") or {}
    where = f"Event {meta.get('namespace', '')}/{meta.get('name', '')}"
    annotations = meta.get("annotations") or {}
    raw = [
        annotations.get(key)
        for key in (OFFENDING_CONTAINERS, OFFENDING_CONTAINERS_USAGE, STARVED_RESOURCE)
    ]
    if not all(raw):
        # An eviction for disk or PIDs, or from an older kubelet: nothing to learn.
        return []
    containers, usages, resources = (str(text).split(",") for text in raw)
    if not len(containers) == len(usages) == len(resources):
        raise ValueError(
            f"{where}: annotations {OFFENDING_CONTAINERS}, "
            f"{OFFENDING_CONTAINERS_USAGE} and "
            f"{STARVED_RESOURCE} have different lengths "
            f"({len(containers)}, {len(usages)}, {len(resources)})"
        )
    occurred = parse_time(
        meta.get("creationTimestamp"), f"{where}: metadata.creationTimestamp"
    )
    if occurred is None:
        raise ValueError(f"{where}: metadata.creationTimestamp is missing")
    kills = []
    for container, usage, resource in zip(containers, usages, resources, strict=True):
        if resource.strip() != MEMORY:
            continue
        try:
            usage_bytes = parse_memory_bytes(usage.strip())
        except ValueError as exc:
            raise ValueError(
                f"{where}: annotation {OFFENDING_CONTAINERS_USAGE}: {exc}"
            ) from None
        kills.append(
            OomKill(
                namespace=involved.get("namespace", ""),
                pod=involved.get("name", ""),
                container=container.strip(),
                occurred_at=occurred,
                memory_request_bytes=usage_bytes,
                is_eviction=True,
            )
        )
    return kills


def vpa_of(obj: Obj) -> VpaObject:
    """A VerticalPodAutoscaler (autoscaling.k8s.io/v1) as a ``VpaObject``.

    The mode is normalised as upstream reads it: absent means ``Recreate``, and the
    deprecated ``Auto`` is ``Recreate``. Container policies are kept in the upstream
    shape.
    """
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    where = describe("VerticalPodAutoscaler", obj)
    target = spec.get("targetRef") or {}
    if not target.get("kind") or not target.get("name"):
        raise ValueError(f"{where}: spec.targetRef needs a kind and a name")
    update_policy = spec.get("updatePolicy") or {}
    mode = update_policy.get("updateMode") or DEFAULT_UPDATE_MODE
    if mode == MODE_AUTO:
        mode = DEFAULT_UPDATE_MODE
    min_replicas = update_policy.get("minReplicas")
    policies = (spec.get("resourcePolicy") or {}).get("containerPolicies") or []
    if not isinstance(policies, list) or not all(isinstance(p, dict) for p in policies):
        raise ValueError(
            f"{where}: spec.resourcePolicy.containerPolicies is not a list of maps"
        )
    return VpaObject(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        target_kind=target["kind"],
        target_name=target["name"],
        update_mode=mode,
        container_policies=[dict(policy) for policy in policies],
        min_replicas=int(min_replicas) if min_replicas is not None else None,
        uid=meta.get("uid", ""),
        recommenders=tuple(
            str(entry.get("name", "")) for entry in spec.get("recommenders") or ()
        ),
        status=dict(obj.get("status") or {}),
    )


def hpa_of(obj: Obj) -> dict[str, Any]:
    """An autoscaling/v2 HPA summary (shape in the module docstring)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    target = spec.get("scaleTargetRef") or {}
    resource_metrics = []
    other_types = []
    where = f"HorizontalPodAutoscaler {meta.get('namespace')}/{meta.get('name')}"
    for index, metric in enumerate(spec.get("metrics") or ()):
        metric_type = metric.get("type", "")
        if metric_type == "Resource":
            source = metric.get("resource") or {}
            container = ""
            field = f"spec.metrics[{index}].resource.target"
        elif metric_type == "ContainerResource":
            source = metric.get("containerResource") or {}
            container = source.get("container", "")
            field = f"spec.metrics[{index}].containerResource.target"
        else:
            other_types.append(metric_type)
            continue
        resource = source.get("name", "")
        resource_metrics.append(
            {
                "index": index,
                "resource": resource,
                "container": container,
                **_hpa_target(resource, source.get("target") or {}, where, field),
            }
        )
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "target_api_version": target.get("apiVersion", ""),
        "target_kind": target.get("kind", ""),
        "target_name": target.get("name", ""),
        "min_replicas": spec.get("minReplicas", 1),
        "max_replicas": spec.get("maxReplicas"),
        "resource_metrics": resource_metrics,
        "scaled_resources": sorted(
            {m["resource"] for m in resource_metrics if m["resource"] in (CPU, MEMORY)}
        ),
        "other_metric_types": other_types,
    }


def _hpa_target(
    resource: str, target: Mapping[str, Any], where: str, field: str
) -> dict[str, Any]:
    """``{"target_type", "average_utilization", "average_value"}`` of a metric target
    (``average_value`` in millicores or bytes for cpu/memory, else None)."""
    value = target.get("averageValue")
    amount = None
    if value is not None and resource in (CPU, MEMORY):
        parse = parse_cpu_millicores if resource == CPU else parse_memory_bytes
        try:
            amount = parse(str(value))
        except ValueError as error:
            raise ValueError(f"{where}: {field}.averageValue: {error}") from None
    utilization = target.get("averageUtilization")
    if utilization is not None and (
        isinstance(utilization, bool) or not isinstance(utilization, int)
    ):
        raise ValueError(
            f"{where}: {field}.averageUtilization must be an integer, "
            f"not {utilization!r}"
        )
    return {
        "target_type": str(target.get("type", "")),
        "average_utilization": utilization,
        "average_value": amount,
    }


def hpa_conflicts(
    hpa: Mapping[str, Any],
    *,
    controlled_resources: Iterable[str] = (CPU, MEMORY),
    container: str | None = None,
) -> list[str]:
    """Resources an HPA scales on that a policy also controls (for ``container`` if
    given).

    Two autoscalers acting on the same signal fight: VPA raises the request, the
    utilisation the HPA sees drops, it removes replicas, usage per pod rises, and so on.
    """
    controlled = set(controlled_resources)
    clashes = {
        metric["resource"]
        for metric in hpa.get("resource_metrics") or ()
        if metric["resource"] in controlled
        and (container is None or metric["container"] in ("", container))
    }
    return sorted(clashes)


def pdb_of(obj: Obj) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget summary (shape in the module docstring)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "selector": spec.get("selector"),
        "min_available": spec.get("minAvailable"),
        "max_unavailable": spec.get("maxUnavailable"),
        "disruptions_allowed": status.get("disruptionsAllowed"),
        "current_healthy": status.get("currentHealthy"),
        "desired_healthy": status.get("desiredHealthy"),
        "expected_pods": status.get("expectedPods"),
    }


def _amounts(resources: Resources) -> dict[str, int | None]:
    return {
        "cpu_millicores": resources.cpu_millicores,
        "memory_bytes": resources.memory_bytes,
    }


def limit_range_of(obj: Obj) -> dict[str, Any]:
    """A LimitRange summary, Container and Pod items (shape in the module docstring)."""
    meta = obj.get("metadata") or {}
    where = describe("LimitRange", obj)
    items = []
    for position, item in enumerate((obj.get("spec") or {}).get("limits") or ()):
        if item.get("type") not in LIMIT_RANGE_TYPES:
            continue
        at = f"{where}: spec.limits[{position}]"
        items.append(
            {
                "type": item["type"],
                "max": _amounts(resources_of(item.get("max"), f"{at}.max")),
                "min": _amounts(resources_of(item.get("min"), f"{at}.min")),
                "default": _amounts(resources_of(item.get("default"), f"{at}.default")),
                "default_request": _amounts(
                    resources_of(item.get("defaultRequest"), f"{at}.defaultRequest")
                ),
                "max_limit_request_ratio": _amounts(
                    ratios_of(
                        item.get("maxLimitRequestRatio"), f"{at}.maxLimitRequestRatio"
                    )
                ),
            }
        )
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "limits": items,
    }


def selector_matches(
    selector: Mapping[str, Any] | None, labels: Mapping[str, str]
) -> bool:
    """Whether a LabelSelector selects ``labels`` (``matchLabels`` and
    ``matchExpressions``: In, NotIn, Exists, DoesNotExist).

    A null selector selects nothing and an empty one everything, as a policy/v1
    PodDisruptionBudget reads them. An unknown operator selects nothing.
    """
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or ():
        key = expression.get("key", "")
        operator = expression.get("operator", "")
        values = expression.get("values") or ()
        if operator == "In":
            is_match = key in labels and labels[key] in values
        elif operator == "NotIn":
            is_match = key not in labels or labels[key] not in values
        elif operator == "Exists":
            is_match = key in labels
        elif operator == "DoesNotExist":
            is_match = key not in labels
        else:
            is_match = False
        if not is_match:
            return False
    return True

"""Right-size manifests for CI/CD: requests (and limits) from vpaweb's advice."""
# A CI/CD platform sends the manifests it is about to apply (YAML or JSON,
# multi-document, Lists); vpaweb returns them with each container's requests set from
# the latest recommendation, capped by the engine as the admission webhook caps it (the
# namespace's LimitRanges as discovery last stored them, then the container policy), and
# limits kept at the original limit:request ratio unless the container policy says
# RequestsOnly (upstream ``pkg/utils/vpa/limit_and_request_scaling.go``). Workloads
# vpaweb does not know yet get the namespace's static coefficient (first deploy), or
# are returned unchanged when none is set. The correction rules are options: a
# multiplier, never raising a request above the original, and leaving memory alone.
#
# Nothing here writes to a cluster or to the database: the caller decides what to
# deploy.

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from recommender.cluster.kube_objects import hpa_of
from recommender.engine.limits import REQUESTS_ONLY
from recommender.engine.quantity import format_cpu, format_memory
from recommender.engine.resources import CPU, MEMORY, RESOURCE_NAMES, Resources
from recommender.errors import InvalidInput, TooLarge
from recommender.models import StaticCoefficient
from recommender.services.access.audit import Action, actor_label_of, record_audit
from recommender.services.advice.advise import (
    OWNER_KINDS,
    SOURCE_NONE,
    AdviceInputs,
    ContainerAdvice,
    PodAdvice,
    PodKey,
    advise,
    check_multiplier,
    gated_advice,
    inputs_for_pods,
)
from recommender.services.advice.hpa import (
    HPA_KIND,
    hpa_target_key,
    requests_of,
    rightsize_hpa_document,
    trigger_warnings,
)
from recommender.services.advice.pod_spec import (
    PodContainer,
    owner_of_pod,
    parse_pod_containers,
    readable_pod_resources,
    unknown_field_notes,
)

logger = logging.getLogger(__name__)

# Where each kind keeps its pod spec.
POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Pod": ("spec",),
}
SUPPORTED_KINDS = tuple(POD_SPEC_PATHS)
# A namespace name as Kubernetes accepts it (a DNS-1123 label), or "" for all.
NAMESPACE_PATTERN = r"^(|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"
NAMESPACE_MAX_LENGTH = 63
# The smallest coefficient: 1 % of the request. Below that a factor (5e-324, say) sizes
# a container down to nothing (a memory request of one byte).
MIN_FACTOR = 0.01

STATUS_RIGHTSIZED = "rightsized"
STATUS_UNCHANGED = "unchanged"
STATUS_PASSED_THROUGH = "passed_through"


@dataclass(frozen=True)
class RightsizeOptions:
    """Seed 004's correction rules and where to look workloads up."""

    cluster: str | None = None
    namespace: str = "default"  # for manifests without metadata.namespace
    multiplier: float = 1.0
    never_raise: bool = False
    leave_memory: bool = False
    # The history gate (``history.too_young``): a recommendation with too little
    # history is left out, as the webhook and the updater leave it, unless asked for;
    # then it is written and its container flagged ``low_confidence``.
    include_short_history: bool = False

    def __post_init__(self) -> None:
        check_multiplier(self.multiplier)


@dataclass
class RightsizeResult:
    """The manifests as they should be deployed; a report of each change and why."""

    manifests: list[Any]
    documents: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        """Counts by document status, and the number of containers changed."""
        counts = {STATUS_RIGHTSIZED: 0, STATUS_UNCHANGED: 0, STATUS_PASSED_THROUGH: 0}
        changed = 0
        for document in self.documents:
            counts[document["status"]] += 1
            changed += sum(1 for c in document["containers"] if c["changes"])
        return {
            "documents": len(self.documents),
            **counts,
            "containers_changed": changed,
        }


def _format(resource: str, amount: int) -> str:
    return format_cpu(amount) if resource == CPU else format_memory(amount)


def _text(resource: str, amount: int | None) -> str | None:
    return None if amount is None else _format(resource, amount)


def _pod_spec(
    document: dict[str, Any], kind: str, path: str
) -> tuple[dict[str, Any], str]:
    """The pod spec inside ``document`` and its path; InvalidInput on a wrong shape."""
    node: Any = document
    where = path
    for key in POD_SPEC_PATHS[kind]:
        where = f"{where}.{key}"
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            raise InvalidInput(f"{where} is missing or not a mapping", field=where)
        node = node[key]
    return node, where


def _corrected_target(
    container: PodContainer,
    advice: ContainerAdvice,
    options: RightsizeOptions,
    notes: list[str],
) -> Resources:
    """Seed 004's correction rules applied to the advised target."""
    target = advice.target
    if options.leave_memory and target.memory_bytes is not None:
        target = target.with_amount(MEMORY, None)
        notes.append("memory left alone (leave_memory)")
    if options.never_raise:
        for resource in RESOURCE_NAMES:
            new, old = target.get(resource), container.requests.get(resource)
            if new is not None and old is not None and new > old:
                target = target.with_amount(resource, old)
                notes.append(
                    f"{resource} kept at the original request "
                    f"{_format(resource, old)} instead of {_format(resource, new)} "
                    "(never_raise)"
                )
    return target


def _limit_reason(
    container: PodContainer, advice: ContainerAdvice, resource: str
) -> str:
    """Why a limit changed: the original ratio, or the LimitRange's default limit."""
    before = container.limits.get(resource)
    old_request = container.requests.get(resource)
    if not before:
        default = advice.default_limit.get(resource)
        assert default is not None  # a limit is only written from one of the two
        ratio = (
            f" at the ratio default limit:request {default / old_request:.4g}"
            if old_request and old_request != default
            else ""
        )
        return (
            "the container has no limit: the namespace's LimitRange default limit "
            f"{_format(resource, default)} stands in for it{ratio}, as upstream VPA "
            "does"
        )
    if old_request and before != old_request:
        return f"kept the original limit:request ratio {before / old_request:.4g}"
    return "kept limit = request, as before"


@dataclass
class _Plan:
    """What one container of a pod is about to get: the corrected target, its exact
    requests and limits, and the notes explaining them."""

    item: dict[str, Any]
    container: PodContainer
    advice: ContainerAdvice
    target: Resources
    requests: Resources
    limits: Resources
    annotations: tuple[str, ...]
    notes: list[str]
    low_confidence: bool = False


def _plan_container(
    item: dict[str, Any],
    container: PodContainer,
    advice: ContainerAdvice,
    options: RightsizeOptions,
) -> _Plan:
    """The advised requests (and proportional limits) of a container, exact."""
    notes = list(advice.caps())
    target = _corrected_target(container, advice, options, notes)
    new = advice.resources_for(target)
    limits = new.limits
    if advice.controlled_values == REQUESTS_ONLY:
        limits = Resources()
    else:
        # Limits are written only for the resources the target sets.
        for resource in RESOURCE_NAMES:
            if target.get(resource) is None:
                limits = limits.with_amount(resource, None)
    return _Plan(
        item, container, advice, target, new.requests, limits, new.annotations, notes
    )


def _written(before: int | None, exact: int | None, readable: int | None) -> int | None:
    """The amount to write, or None to leave the field alone: nothing when the exact
    amount is what the container has, else the readable (rounded-up) amount unless
    that is what it has already."""
    if exact is None or exact == before or readable == before:
        return None
    return readable


def _rightsize_container(
    plan: _Plan,
    readable: tuple[Resources, Resources],
    options: RightsizeOptions,
) -> dict[str, Any]:
    """Write the planned requests (and limits), rounded up to readable quantities,
    into the container mapping; the report entry of the container."""
    container, advice, notes = plan.container, plan.advice, plan.notes
    changes: list[dict[str, Any]] = []
    writes: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    for resource in RESOURCE_NAMES:
        before = container.requests.get(resource)
        after = _written(before, plan.requests.get(resource), readable[0].get(resource))
        if options.never_raise and after is not None and before is not None:
            after = min(after, before)  # rounding up must not undo never_raise
            if after == before:
                continue
        if after is not None:
            writes["requests"][resource] = _format(resource, after)
            changes.append(
                {
                    "field": f"requests.{resource}",
                    "before": _text(resource, before),
                    "after": _format(resource, after),
                    "reason": advice.reason,
                }
            )
    if advice.controlled_values == REQUESTS_ONLY:
        if not plan.target.is_empty():
            notes.append(
                "limits left as they are: the container policy says RequestsOnly"
            )
    else:
        for resource in RESOURCE_NAMES:
            before = container.limits.get(resource)
            after = _written(
                before, plan.limits.get(resource), readable[1].get(resource)
            )
            if after is not None:
                writes["limits"][resource] = _format(resource, after)
                changes.append(
                    {
                        "field": f"limits.{resource}",
                        "before": _text(resource, before),
                        "after": _format(resource, after),
                        "reason": _limit_reason(container, advice, resource),
                    }
                )
        notes.extend(
            a for a in plan.annotations if a.split(":")[0] in plan.target.to_dict()
        )
    if changes:
        item = plan.item
        resources = item.get("resources")
        if not isinstance(resources, dict):
            resources = item["resources"] = {}
        for kind, amounts in writes.items():
            if amounts:
                if not isinstance(resources.get(kind), dict):
                    resources[kind] = {}
                resources[kind].update(amounts)
    return {
        "name": container.name,
        "source": advice.source,
        "reason": advice.reason,
        "changes": changes,
        "notes": notes,
        "low_confidence": plan.low_confidence,
    }


@dataclass
class _Hpa:
    """An HPA document of the manifests, and the workload it scales."""

    document: dict[str, Any]
    entry: dict[str, Any]
    target: tuple[str, str, str]  # (namespace, kind, name)
    path: str


@dataclass
class _Pod:
    """A pod template found in a manifest, waiting for its advice."""

    entry: dict[str, Any]  # its report entry, already in the report (in order)
    pod_spec: dict[str, Any]
    containers: list[PodContainer]
    namespace: str
    owner_kind: str | None
    owner_name: str | None

    @property
    def key(self) -> PodKey:
        """The owner's natural key, as ``inputs_for_pods`` takes it."""
        return (self.namespace, self.owner_kind, self.owner_name)


def _collect_document(
    document: Any,
    path: str,
    options: RightsizeOptions,
    report: list[dict[str, Any]],
    pods: list[_Pod],
    hpas: list[_Hpa],
) -> None:
    """Read a document (recursing into Lists): report entries, the pods to size and
    the HPAs to keep in step."""
    if not isinstance(document, dict):
        raise InvalidInput(
            f"{path} must be a Kubernetes object (a mapping)", field=path
        )
    kind = document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InvalidInput(f"{path}.kind is required", field=f"{path}.kind")
    metadata = document.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInput(
            f"{path}.metadata must be a mapping", field=f"{path}.metadata"
        )
    name = metadata.get("name")
    namespace = metadata.get("namespace") or options.namespace
    if not isinstance(namespace, str):
        raise InvalidInput(
            f"{path}.metadata.namespace must be a string",
            field=f"{path}.metadata.namespace",
        )
    if kind == "List" or (kind.endswith("List") and "items" in document):
        items = document.get("items")
        if not isinstance(items, list):
            raise InvalidInput(f"{path}.items must be a list", field=f"{path}.items")
        for index, item in enumerate(items):
            _collect_document(
                item, f"{path}.items[{index}]", options, report, pods, hpas
            )
        return
    entry: dict[str, Any] = {
        "path": path,
        "kind": kind,
        "namespace": namespace,
        "name": name if isinstance(name, str) else None,
        "workload": None,
        "containers": [],
        # Why a document was left as it is (every one rightsize leaves alone says).
        "notes": [],
    }
    report.append(entry)
    if kind == HPA_KIND:
        entry["status"] = STATUS_UNCHANGED
        entry["reason"] = "scales no workload of these manifests"
        entry["hpa_changes"] = []
        entry["warnings"] = []
        hpas.append(_Hpa(document, entry, hpa_target_key(document, namespace), path))
        return
    if kind not in POD_SPEC_PATHS:
        entry["status"] = STATUS_PASSED_THROUGH
        entry["reason"] = (
            f"kind {kind} has no pod template vpaweb sizes "
            f"({', '.join(SUPPORTED_KINDS)}); passed through untouched"
        )
        return
    pod_spec, spec_path = _pod_spec(document, kind, path)
    containers = parse_pod_containers(pod_spec, field=spec_path)
    if kind == "Pod":
        owner_kind, owner_name = owner_of_pod(metadata)
    else:
        owner_kind, owner_name = kind, name if isinstance(name, str) else None
    pods.append(_Pod(entry, pod_spec, containers, namespace, owner_kind, owner_name))


def _left_alone_notes(
    pod: _Pod, advice: PodAdvice, options: RightsizeOptions
) -> list[str]:
    """Why a pod template was left as it is: an unknown workload (a typo in the
    cluster, namespace or name?) first, then each container's reason."""
    notes = []
    entry = pod.entry
    if advice.workload is None and pod.owner_kind in OWNER_KINDS and pod.owner_name:
        where = f"cluster {options.cluster}" if options.cluster else "any cluster"
        notes.append(
            f"unknown workload {pod.namespace}/{pod.owner_kind}/{pod.owner_name}: "
            f"vpaweb knows no active {pod.owner_kind} of that name in namespace "
            f"{pod.namespace} of {where} (a typo in the cluster, namespace or "
            "name, or a workload not discovered yet?)"
        )
    for report in entry["containers"]:
        if report["source"] == SOURCE_NONE:
            why = report["reason"]
        else:
            why = "its requests already match the recommendation"
        notes.append(f"container {report['name']}: {why}")
    return notes


def _rightsize_pod(pod: _Pod, options: RightsizeOptions, inputs: AdviceInputs) -> None:
    """Write the advice into one pod template and fill in its report entry."""
    entry, pod_spec, containers = pod.entry, pod.pod_spec, pod.containers
    advice, young = gated_advice(
        inputs,
        advise(inputs, containers, multiplier=options.multiplier),
        include_short_history=options.include_short_history,
    )
    if advice.workload is not None:
        workload = advice.workload
        entry["workload"] = {
            "id": workload.pk,
            "cluster": workload.cluster.name,
            "namespace": workload.namespace,
            "kind": workload.kind,
            "name": workload.name,
        }
    items_by_name = {
        item["name"]: item
        for key in ("containers", "initContainers")
        for item in pod_spec.get(key) or []
    }
    by_name = {a.name: a for a in advice.containers}
    entries: dict[str, dict[str, Any]] = {}
    plans: list[_Plan] = []
    for container in containers:
        result = by_name[container.name]
        if result.source == SOURCE_NONE:
            entries[container.name] = {
                "name": container.name,
                "source": result.source,
                "reason": result.reason,
                "changes": [],
                # A pod no node could hold at the advice is flagged, not written.
                "notes": [advice.fits_no_node] if advice.fits_no_node else [],
                "low_confidence": False,
            }
            continue
        plan = _plan_container(
            items_by_name[container.name], container, result, options
        )
        if container.name in young:
            plan.notes.insert(
                0,
                f"low confidence: {young[container.name]}; the webhook and the "
                "updater do not act on it yet (include_short_history)",
            )
            plan.low_confidence = True
        plans.append(plan)
    # Rounded up to readable quantities over the whole pod (a Pod LimitRange maximum
    # bounds the sum).
    # The containers left alone count in the pod's sums with what they have.
    planned = {p.container.name for p in plans}
    readable = readable_pod_resources(
        [(p.container, p.requests, p.limits) for p in plans]
        + [(c, Resources(), Resources()) for c in containers if c.name not in planned],
        container_range=inputs.container_range,
        pod_range=inputs.pod_range,
    )
    for plan, amounts in zip(plans, readable[: len(plans)], strict=True):
        entries[plan.container.name] = _rightsize_container(plan, amounts, options)
    entry["containers"].extend(entries[c.name] for c in containers)
    for report in entry["containers"]:
        report["notes"].extend(unknown_field_notes(items_by_name[report["name"]]))
    sized = {c.name for c in containers}
    for item in pod_spec.get("initContainers") or []:
        if item["name"] not in sized:
            entry["containers"].append(
                {
                    "name": item["name"],
                    "source": SOURCE_NONE,
                    "reason": (
                        "left as is: an init container runs to completion before the "
                        "app starts; only containers and native sidecars are sized"
                    ),
                    "changes": [],
                    "notes": unknown_field_notes(item),
                    "low_confidence": False,
                }
            )
    changed = any(c["changes"] for c in entry["containers"])
    entry["status"] = STATUS_RIGHTSIZED if changed else STATUS_UNCHANGED
    if not changed:
        entry["notes"].extend(_left_alone_notes(pod, advice, options))


def _keep_hpas_in_step(hpas: list[_Hpa], pods: list[_Pod]) -> None:
    """Rewrite the Utilization targets of each HPA whose workload was sized here, so
    it scales at the same usage per pod as before (services.advice.hpa)."""
    by_key = {pod.key: pod for pod in pods if pod.owner_kind != "Pod"}
    for hpa in hpas:
        pod = by_key.get(hpa.target)
        if pod is None:
            continue
        sized = parse_pod_containers(pod.pod_spec, field=hpa.path)
        changes = rightsize_hpa_document(
            hpa.document,
            path=hpa.path,
            before=requests_of(pod.containers),
            after=requests_of(sized),
        )
        hpa.entry["hpa_changes"] = changes
        # The targets as they now stand against the limits the pods now get.
        hpa.entry["warnings"] = trigger_warnings(
            hpa_of(hpa.document),
            requests=requests_of(sized),
            limits={c.name: c.limits for c in sized},
        )
        if changes:
            hpa.entry["status"] = STATUS_RIGHTSIZED
            hpa.entry["reason"] = (
                f"{pod.owner_kind} {pod.owner_name} was right-sized in the same "
                "manifests: its Utilization targets move with the requests so the "
                "HPA scales at the same usage per pod"
            )
        else:
            hpa.entry["reason"] = (
                f"{pod.owner_kind} {pod.owner_name}'s requests the HPA measures did "
                "not change (or it scales on no cpu/memory Utilization)"
            )


def rightsize_manifests(
    *,
    documents: list[Any],
    options: RightsizeOptions,
    max_containers: int | None = None,
    inputs_for: Callable[[list[PodKey]], dict[PodKey, AdviceInputs]] | None = None,
) -> RightsizeResult:
    """Set container requests (and limits) of every workload manifest in ``documents``.

    ``documents`` come from ``api.bodies.load_manifests`` and are changed in place.
    Every document is read first; more than ``max_containers`` containers in all is a
    TooLarge before any lookup, and the lookups of all pods take a number of queries
    that does not grow with them (``advise.inputs_for_pods``). Raises InvalidInput
    naming the path of the first malformed part; nothing is stored either way.
    ``inputs_for`` replaces the database's advice inputs (``manage.py rightsize``
    and ``check-manifests`` read recommendations from usage files instead).
    """
    report: list[dict[str, Any]] = []
    pods: list[_Pod] = []
    hpas: list[_Hpa] = []
    for index, document in enumerate(documents):
        _collect_document(document, f"documents[{index}]", options, report, pods, hpas)
    containers = sum(len(pod.containers) for pod in pods)
    if max_containers is not None and containers > max_containers:
        raise TooLarge(
            f"the manifests have {containers} containers to size; the limit is "
            f"{max_containers} (VPAWEB_API_MAX_CONTAINERS): split them into smaller "
            "requests",
            field="body",
        )
    if pods:
        keys = [p.key for p in pods]
        inputs = (
            inputs_for(keys)
            if inputs_for is not None
            else inputs_for_pods(pods=keys, cluster=options.cluster)
        )
        for pod in pods:
            _rightsize_pod(pod, options, inputs[pod.key])
    _keep_hpas_in_step(hpas, pods)
    result = RightsizeResult(manifests=documents, documents=report)
    logger.info("rightsized %s", result.summary())
    return result


def _check_factor(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(
            f"{name} must be a number in [{MIN_FACTOR:g}, 1] or null", field=name
        )
    if not math.isfinite(value) or not MIN_FACTOR <= value <= 1:
        raise InvalidInput(
            f"{name} must be at least {MIN_FACTOR:g} and at most 1 (a request "
            f"reduction), not {value!r}",
            field=name,
        )
    return float(value)


def set_static_coefficient(
    *,
    namespace: str,
    cpu_factor: float | None,
    memory_factor: float | None,
    actor: User | None,
    now: datetime,
    actor_label: str | None = None,
) -> StaticCoefficient | None:
    """Set a namespace's first-deploy coefficient ("" = global); both None remove it."""
    if (
        not isinstance(namespace, str)
        or len(namespace) > NAMESPACE_MAX_LENGTH
        or re.fullmatch(NAMESPACE_PATTERN, namespace) is None
    ):
        raise InvalidInput(
            "namespace must be a Kubernetes namespace name (at most 63 lower-case "
            'letters, digits and "-", starting and ending with a letter or digit), '
            'or "" for all',
            field="namespace",
        )
    cpu = _check_factor("cpu_factor", cpu_factor)
    memory = _check_factor("memory_factor", memory_factor)
    label = actor_label or actor_label_of(actor)
    scope = namespace or "(global default)"
    with transaction.atomic():
        current = (
            StaticCoefficient.objects.select_for_update()
            .filter(namespace=namespace)
            .first()
        )
        before = (
            {}
            if current is None
            else {
                "cpu_factor": current.cpu_factor,
                "memory_factor": current.memory_factor,
            }
        )
        if cpu is None and memory is None:
            if current is not None:
                current.delete()
            row = None
        else:
            row, _ = StaticCoefficient.objects.update_or_create(
                namespace=namespace,
                defaults={
                    "cpu_factor": cpu,
                    "memory_factor": memory,
                    "updated_at": now,
                    "updated_by": actor,
                },
            )
        after = {} if row is None else {"cpu_factor": cpu, "memory_factor": memory}
        if before != after:
            record_audit(
                now=now,
                actor=actor,
                actor_label=label,
                action=Action.COEFFICIENT_UPDATE,
                object_type="static_coefficient",
                object_id=scope,
                before=before,
                after=after,
                message=(
                    f"{label} set the static coefficient of {scope} "
                    f"to {after or 'none'}"
                ),
            )
    logger.info(
        "static coefficient of %s set to %s by %s", scope, after or "none", label
    )
    return row

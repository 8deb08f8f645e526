"""Pods the simulated cluster creates go through admission, as a real cluster's do."""
# When a simulated pod starts, the simulated cluster builds the Pod object its
# controller would submit (the template's containers, the controller's owner reference:
# a Job for a CronJob's run, the ReplicaSet for a Deployment's pod; the pod-template
# labels), sends it as an ``admission.k8s.io/v1`` AdmissionReview to the ``admit``
# callable it was given (the composition root passes the webhook's service; this layer
# imports nothing of the services), applies the JSONPatch of the answer as the API
# server would (only ``add`` operations are ever sent) and keeps the resulting requests,
# limits and annotations (``admit_new_pod``). Two kinds of new pods: a CronJob's runs
# (``AdmittedPods``, remembered in the process), and a pod the updater evicted,
# recreated by its controller (``services/ connections.py`` stores what admission gave
# it). So ``make run`` shows Initial, Recreate and InPlaceOrRecreate end to end without
# a Kubernetes cluster.

from __future__ import annotations

import base64
import json
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from recommender.cluster.base import ContainerSpec
from recommender.engine.quantity import (
    format_cpu,
    format_memory,
    parse_cpu_millicores,
    parse_memory_bytes,
)
from recommender.engine.resources import Resources

logger = logging.getLogger(__name__)

Admit = Callable[[dict[str, Any]], Mapping[str, Any]]
# Pods remembered with their admitted resources (a bounded LRU: runs come and go).
MAX_REMEMBERED = 20000


def _resource_list(amounts: Resources) -> dict[str, str]:
    out = {}
    if amounts.cpu_millicores is not None:
        out["cpu"] = format_cpu(amounts.cpu_millicores)
    if amounts.memory_bytes is not None:
        out["memory"] = format_memory(amounts.memory_bytes)
    return out


def controller_of(
    *, kind: str, workload: str, pod: str, labels: Mapping[str, str]
) -> tuple[str, str, dict[str, str]]:
    """The controller that submits a pod of the workload: (owner kind, owner name,
    pod labels). A Deployment's pods come from its ReplicaSet ``<name>-<hash>`` (the
    pod's name without its suffix, labelled ``pod-template-hash``), a CronJob's from
    its Job (likewise); other kinds create their pods themselves."""
    if kind == "Deployment":
        replica_set = pod.rsplit("-", 1)[0]
        template_hash = replica_set.rsplit("-", 1)[-1]
        return "ReplicaSet", replica_set, {**labels, "pod-template-hash": template_hash}
    if kind == "CronJob":
        job = pod.rsplit("-", 1)[0]
        return "Job", job, {"job-name": job, "batch.kubernetes.io/job-name": job}
    return kind, workload, dict(labels)


def pod_object(
    *,
    namespace: str,
    name: str,
    owner_kind: str,
    owner_name: str,
    labels: Mapping[str, str],
    containers: tuple[ContainerSpec, ...],
) -> dict[str, Any]:
    """The Pod a controller submits (before admission): the template's containers,
    the controller's owner reference and labels. Only a StatefulSet names its pods;
    the others send ``generateName``, as the recorded reviews show."""
    regular, init = [], []
    for spec in containers:
        resources = {}
        if requests := _resource_list(spec.requests):
            resources["requests"] = requests
        if limits := _resource_list(spec.limits):
            resources["limits"] = limits
        item: dict[str, Any] = {
            "name": spec.name,
            "image": "sim",
            "resources": resources,
        }
        if spec.kind == "regular":
            regular.append(item)
        else:
            if spec.kind == "sidecar":
                item["restartPolicy"] = "Always"
            init.append(item)
    restart = "Never" if owner_kind == "Job" else "Always"
    pod_spec: dict[str, Any] = {"containers": regular, "restartPolicy": restart}
    if init:
        pod_spec["initContainers"] = init
    api_version = {"Job": "batch/v1", "ReplicationController": "v1"}.get(
        owner_kind, "apps/v1"
    )
    metadata: dict[str, Any] = {
        "namespace": namespace,
        "labels": dict(labels),
        "ownerReferences": [
            {
                "apiVersion": api_version,
                "kind": owner_kind,
                "name": owner_name,
                "uid": str(
                    uuid.uuid5(
                        uuid.NAMESPACE_OID, f"{namespace}/{owner_kind}/{owner_name}"
                    )
                ),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if owner_kind == "StatefulSet":
        metadata["name"] = name
    else:
        metadata["generateName"] = f"{owner_name}-"
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": metadata,
        "spec": pod_spec,
        "status": {},
    }


def apply_add_patch(obj: dict[str, Any], patch: list[dict[str, Any]]) -> None:
    """Apply a JSONPatch made only of ``add`` operations (RFC 6902) in place."""
    for op in patch:
        if op.get("op") != "add":
            raise ValueError(f"only add operations are expected, not {op!r}")
        tokens = [
            t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]
        ]
        target: Any = obj
        for token in tokens[:-1]:
            target = target[int(token)] if isinstance(target, list) else target[token]
        if isinstance(target, list):
            target.insert(int(tokens[-1]), op["value"])
        else:
            target[tokens[-1]] = op["value"]


def _amounts(raw: Mapping[str, Any] | None) -> Resources:
    raw = raw or {}
    return Resources(
        parse_cpu_millicores(raw["cpu"]) if "cpu" in raw else None,
        parse_memory_bytes(raw["memory"]) if "memory" in raw else None,
    )


def specs_of(
    obj: Mapping[str, Any], template: tuple[ContainerSpec, ...]
) -> tuple[ContainerSpec, ...]:
    """The pod's containers as ContainerSpecs (kinds from the template)."""
    by_name = {}
    for key in ("containers", "initContainers"):
        for item in obj["spec"].get(key, []):
            resources = item.get("resources") or {}
            by_name[item["name"]] = (
                _amounts(resources.get("requests")),
                _amounts(resources.get("limits")),
            )
    return tuple(
        ContainerSpec(s.name, s.kind, *by_name.get(s.name, (s.requests, s.limits)))
        for s in template
    )


@dataclass(frozen=True)
class AdmittedPod:
    """A new pod as admission left it: its containers and annotations."""

    containers: tuple[ContainerSpec, ...]
    annotations: dict[str, str]


def admit_new_pod(
    *,
    namespace: str,
    name: str,
    workload_kind: str,
    workload_name: str,
    labels: Mapping[str, str],
    template: tuple[ContainerSpec, ...],
    admit: Admit,
) -> AdmittedPod:
    """Submit a new pod of the workload to admission as its controller would (an
    ``admission.k8s.io/v1`` CREATE review of the Pod object), apply the answer's
    JSONPatch as the API server would, and return what the pod starts with. A failing
    admission leaves the pod as its template says (``failurePolicy: Ignore``)."""
    owner_kind, owner_name, pod_labels = controller_of(
        kind=workload_kind, workload=workload_name, pod=name, labels=labels
    )
    obj = pod_object(
        namespace=namespace,
        name=name,
        owner_kind=owner_kind,
        owner_name=owner_name,
        labels=pod_labels,
        containers=template,
    )
    review = {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace,
            "operation": "CREATE",
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }
    try:
        response = admit(review).get("response", {})
        if response.get("patchType") == "JSONPatch" and response.get("patch"):
            apply_add_patch(obj, json.loads(base64.b64decode(response["patch"])))
            return AdmittedPod(
                containers=specs_of(obj, template),
                annotations=dict(obj["metadata"].get("annotations") or {}),
            )
    except Exception:  # admission never blocks a simulated pod either
        logger.warning(
            "simulated admission of %s/%s failed", namespace, name, exc_info=True
        )
    return AdmittedPod(containers=template, annotations={})


class AdmittedPods:
    """Pods created through admission, with the resources they were admitted with."""

    def __init__(self) -> None:
        self._pods: OrderedDict[tuple[str, str, str], tuple[ContainerSpec, ...]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> tuple[ContainerSpec, ...] | None:
        """The remembered containers of a pod (cluster, namespace, name)."""
        with self._lock:
            return self._pods.get(key)

    def create(
        self,
        *,
        cluster: str,
        namespace: str,
        name: str,
        cronjob: str,
        template: tuple[ContainerSpec, ...],
        admit: Admit,
    ) -> tuple[ContainerSpec, ...]:
        """Submit a run's pod (of its Job) to admission and remember what it was
        admitted with."""
        specs = admit_new_pod(
            namespace=namespace,
            name=name,
            workload_kind="CronJob",
            workload_name=cronjob,
            labels={},
            template=template,
            admit=admit,
        ).containers
        with self._lock:
            self._pods[(cluster, namespace, name)] = specs
            while len(self._pods) > MAX_REMEMBERED:
                self._pods.popitem(last=False)
        return specs


ADMITTED = AdmittedPods()

"""Pods the simulated cluster creates go through admission, as a real cluster's do.

When a simulated pod starts (a CronJob's run; the fleet's other pods are long-lived),
the simulated cluster builds the Pod object a controller would submit (the template's
containers, the Job owner reference, the pod-template labels), sends it as an
``admission.k8s.io/v1`` AdmissionReview to the ``admit`` callable it was given (the
webhook's service, in-process: ``services/admission/review.py``), applies the JSONPatch
of the answer as the API server would (only ``add`` operations are ever sent) and keeps
the resulting requests and limits for the pod's life. So ``make run`` shows Initial mode
end to end without a Kubernetes cluster.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
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


def pod_object(
    *, namespace: str, name: str, job: str, containers: tuple[ContainerSpec, ...]
) -> dict[str, Any]:
    """The Pod a Job controller submits for one run of a CronJob."""
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
    pod_spec: dict[str, Any] = {"containers": regular, "restartPolicy": "Never"}
    if init:
        pod_spec["initContainers"] = init
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "generateName": f"{job}-",
            "namespace": namespace,
            "labels": {"job-name": job, "batch.kubernetes.io/job-name": job},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": str(uuid.uuid5(uuid.NAMESPACE_OID, f"{namespace}/{job}")),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
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
        job: str,
        template: tuple[ContainerSpec, ...],
        admit: Admit,
    ) -> tuple[ContainerSpec, ...]:
        """Submit the pod to admission and remember what it was admitted with."""
        obj = pod_object(namespace=namespace, name=name, job=job, containers=template)
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
        specs = template
        try:
            response = admit(review).get("response", {})
            if response.get("patchType") == "JSONPatch" and response.get("patch"):
                apply_add_patch(obj, json.loads(base64.b64decode(response["patch"])))
                specs = specs_of(obj, template)
        except Exception:  # admission never blocks a simulated pod either
            logger.warning(
                "simulated admission of %s/%s failed", namespace, name, exc_info=True
            )
        with self._lock:
            self._pods[(cluster, namespace, name)] = specs
            while len(self._pods) > MAX_REMEMBERED:
                self._pods.popitem(last=False)
        return specs


ADMITTED = AdmittedPods()

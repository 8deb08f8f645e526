"""Kubernetes objects (as the API serves them) for a generated fleet's workloads, so
the real Kubernetes adapter discovers exactly what the Prometheus history describes."""

from __future__ import annotations

import uuid
from typing import Any

from tests.prometheus_support.openmetrics import SeriesSpec


def _uid(*parts: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(parts)))


def _container(name: str, spec: SeriesSpec) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"registry.example.com/{spec.workload}:1.0",
        "resources": {
            "requests": {
                "cpu": f"{round(spec.cpu_request_cores * 1000)}m",
                "memory": str(spec.memory_request_bytes),
            }
        },
    }


def _owner(kind: str, name: str, uid: str) -> dict[str, Any]:
    group = "apps/v1"
    return {
        "apiVersion": group,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def objects_for(specs: list[SeriesSpec], *, live_at_s: int) -> list[dict[str, Any]]:
    """Deployments (with a ReplicaSet) or, for pods named ``<name>-<ordinal>``,
    StatefulSets; plus the pods still running at ``live_at_s``."""
    workloads: dict[tuple[str, str], list[SeriesSpec]] = {}
    for spec in specs:
        workloads.setdefault((spec.namespace, spec.workload), []).append(spec)
    objects: list[dict[str, Any]] = []
    for (namespace, name), members in workloads.items():
        names: dict[str, SeriesSpec] = {}
        for spec in members:
            names.setdefault(spec.container, spec)
        template = {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [_container(n, s) for n, s in names.items()]},
        }
        is_stateful = all(s.pod.rpartition("-")[2].isdigit() for s in members)
        kind = "StatefulSet" if is_stateful else "Deployment"
        uid = _uid(namespace, kind, name)
        objects.append(
            {
                "apiVersion": "apps/v1",
                "kind": kind,
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": uid,
                    "labels": {"app": name},
                },
                "spec": {
                    "replicas": len({s.pod for s in members if s.end_s >= live_at_s}),
                    "selector": {"matchLabels": {"app": name}},
                    "template": template,
                },
            }
        )
        pod_owner = _owner(kind, name, uid)
        if not is_stateful:
            replica_set = members[0].pod.rpartition("-")[0]
            rs_uid = _uid(namespace, "ReplicaSet", replica_set)
            objects.append(
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {
                        "name": replica_set,
                        "namespace": namespace,
                        "uid": rs_uid,
                        "labels": {"app": name},
                        "ownerReferences": [pod_owner],
                    },
                    "spec": {
                        "replicas": 1,
                        "selector": {"matchLabels": {"app": name}},
                        "template": template,
                    },
                }
            )
            pod_owner = _owner("ReplicaSet", replica_set, rs_uid)
        for pod in sorted({s.pod for s in members if s.end_s >= live_at_s}):
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod,
                        "namespace": namespace,
                        "uid": _uid(namespace, "Pod", pod),
                        "labels": {"app": name},
                        "ownerReferences": [pod_owner],
                    },
                    "spec": template["spec"],
                    "status": {
                        "phase": "Running",
                        "containerStatuses": [
                            {
                                "name": n,
                                "ready": True,
                                "restartCount": 0,
                                "state": {
                                    "running": {"startedAt": "2026-11-01T00:00:00Z"}
                                },
                            }
                            for n in names
                        ],
                    },
                }
            )
    return objects

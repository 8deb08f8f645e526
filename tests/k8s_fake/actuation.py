"""Objects for updater tests on the fake API server: a Deployment, its ReplicaSet and
pods shaped like the recorded ones (tests/fixtures/k8s-wire/eviction/05, resize/01), a
PodDisruptionBudget, a VerticalPodAutoscaler (admission/f4), a HorizontalPodAutoscaler
(hpa/05), and a ``FakeCluster``
bundling the server with the adapter and the writer that speak to it over HTTP."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recommender.cluster.kube_client import KubeClientSettings
from recommender.cluster.kube_writer import KubernetesWriter
from recommender.cluster.kubernetes import KubernetesAdapter
from tests.k8s_fake import rbac
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig

FAST = KubeClientSettings(
    connect_timeout_s=1.0,
    read_timeout_s=2.0,
    retries=1,
    backoff_s=0.01,
    max_backoff_s=0.05,
    page_size=50,
)
STARTED = (
    "2026-11-20T08:00:00Z"  # long before the tests' "now": past the 12 h threshold
)


def deployment(
    name: str,
    namespace: str = "shop",
    *,
    replicas: int = 3,
    cpu: str = "500m",
    memory: str = "512Mi",
    cpu_limit: str = "1",
    memory_limit: str = "1Gi",
) -> list[dict[str, Any]]:
    """A Deployment, its ReplicaSet and ``replicas`` Running pods."""
    labels = {"app": name}
    resources = {
        "requests": {"cpu": cpu, "memory": memory},
        "limits": {"cpu": cpu_limit, "memory": memory_limit},
    }
    template = {
        "metadata": {"labels": labels},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": f"registry.example/{name}:1",
                    "resources": resources,
                }
            ]
        },
    }
    rs_name = f"{name}-6b9c8d7f5"
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"dep-{name}",
                "labels": labels,
                "creationTimestamp": "2026-11-01T00:00:00Z",
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": template,
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": rs_name,
                "namespace": namespace,
                "uid": f"rs-{name}",
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": name,
                        "uid": f"dep-{name}",
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": template,
            },
        },
    ]
    for i in range(replicas):
        objects.append(pod(f"{rs_name}-p{i}", namespace, name, rs_name, resources))
    return objects


def pod(
    pod_name: str,
    namespace: str,
    app: str,
    rs_name: str,
    resources: dict[str, Any],
    *,
    resize_capable: bool = True,
    phase: str = "Running",
) -> dict[str, Any]:
    """A pod of a ReplicaSet; a resize-capable kubelet reports container resources."""
    status: dict[str, Any] = {
        "phase": phase,
        "startTime": STARTED,
        "qosClass": "Burstable",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": "app",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": STARTED}},
            }
        ],
    }
    if resize_capable:
        status["containerStatuses"][0]["resources"] = resources
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": namespace,
            "uid": f"uid-{pod_name}",
            "generation": 1,
            "creationTimestamp": STARTED,
            "labels": {"app": app, "pod-template-hash": rs_name.rsplit("-", 1)[1]},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs_name,
                    "uid": f"rs-{app}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [
                {
                    "name": "app",
                    "image": f"registry.example/{app}:1",
                    "resources": resources,
                }
            ],
        },
        "status": status,
    }


def pdb(
    name: str,
    namespace: str,
    app: str,
    *,
    allowed: int = 1,
    healthy: int = 3,
    desired: int = 2,
    observed: bool = True,
) -> dict[str, Any]:
    """A PodDisruptionBudget with the status the disruption controller writes."""
    status: dict[str, Any] = {
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": healthy,
    }
    if observed:
        status["observedGeneration"] = 1
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {"minAvailable": desired, "selector": {"matchLabels": {"app": app}}},
        "status": status,
    }


def vpa_object(
    name: str,
    namespace: str,
    target: str,
    *,
    recommenders: tuple[str, ...] = (),
    mode: str = "Recreate",
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A VerticalPodAutoscaler shaped like the recorded one (k8s-wire admission/f4),
    targeting Deployment ``target``; ``spec.recommenders`` names ``recommenders``."""
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "updatePolicy": {"minReplicas": 1, "updateMode": mode},
    }
    if recommenders:
        spec["recommenders"] = [{"name": r} for r in recommenders]
    obj: dict[str, Any] = {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"vpa-{namespace}-{name}",
            "generation": 1,
            "resourceVersion": "786",
            "creationTimestamp": "2026-11-01T00:00:00Z",
        },
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return obj


def hpa(
    name: str,
    namespace: str = "shop",
    *,
    target: str | None = None,
    cpu_utilization: int = 70,
    memory_average_value: str | None = "400Mi",
) -> dict[str, Any]:
    """An autoscaling/v2 HPA shaped like the recorded worker-two (k8s-wire hpa/05): a
    Resource cpu Utilization metric and, unless ``memory_average_value`` is None, a
    ContainerResource memory AverageValue of container ``app``; defaulted as the API
    server defaults it (minReplicas 1 absent, no behavior, no generation)."""
    metrics: list[dict[str, Any]] = [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {
                    "type": "Utilization",
                    "averageUtilization": cpu_utilization,
                },
            },
        }
    ]
    if memory_average_value is not None:
        metrics.append(
            {
                "type": "ContainerResource",
                "containerResource": {
                    "name": "memory",
                    "target": {
                        "type": "AverageValue",
                        "averageValue": memory_average_value,
                    },
                    "container": "app",
                },
            }
        )
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"hpa-{namespace}-{name}",
            "resourceVersion": "225",
            "creationTimestamp": "2026-11-01T00:00:00Z",
        },
        "spec": {
            "scaleTargetRef": {
                "kind": "Deployment",
                "name": target or name,
                "apiVersion": "apps/v1",
            },
            "minReplicas": 2,
            "maxReplicas": 8,
            "metrics": metrics,
        },
        "status": {"desiredReplicas": 0, "currentMetrics": None},
    }


@dataclass
class FakeCluster:
    """The fake API server with an adapter and a writer speaking to it."""

    server: FakeApiServer
    adapter: KubernetesAdapter
    writer: KubernetesWriter

    def close(self) -> None:
        self.adapter.close()
        self.writer.close()
        self.server.stop()

    def writes(self) -> list[tuple[str, str]]:
        """(method, path) of every non-GET request that changes something, in order
        (access reviews, which create nothing, are ``access_reviews``)."""
        return [
            (r.method, r.path)
            for r in self.server.write_verbs()
            if r.path != rbac.ACCESS_REVIEWS
        ]

    def access_reviews(self) -> list[dict[str, Any]]:
        """The resourceAttributes of every SelfSubjectAccessReview sent."""
        return [
            json.loads(r.body)["spec"]["resourceAttributes"]
            for r in self.server.write_verbs()
            if r.path == rbac.ACCESS_REVIEWS
        ]


def fake_cluster(objects: list[dict[str, Any]], tmp_path: Path) -> FakeCluster:
    """Start a fake API server holding ``objects``; adapter and writer for it."""
    server = FakeApiServer(objects).start()
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"fake": server}, current="fake"
    )
    adapter = KubernetesAdapter(
        cluster_name="fake",
        context="fake",
        kubeconfig=str(kubeconfig),
        settings=FAST,
        sleep=lambda _s: None,
    )
    writer = KubernetesWriter(
        cluster_name="fake", context="fake", kubeconfig=str(kubeconfig), settings=FAST
    )
    return FakeCluster(server, adapter, writer)

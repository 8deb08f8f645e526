"""Small builders of model rows for tests: a cluster, workloads with containers and
policies, recommendations. Use the real refresh service (tests/services) when the
numbers matter."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from recommender.models import Cluster, Container, Policy, Recommendation, Workload
from recommender.roles import Role, grant_role


def make_user(username: str, role: Role | None, *, password: str = "pw-for-tests-only"):
    """A user with one role (or none)."""
    user = get_user_model().objects.create_user(username=username, password=password)
    if role is not None:
        grant_role(user, role)
    return user


def make_cluster(name: str = "test-cluster", **fields: Any) -> Cluster:
    """A cluster row; one whose actuation an operator allowed, unless
    ``actuation_allowed=False``."""
    fields.setdefault("actuation_allowed", True)
    return Cluster.objects.create(
        name=name, kind=fields.pop("kind", "simulated"), **fields
    )


def make_workload(
    cluster: Cluster,
    name: str = "web",
    *,
    namespace: str = "default",
    kind: str = Workload.Kind.DEPLOYMENT,
    containers: dict[str, dict[str, int | None]] | None = None,
    mode: str = Policy.Mode.OFF,
    replicas: int = 3,
) -> Workload:
    """A workload, containers (``{"app": {"request_cpu_millicores": 500}}``), policy."""
    workload = Workload.objects.create(
        cluster=cluster,
        kind=kind,
        namespace=namespace,
        name=name,
        replicas=replicas,
        selector={"matchLabels": {"app": name}},
        labels={"app": name},
    )
    if containers is None:
        containers = {
            "app": {
                "request_cpu_millicores": 500,
                "request_memory_bytes": 512 * 2**20,
                "limit_cpu_millicores": 1000,
                "limit_memory_bytes": 1024 * 2**20,
            }
        }
    for position, (container_name, amounts) in enumerate(containers.items()):
        Container.objects.create(
            workload=workload, name=container_name, position=position, **amounts
        )
    Policy.objects.create(workload=workload, mode=mode)
    return workload


def make_recommendation(
    container: Container,
    *,
    cpu_millicores: int = 250,
    memory_bytes: int = 300 * 2**20,
    created_at=None,
    explanation: dict[str, Any] | None = None,
    history_days: float = 8.0,
) -> Recommendation:
    """A recommendation (bounds ±20 %) made the container's latest; without an
    explanation, one whose confidence says ``history_days`` of history (acted on)."""
    if explanation is None:
        explanation = {"resources": {"cpu": {"confidence": history_days}}}
    rec = Recommendation.objects.create(
        container=container,
        created_at=created_at or timezone.now(),
        target_cpu_millicores=cpu_millicores,
        target_memory_bytes=memory_bytes,
        lower_cpu_millicores=int(cpu_millicores * 0.8),
        lower_memory_bytes=int(memory_bytes * 0.8),
        upper_cpu_millicores=int(cpu_millicores * 1.2),
        upper_memory_bytes=int(memory_bytes * 1.2),
        uncapped_cpu_millicores=cpu_millicores,
        uncapped_memory_bytes=memory_bytes,
        explanation=explanation or {},
    )
    container.latest_recommendation = rec
    container.save(update_fields=["latest_recommendation"])
    return rec


def utilization_hpa(
    name: str, *, target: int, min_replicas: int = 1, max_replicas: int = 10
) -> dict[str, Any]:
    """A stored HPA conflict (Workload.hpa_conflicts, as discovery writes it) scaling
    on every container's cpu at ``target`` percent utilization."""
    return {
        "name": name,
        "resources": ["cpu"],
        "min_replicas": min_replicas,
        "max_replicas": max_replicas,
        "metrics": [
            {
                "resource": "cpu",
                "container": "",
                "target_type": "Utilization",
                "average_utilization": target,
                "average_value": None,
            }
        ],
    }

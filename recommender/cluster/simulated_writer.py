"""The simulated cluster's ``ClusterWriter``: resizes and evictions that take effect."""
# The simulated fleet is a pure function of its seed, so what the writer changes is kept
# by a ``SimulatedPodStore`` (the services keep it in the database, so the web process
# and the workers see the same pods) and applied by ``SimulatedCluster`` on every
# discovery:
#
# - a resize changes the pod's containers at once (a resize-capable kubelet that never
#   defers), and bumps its generation; answered 200 with the pod's name, as the resize
#   subresource answers;
# - an eviction recreates the pod at once under a new uid, with the requests the
#   admission path gives it (the store asks ``admit``); answered 201 with the ``Status``
#   body the Eviction API sends (eviction/05); a missing pod is 404 (eviction/11);
# - Events are kept in memory (``events``), VPA status is not simulated
#   (404, as a cluster without them would answer);
# - an HPA's JSON patch (coordinated HPA mode) is applied to the fleet's HPA as the
#   API server applies it (a failed test is a bare 422) and kept by the store.

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from recommender.cluster.json_patch import PatchFailed, apply_patch
from recommender.cluster.writer import (
    AccessAnswer,
    AccessCheck,
    ContainerResize,
    WriteResult,
)

SUCCESS = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Success",
    "code": 201,
}


@dataclass(frozen=True)
class SimulatedEvent:
    """An Event the simulated cluster received."""

    namespace: str
    pod: str
    reason: str
    message: str
    event_type: str


class SimulatedPodStore(Protocol):
    """Where the simulated cluster keeps what writes changed."""

    def exists(self, namespace: str, name: str) -> bool:
        """Whether the pod is in the cluster now."""
        ...

    def resize(
        self, namespace: str, name: str, containers: tuple[ContainerResize, ...]
    ) -> None:
        """Record new requests/limits of the named containers."""
        ...

    def recreate(self, namespace: str, name: str) -> None:
        """Evict the pod and recreate it through the admission path."""
        ...

    def hpa(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The HorizontalPodAutoscaler as it is now (writes applied), or None."""
        ...

    def set_hpa_metrics(
        self, namespace: str, name: str, metrics: list[dict[str, Any]]
    ) -> int:
        """Store the HPA's new ``spec.metrics``; its new resourceVersion."""
        ...


def _not_found(kind: str, name: str) -> WriteResult:
    message = f'{kind} "{name}" not found'
    return WriteResult(
        status=404,
        reason="NotFound",
        message=message,
        body={
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "NotFound",
            "details": {"name": name, "kind": kind.split(".")[0]},
            "code": 404,
        },
    )


# The API server's answer to a JSON patch whose test fails (k8s-wire hpa/15, 17).
TEST_FAILED = "the server rejected our request due to an error in our request"


def _invalid(message: str, details: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Invalid",
        "details": dict(details),
        "code": 422,
    }


def _invalid_target(name: str, hpa: Mapping[str, Any]) -> WriteResult | None:
    """422 as the API server validates a target (k8s-wire hpa/22): an
    averageUtilization below 1 names its field."""
    for index, metric in enumerate((hpa.get("spec") or {}).get("metrics") or ()):
        key = "resource" if metric.get("type") == "Resource" else "containerResource"
        target = (metric.get(key) or {}).get("target") or {}
        value = target.get("averageUtilization")
        if value is not None and (not isinstance(value, int) or value < 1):
            field = f"spec.metrics[{index}].{key}.target.averageUtilization"
            cause = f"Invalid value: {value}: must be greater than 0"
            message = (
                f'HorizontalPodAutoscaler.autoscaling "{name}" is invalid: {field}: '
                f"{cause}"
            )
            details = {
                "name": name,
                "group": "autoscaling",
                "kind": "HorizontalPodAutoscaler",
                "causes": [
                    {"reason": "FieldValueInvalid", "message": cause, "field": field}
                ],
            }
            return WriteResult(
                status=422,
                reason="Invalid",
                message=message,
                body=_invalid(message, details),
            )
    return None


class SimulatedWriter:
    """Writes to the simulated cluster (a ``ClusterWriter``)."""

    def __init__(self, *, store: SimulatedPodStore) -> None:
        self.store = store
        self.events: list[SimulatedEvent] = []

    def close(self) -> None:
        """Nothing to release."""

    def resize_pod(
        self, *, namespace: str, name: str, containers: tuple[ContainerResize, ...]
    ) -> WriteResult:
        """Apply the new resources at once (200)."""
        if not self.store.exists(namespace, name):
            return _not_found("pods", name)
        self.store.resize(namespace, name, containers)
        return WriteResult(status=200, body={"metadata": {"name": name}})

    def evict_pod(
        self, *, namespace: str, name: str, dry_run: bool = False
    ) -> WriteResult:
        """Recreate the pod through admission (201 with a Status body)."""
        if not self.store.exists(namespace, name):
            return _not_found("pods", name)
        if not dry_run:
            self.store.recreate(namespace, name)
        return WriteResult(status=201, body=SUCCESS)

    def record_event(
        self,
        *,
        namespace: str,
        pod: str,
        pod_uid: str,
        reason: str,
        message: str,
        event_type: str = "Normal",
    ) -> WriteResult:
        """Keep the Event in memory (201)."""
        self.events.append(SimulatedEvent(namespace, pod, reason, message, event_type))
        return WriteResult(status=201, body={"kind": "Event"})

    def write_vpa_status(
        self, *, namespace: str, name: str, status: Mapping[str, Any]
    ) -> WriteResult:
        """The simulated cluster has no VPA objects."""
        return _not_found("verticalpodautoscalers.autoscaling.k8s.io", name)

    def patch_hpa(
        self, *, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> WriteResult:
        """Apply the JSON patch to the HPA's spec as the API server does: a failed
        test is 422 with no detail (hpa/17), a target below 1 is 422 naming the
        field (hpa/22), else 200 with the object and a new resourceVersion."""
        current = self.store.hpa(namespace, name)
        if current is None:
            return _not_found("horizontalpodautoscalers.autoscaling", name)
        try:
            patched = apply_patch(current, operations)
        except PatchFailed:
            return WriteResult(
                status=422,
                reason="Invalid",
                message=TEST_FAILED,
                body=_invalid(TEST_FAILED, {}),
            )
        invalid = _invalid_target(name, patched)
        if invalid is not None:
            return invalid
        version = self.store.set_hpa_metrics(
            namespace, name, list(patched["spec"].get("metrics") or [])
        )
        patched["metadata"]["resourceVersion"] = str(version)
        return WriteResult(status=200, body=patched)

    def apply_webhook_configuration(self, *, body: Mapping[str, Any]) -> WriteResult:
        """The simulated cluster admits pods through vpaweb directly (no webhook)."""
        return WriteResult(status=200)

    def delete_webhook_configuration(self, *, name: str) -> WriteResult:
        """Nothing registered, nothing to delete."""
        return WriteResult(status=200)

    def review_access(self, *, checks: list[AccessCheck]) -> list[AccessAnswer]:
        """The simulated cluster lets vpaweb do everything it writes."""
        return [AccessAnswer(allowed=True) for _ in checks]

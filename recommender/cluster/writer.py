"""The one interface through which vpaweb writes to a cluster.

Every write vpaweb makes (an in-place resize, an eviction, an Event, a VPA status, an
HPA's targets, the webhook's registration, a SelfSubjectAccessReview asking what it may
do) is a method of
``ClusterWriter``. The writer role (deploy/components/actuation/rbac-writer.yaml)
grants exactly what these methods send, access reviews aside (any authenticated user
may ask), which tests/cluster/test_kubernetes_rbac_writer.py checks both ways. No other
module sends a non-GET request to a cluster (a static test), and a cluster whose
workloads are all Off receives no write at all (tests against the fake API server)."""
# Implementations: the Kubernetes writer (official client) and the simulated cluster's.
# The updater gets one from ``services/actuation/writers.py`` (the implementation for a
# ``Cluster`` row); the webhook's registration opens a Kubernetes one itself
# (``kube_client.open_writer``).
#
# Results are data, not exceptions, for the answers an updater must act on (a PDB's 429
# is "try later", a 422 on resize means "fall back to eviction"): ``WriteResult``
# carries the HTTP status, the Kubernetes ``Status`` reason and message as the API
# server sent them (see tests/fixtures/k8s-wire/). Failures to reach the cluster at all
# raise ``SourceUnavailable`` like the readers do.

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from recommender.engine.resources import Resources

# vpaweb's MutatingWebhookConfiguration: the one name the writer role grants update,
# get and delete on (resourceNames), asked by that name in access reviews.
WEBHOOK_CONFIGURATION_NAME = "vpaweb-webhook"
# The cause of a resize larger than its node's allocatable (k8s-wire kubelet/06).
NODE_CAPACITY = "NodeCapacity"


@dataclass(frozen=True)
class WriteResult:
    """What the API server answered to one write."""

    status: int  # HTTP status code (the simulated cluster answers the same codes)
    reason: str = ""  # Status.reason, e.g. "TooManyRequests", "" on success
    message: str = ""  # Status.message, as sent
    retry_after_s: float | None = None  # the Retry-After header, when present
    body: Mapping[str, Any] = field(default_factory=dict)
    # X-Content-Type-Options as sent ("nosniff" on an authorization refusal).
    content_type_options: str = ""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def causes(self) -> tuple[str, ...]:
        """The reasons of the Status's ``details.causes`` (e.g. "NodeCapacity")."""
        details = self.body.get("details") or {}
        causes = details.get("causes") if isinstance(details, Mapping) else None
        return tuple(
            str(c.get("reason") or "") for c in causes or () if isinstance(c, Mapping)
        )

    @property
    def permission_refused(self) -> bool:
        """A 403 from authorization (RBAC), not from admission. The API server's
        authorization refusals carry ``X-Content-Type-Options: nosniff`` and no cause
        (k8s-wire rbac/403-16); admission's 403s carry neither header nor, for a
        resize larger than the node, anything but a ``NodeCapacity`` cause
        (k8s-wire kubelet/06, resize/11)."""
        return (
            self.status == 403
            and self.content_type_options.lower() == "nosniff"
            and not self.causes
        )

    @property
    def node_capacity(self) -> bool:
        """A resize refused because the pod's node cannot hold it (kubelet/06)."""
        return self.status == 403 and NODE_CAPACITY in self.causes


@dataclass(frozen=True)
class ContainerResize:
    """New requests and limits for one container of a pod (absent = unchanged)."""

    name: str
    requests: Resources = Resources()
    limits: Resources = Resources()


@dataclass(frozen=True)
class AccessCheck:
    """One permission to ask about (a SelfSubjectAccessReview's resourceAttributes),
    cluster-wide (every namespace); with ``name``, for that object only, as a role
    that grants it by ``resourceNames`` answers (RBAC matches such a rule only for a
    request naming one of them)."""

    group: str
    resource: str
    verb: str
    subresource: str = ""
    name: str = ""

    def describe(self) -> str:
        """``patch pods/resize`` as RBAC messages name it."""
        resource = self.resource + (f"/{self.subresource}" if self.subresource else "")
        named = f" {self.name!r}" if self.name else ""
        group = f" in API group {self.group!r}" if self.group else ""
        return f"{self.verb} {resource}{named}{group}"


@dataclass(frozen=True)
class AccessAnswer:
    """What the API server answered: allowed or not, and its reason."""

    allowed: bool
    reason: str = ""


class ClusterWriter(Protocol):
    """Writes to one cluster. Every method is one API request (plus its retries)."""

    def resize_pod(
        self, *, namespace: str, name: str, containers: tuple[ContainerResize, ...]
    ) -> WriteResult:
        """PATCH the pod's ``resize`` subresource (in-place resize)."""
        ...

    def evict_pod(
        self, *, namespace: str, name: str, dry_run: bool = False
    ) -> WriteResult:
        """POST a policy/v1 Eviction (the API server enforces PodDisruptionBudgets)."""
        ...

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
        """Create an Event on the pod with vpaweb's own reason."""
        ...

    def write_vpa_status(
        self, *, namespace: str, name: str, status: Mapping[str, Any]
    ) -> WriteResult:
        """Patch a VerticalPodAutoscaler's ``status`` subresource."""
        ...

    def patch_hpa(
        self, *, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> WriteResult:
        """PATCH a HorizontalPodAutoscaler with a JSON patch (RFC 6902) that
        ``test``s each target it changes before it ``replace``s it (coordinated HPA
        mode): a failed test is a bare 422, nothing changed (k8s-wire hpa/16, 17)."""
        ...

    def apply_webhook_configuration(self, *, body: Mapping[str, Any]) -> WriteResult:
        """Create or update a MutatingWebhookConfiguration."""
        ...

    def delete_webhook_configuration(self, *, name: str) -> WriteResult:
        """Delete a MutatingWebhookConfiguration (404 counts as done)."""
        ...

    def review_access(self, *, checks: list[AccessCheck]) -> list[AccessAnswer]:
        """Ask whether vpaweb may do each of ``checks`` (SelfSubjectAccessReview:
        a POST that creates nothing); send only where actuation is allowed."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...

"""The Kubernetes ``ClusterWriter``: every write vpaweb sends to a real API server.

One request per call through the official client's ``call_api`` (raw JSON, no model
classes), with the connect/read timeouts of ``KubeClientSettings``. Answers the updater
must act on come back as ``WriteResult`` data (a PDB's 429 is "try later", a resize's
422 means "fall back to eviction"); only a cluster that cannot be reached raises
``SourceUnavailable``. Writes are not retried here: the updater's next cycle is the
retry, after it has looked at the pod again."""
# The request shapes follow the recordings in tests/fixtures/k8s-wire: a policy/v1
# ``Eviction`` body (eviction/05), a strategic merge patch of ``pods/<name>/resize``
# naming each container (resize/02; a JSON merge patch would replace the whole list,
# resize/25), a core/v1 ``Event`` with ``involvedObject`` and ``reportingComponent``
# (events/01).
#
# The admission webhook's registration (``apply_webhook_configuration``,
# ``delete_webhook_configuration``) is at the end of the class.

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from recommender.cluster import kube_client
from recommender.cluster.kube_client import KubeClientSettings
from recommender.cluster.writer import (
    AccessAnswer,
    AccessCheck,
    ContainerResize,
    WriteResult,
)
from recommender.engine.quantity import resource_list
from recommender.errors import SourceUnavailable

logger = logging.getLogger(__name__)

COMPONENT = "vpaweb-updater"
WEBHOOK_CONFIGURATIONS = (
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
)
# No recording of a SelfSubjectAccessReview exists in k8s-wire: the request and the
# answer follow the documented authorization.k8s.io/v1 shape (spec.resourceAttributes
# in; status.allowed, status.denied, status.reason out; 201 Created).
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
JSON = "application/json"


def resize_patch(containers: tuple[ContainerResize, ...]) -> dict[str, Any]:
    """The strategic merge patch of the ``resize`` subresource (resize/02)."""
    patched = []
    for container in containers:
        resources: dict[str, Any] = {}
        if not container.requests.is_empty():
            resources["requests"] = resource_list(container.requests)
        if not container.limits.is_empty():
            resources["limits"] = resource_list(container.limits)
        patched.append({"name": container.name, "resources": resources})
    return {"spec": {"containers": patched}}


class KubernetesWriter:
    """Writes to one Kubernetes cluster (a ``ClusterWriter``)."""

    def __init__(
        self,
        *,
        cluster_name: str,
        context: str = "",
        kubeconfig: str | None = None,
        settings: KubeClientSettings | None = None,
        api_client: k8s.ApiClient | None = None,
        instance: str = "",
    ) -> None:
        self.cluster_name = cluster_name
        self.settings = settings or KubeClientSettings.from_settings()
        self.api_client = api_client or kube_client.load_api_client(
            cluster_name=cluster_name, context=context, kubeconfig=kubeconfig
        )
        self.instance = instance or f"vpaweb-{uuid.uuid4().hex[:8]}"
        self.request_count = 0

    def close(self) -> None:
        """Release connections."""
        self.api_client.close()

    # --- one request ------------------------------------------------------------------
    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = JSON,
        query: list[tuple[str, str]] | None = None,
    ) -> WriteResult:
        self.request_count += 1
        what = f"{method} {path}"
        try:
            response = self.api_client.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Content-Type": content_type, "Accept": JSON},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=False,
                _request_timeout=(
                    self.settings.connect_timeout_s,
                    self.settings.read_timeout_s,
                ),
            )
            raw, status, headers = response
            try:
                data = raw.data
            finally:
                raw.release_conn()
            return _result(status, data, headers)
        except ApiException as exc:
            return _result(exc.status, exc.body, exc.headers)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceUnavailable(
                f"cluster {self.cluster_name!r}: cannot {what}: {exc}"
            ) from None

    # --- the updater's writes -------------------------------------------------------
    def resize_pod(
        self, *, namespace: str, name: str, containers: tuple[ContainerResize, ...]
    ) -> WriteResult:
        """PATCH the pod's ``resize`` subresource (in-place resize)."""
        return self._call(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}/resize",
            body=resize_patch(containers),
            content_type=STRATEGIC,
        )

    def evict_pod(
        self, *, namespace: str, name: str, dry_run: bool = False
    ) -> WriteResult:
        """POST a policy/v1 Eviction (the API server enforces PodDisruptionBudgets)."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        return self._call(
            "POST",
            f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            body=body,
            query=[("dryRun", "All")] if dry_run else None,
        )

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
        """Create a core/v1 Event on the pod with vpaweb's own reason (events/01)."""
        now = datetime.now(UTC)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                # client-go's naming: "<object>.<hex nanoseconds>".
                "name": f"{pod}.{int(now.timestamp() * 1e9):x}",
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": namespace,
                "name": pod,
                "uid": pod_uid,
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": COMPONENT},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": COMPONENT,
            "reportingInstance": self.instance,
        }
        return self._call("POST", f"/api/v1/namespaces/{namespace}/events", body=body)

    def write_vpa_status(
        self, *, namespace: str, name: str, status: Mapping[str, Any]
    ) -> WriteResult:
        """Merge-patch a VerticalPodAutoscaler's ``status`` subresource."""
        return self._call(
            "PATCH",
            f"/apis/autoscaling.k8s.io/v1/namespaces/{namespace}/"
            f"verticalpodautoscalers/{name}/status",
            body={"status": dict(status)},
            content_type=MERGE,
        )

    def patch_hpa(
        self, *, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> WriteResult:
        """JSON-patch a HorizontalPodAutoscaler's targets, each ``test``ed first
        (k8s-wire hpa/16: a merge or strategic patch would replace the whole metrics
        list, hpa/12, 18)."""
        return self._call(
            "PATCH",
            f"/apis/autoscaling/v2/namespaces/{namespace}/"
            f"horizontalpodautoscalers/{name}",
            body=operations,
            content_type=JSON_PATCH,
        )

    # --- what vpaweb may write -------------------------------------------------------
    def review_access(self, *, checks: list[AccessCheck]) -> list[AccessAnswer]:
        """One SelfSubjectAccessReview per check, cluster-wide."""
        answers = []
        for check in checks:
            attributes = {
                "group": check.group,
                "resource": check.resource,
                "verb": check.verb,
            }
            if check.subresource:
                attributes["subresource"] = check.subresource
            if check.name:
                attributes["name"] = check.name
            result = self._call(
                "POST",
                ACCESS_REVIEWS,
                body={
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": attributes},
                },
            )
            if not result.ok:
                answers.append(
                    AccessAnswer(
                        allowed=False,
                        reason=f"the review failed: HTTP {result.status} "
                        f"{result.message}".rstrip(),
                    )
                )
                continue
            status = result.body.get("status") or {}
            answers.append(
                AccessAnswer(
                    allowed=bool(status.get("allowed")),
                    reason=str(status.get("reason") or ""),
                )
            )
        return answers

    # --- the admission webhook's registration ----------------------------------------
    def apply_webhook_configuration(self, *, body: Mapping[str, Any]) -> WriteResult:
        """Create the MutatingWebhookConfiguration, or replace it at its version."""
        name = body["metadata"]["name"]
        current = self._call("GET", f"{WEBHOOK_CONFIGURATIONS}/{name}")
        if current.status == 404:
            result = self._call("POST", WEBHOOK_CONFIGURATIONS, body=body)
        elif current.ok:
            version = current.body.get("metadata", {}).get("resourceVersion", "")
            metadata = {**body["metadata"], "resourceVersion": version}
            result = self._call(
                "PUT",
                f"{WEBHOOK_CONFIGURATIONS}/{name}",
                body={**body, "metadata": metadata},
            )
        else:
            result = current
        logger.info(
            "cluster %s: MutatingWebhookConfiguration %s applied: HTTP %d %s",
            self.cluster_name,
            name,
            result.status,
            result.message,
        )
        return result

    def delete_webhook_configuration(self, *, name: str) -> WriteResult:
        """Delete the MutatingWebhookConfiguration (404 counts as done)."""
        result = self._call("DELETE", f"{WEBHOOK_CONFIGURATIONS}/{name}")
        logger.info(
            "cluster %s: MutatingWebhookConfiguration %s deleted: HTTP %d %s",
            self.cluster_name,
            name,
            result.status,
            result.message,
        )
        if result.status == 404:
            return WriteResult(status=200, reason="NotFound", message=result.message)
        return result


def _result(status: int, data: Any, headers: Any) -> WriteResult:
    """A ``WriteResult`` from an answer: Status reason/message, Retry-After, body,
    X-Content-Type-Options (which tells authorization's 403 from admission's)."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    body: dict[str, Any] = {}
    if data:
        try:
            parsed = json.loads(data)
        except ValueError:
            parsed = {"message": str(data)[: kube_client.MESSAGE_LIMIT]}
        if isinstance(parsed, dict):
            body = parsed
    is_status = body.get("kind") == "Status"
    return WriteResult(
        status=int(status),
        reason=str(body.get("reason") or "") if is_status else "",
        message=str(body.get("message") or "") if is_status else "",
        retry_after_s=kube_client._retry_after_s(headers),
        body=body,
        content_type_options=str((headers or {}).get("X-Content-Type-Options") or ""),
    )

"""``ClusterWriter`` for a real cluster, through the official ``kubernetes`` client.

Each method is one API request (raw JSON in and out, like ``kube_client.KubeReader``),
answered as a ``WriteResult`` carrying the HTTP status and the ``Status`` reason and
message exactly as the API server sent them (../shared/k8s-wire/). A cluster that
cannot be reached raises ``SourceUnavailable``.

Methods are grouped by feature so parallel work merges cleanly: the admission webhook's
registration (``apply_webhook_configuration``, ``delete_webhook_configuration``) is
below; the updater's pod, lease, event and VPA-status writes come with the updater.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from recommender.cluster.kube_client import (
    KubeClientSettings,
    _retry_after_s,
    _status_message,
)
from recommender.cluster.writer import WriteResult
from recommender.errors import SourceUnavailable

logger = logging.getLogger(__name__)

WEBHOOK_CONFIGURATIONS = (
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
)


class KubernetesWriter:
    """Writes to one cluster (see ``recommender.cluster.writer.ClusterWriter``)."""

    def __init__(
        self,
        *,
        cluster_name: str,
        api_client: k8s.ApiClient,
        settings: KubeClientSettings | None = None,
    ) -> None:
        self.cluster_name = cluster_name
        self.api_client = api_client
        self.settings = settings or KubeClientSettings()

    def close(self) -> None:
        """Release connections."""
        self.api_client.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> WriteResult:
        """One request; any HTTP answer is a WriteResult, no answer raises."""
        settings = self.settings
        try:
            response = self.api_client.call_api(
                path,
                method,
                header_params={
                    "Accept": "application/json",
                    "Content-Type": content_type,
                },
                body=dict(body) if body is not None else None,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=(settings.connect_timeout_s, settings.read_timeout_s),
            )
            try:
                raw = response.data
                status = response.status
            finally:
                response.release_conn()
            answer = json.loads(raw) if raw else {}
            return WriteResult(
                status=status, body=answer if isinstance(answer, dict) else {}
            )
        except ApiException as exc:
            try:
                answer = json.loads(exc.body) if exc.body else {}
            except ValueError:
                answer = {}
            return WriteResult(
                status=exc.status,
                reason=(answer.get("reason") or "") if isinstance(answer, dict) else "",
                message=_status_message(exc.body),
                retry_after_s=_retry_after_s(exc.headers),
                body=answer if isinstance(answer, dict) else {},
            )
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise SourceUnavailable(
                f"cluster {self.cluster_name!r}: cannot {method} {path}: {exc}"
            ) from None

    # --- admission webhook registration ---------------------------------------------
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

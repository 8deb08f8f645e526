"""Registering the webhook: the MutatingWebhookConfiguration, installed and removed."""
# ``webhook_configuration`` builds the object (shapes as kube-apiserver v1.36 stored
# them, k8s-wire admission/mutatingwebhookconfiguration.*): pods CREATE only,
# ``admissionReviewVersions [v1]``, ``sideEffects: None``, ``failurePolicy: Ignore``,
# ``timeoutSeconds`` at most 5, and two ways to opt out:
#
# - the ``namespaceSelector`` excludes ``kube-system``, vpaweb's own namespace (so
#   vpaweb can never block its own pods) and namespaces labelled
#   ``vpaweb.io/webhook=disabled``;
# - the ``objectSelector`` excludes pods labelled ``vpaweb.io/webhook=disabled``.
#
# ``install_webhook`` / ``uninstall_webhook`` write it through the cluster's
# ``ClusterWriter``, the one interface for cluster writes. This module is the one owner
# of the configuration on every deploy path (no manifest in deploy/ renders it; the
# overlays' Job runs ``webhook install``), and each install replaces the whole object,
# so no two writers ever merge halves of it (docs/webhook.md, "Who owns the
# registration").

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from django.conf import settings

from recommender.cluster.writer import (
    WEBHOOK_CONFIGURATION_NAME,
    ClusterWriter,
    WriteResult,
)
from recommender.errors import InvalidInput, SourceUnavailable

CONFIGURATION_NAME = WEBHOOK_CONFIGURATION_NAME
WEBHOOK_NAME = "pods.vpaweb.io"
OPT_OUT_LABEL = "vpaweb.io/webhook"
OPT_OUT_VALUE = "disabled"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
MAX_TIMEOUT_S = 5
CERT_MANAGER_ANNOTATION = "cert-manager.io/inject-ca-from"


def _opt_out() -> dict[str, Any]:
    return {"key": OPT_OUT_LABEL, "operator": "NotIn", "values": [OPT_OUT_VALUE]}


def webhook_configuration(
    *,
    url: str | None = None,
    service: str | None = None,
    cluster: str,
    ca_bundle: bytes | None = None,
    timeout_s: int | None = None,
    own_namespace: str | None = None,
    inject_ca_from: str | None = None,
) -> dict[str, Any]:
    """The MutatingWebhookConfiguration for a URL or a Service ``NAMESPACE/NAME``."""
    if (url is None) == (service is None):
        raise InvalidInput("give either --url or --service", field="url")
    timeout = settings.WEBHOOK_TIMEOUT_S if timeout_s is None else timeout_s
    if not 1 <= timeout <= MAX_TIMEOUT_S:
        raise InvalidInput(
            f"timeoutSeconds must be 1 to {MAX_TIMEOUT_S}, not {timeout}",
            field="timeout",
        )
    path = f"/mutate/{cluster}"
    client: dict[str, Any]
    if url is not None:
        if not url.startswith("https://"):
            raise InvalidInput(
                f"the webhook URL must start with https://, not {url!r}", field="url"
            )
        client = {"url": url.rstrip("/") + path}
    else:
        assert service is not None
        namespace, _, name = service.partition("/")
        if not namespace or not name:
            raise InvalidInput(
                f"--service must be NAMESPACE/NAME, not {service!r}", field="service"
            )
        client = {
            "service": {"namespace": namespace, "name": name, "path": path, "port": 443}
        }
    if ca_bundle:
        client["caBundle"] = base64.b64encode(ca_bundle).decode()
    excluded = ["kube-system"]
    own = settings.WEBHOOK_NAMESPACE if own_namespace is None else own_namespace
    if own and own not in excluded:
        excluded.append(own)
    metadata: dict[str, Any] = {
        "name": CONFIGURATION_NAME,
        "labels": {"app.kubernetes.io/name": "vpaweb"},
    }
    if inject_ca_from:
        # cert-manager's CA injector fills caBundle from this Certificate.
        metadata["annotations"] = {CERT_MANAGER_ANNOTATION: inject_ca_from}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "reinvocationPolicy": "Never",
                "timeoutSeconds": timeout,
                "clientConfig": client,
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": NAMESPACE_NAME_LABEL,
                            "operator": "NotIn",
                            "values": excluded,
                        },
                        _opt_out(),
                    ]
                },
                "objectSelector": {"matchExpressions": [_opt_out()]},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
            }
        ],
    }


def read_ca_bundle(path: str | None) -> bytes | None:
    """The PEM CA bundle file's bytes (InvalidInput when unreadable or not PEM)."""
    if path is None:
        return None
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInput(
            f"--ca-bundle {path}: {exc.strerror}", field="ca_bundle"
        ) from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise InvalidInput(
            f"--ca-bundle {path} holds no PEM certificate", field="ca_bundle"
        )
    return data


def _checked(result: WriteResult, what: str) -> WriteResult:
    if not result.ok:
        raise SourceUnavailable(
            f"{what}: HTTP {result.status} {result.reason} {result.message}".rstrip()
        )
    return result


def install_webhook(*, writer: ClusterWriter, body: dict[str, Any]) -> WriteResult:
    """Create or update the configuration; SourceUnavailable on a refusal."""
    return _checked(
        writer.apply_webhook_configuration(body=body),
        f"cannot install MutatingWebhookConfiguration {body['metadata']['name']}",
    )


def uninstall_webhook(
    *, writer: ClusterWriter, name: str = CONFIGURATION_NAME
) -> WriteResult:
    """Delete the configuration (already absent is fine)."""
    return _checked(
        writer.delete_webhook_configuration(name=name),
        f"cannot delete MutatingWebhookConfiguration {name}",
    )

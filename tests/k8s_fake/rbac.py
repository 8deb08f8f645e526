"""RBAC for the fake API server's writes, and SelfSubjectAccessReview.

A test denies write permissions (``FakeApiServer.deny``: API group, resource with
its subresource, verb); a write they cover is answered 403 exactly as the real API
server refuses one (tests/fixtures/k8s-wire/rbac/403-15 eviction, 403-16 resize,
403-18 event, 403-23 webhook configuration: the message names the resource, the verb,
the group and the namespace or cluster scope; ``details`` the name, group and kind;
the ``X-Content-Type-Options: nosniff`` header).

SelfSubjectAccessReview (``POST /apis/authorization.k8s.io/v1/
selfsubjectaccessreviews``) answers from the same denials. k8s-wire holds no
recording of one: the request and answer follow the documented authorization.k8s.io/v1
shape (``spec.resourceAttributes`` in; the object back, 201 Created, with
``status.allowed`` and, when denied, ``status.denied``/``status.reason``).
"""

from __future__ import annotations

import json
from typing import Any

ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
USER = "system:serviceaccount:vpaweb:vpaweb"
# Sent with every authorization refusal (rbac/403-*), never with admission's 403s.
HEADERS = {"X-Content-Type-Options": "nosniff"}
VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}

Permission = tuple[str, str, str]  # (group, "resource" or "resource/sub", verb)


def _attributes(method: str, path: str) -> dict[str, str] | None:
    """group, resource, subresource, namespace, name of a write request's path."""
    segments = [s for s in path.split("/") if s]
    if segments[:2] == ["api", "v1"]:
        group, rest = "", segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 3:
        group, rest = segments[1], segments[3:]
    else:
        return None
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if not rest or method not in VERBS:
        return None
    return {
        "group": group,
        "resource": rest[0],
        "name": rest[1] if len(rest) > 1 else "",
        "subresource": rest[2] if len(rest) > 2 else "",
        "namespace": namespace,
        "verb": VERBS[method],
    }


def _key(attributes: dict[str, str]) -> Permission:
    resource = attributes["resource"]
    if attributes.get("subresource"):
        resource += "/" + attributes["subresource"]
    return (attributes.get("group", ""), resource, attributes["verb"])


def forbidden(denied: set[Permission], method: str, path: str) -> dict[str, Any] | None:
    """The 403 Status body when ``denied`` covers this write, else None."""
    attributes = _attributes(method, path)
    if attributes is None or _key(attributes) not in denied:
        return None
    group, resource, verb = _key(attributes)
    kind = attributes["resource"]
    subject = kind + (f".{group}" if group else "")
    if attributes["name"]:
        subject += f' "{attributes["name"]}"'
    scope = (
        f'in the namespace "{attributes["namespace"]}"'
        if attributes["namespace"]
        else "at the cluster scope"
    )
    details: dict[str, Any] = {}
    if attributes["name"]:
        details["name"] = attributes["name"]
    if group:
        details["group"] = group
    details["kind"] = kind
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'{subject} is forbidden: User "{USER}" cannot {verb} resource '
        f'"{resource}" in API group "{group}" {scope}',
        "reason": "Forbidden",
        "details": details,
        "code": 403,
    }


def access_review(denied: set[Permission], raw: bytes) -> tuple[int, dict[str, Any]]:
    """The answer to a SelfSubjectAccessReview (documented shape, see above)."""
    review = json.loads(raw or b"{}")
    attributes = (review.get("spec") or {}).get("resourceAttributes") or {}
    if not attributes.get("verb") or not attributes.get("resource"):
        return 400, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "spec.resourceAttributes: verb and resource are required",
            "reason": "BadRequest",
            "code": 400,
        }
    allowed = _key(attributes) not in denied
    status: dict[str, Any] = {"allowed": allowed}
    if not allowed:
        status["denied"] = False  # no rule allows it; none denies it explicitly
        status["reason"] = ""
    else:
        status["reason"] = 'RBAC: allowed by ClusterRoleBinding "vpaweb-writer"'
    return 201, {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": review.get("spec") or {},
        "status": status,
    }

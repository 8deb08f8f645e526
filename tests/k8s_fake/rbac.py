"""RBAC for the fake API server's writes, and SelfSubjectAccessReview.

A test denies write permissions (``FakeApiServer.deny``: API group, resource with
its subresource, verb); a write they cover is answered 403 exactly as the real API
server refuses one (tests/fixtures/k8s-wire/rbac/403-15 eviction, 403-16 resize,
403-18 event, 403-23 webhook configuration: the message names the resource, the verb,
the group and the namespace or cluster scope; ``details`` the name, group and kind;
the ``X-Content-Type-Options: nosniff`` header).

A test may instead bind the server to a ClusterRole (``FakeApiServer.bind_role``, e.g.
the shipped deploy/components/actuation/rbac-writer.yaml): a write the role's rules do
not grant is refused the same way, matched as RBAC matches (``resourceNames`` only for
a request naming one of them).

SelfSubjectAccessReview (``POST /apis/authorization.k8s.io/v1/
selfsubjectaccessreviews``) answers from the same denials and role (its
``resourceAttributes.name`` included). k8s-wire holds no
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


def role_allows(rules: list[dict[str, Any]], attributes: dict[str, str]) -> bool:
    """Whether a ClusterRole's ``rules`` grant the request, matched as
    kube-apiserver's RBAC authorizer matches: group, resource[/subresource] and verb
    (``*`` for any), and a rule with ``resourceNames`` only for a request naming one
    of them (so never an unnamed request, such as a create)."""
    group, resource, verb = _key(attributes)
    name = attributes.get("name", "")
    for rule in rules:
        names = rule.get("resourceNames") or []
        if (
            (group in rule.get("apiGroups", ()) or "*" in rule.get("apiGroups", ()))
            and (resource in rule.get("resources", ()) or "*" in rule["resources"])
            and (verb in rule.get("verbs", ()) or "*" in rule["verbs"])
            and (not names or name in names)
        ):
            return True
    return False


def _refused(
    denied: set[Permission], role: list[dict[str, Any]] | None, attrs: dict[str, str]
) -> bool:
    return _key(attrs) in denied or (role is not None and not role_allows(role, attrs))


def forbidden(
    denied: set[Permission],
    method: str,
    path: str,
    role: list[dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The 403 Status body when ``denied`` covers this write (or ``role``, when the
    server is bound to one, does not grant it), else None."""
    attributes = _attributes(method, path)
    if attributes is None or not _refused(denied, role, attributes):
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


def access_review(
    denied: set[Permission], raw: bytes, role: list[dict[str, Any]] | None = None
) -> tuple[int, dict[str, Any]]:
    """The answer to a SelfSubjectAccessReview (documented shape, see above), from
    the denials and, when the server is bound to one, the role's rules."""
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
    allowed = not _refused(denied, role, attributes)
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

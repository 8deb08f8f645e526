"""MutatingWebhookConfigurations in the fake API server: GET, POST, PUT, DELETE.

Behaviour as kube-apiserver v1.36 answered (tests/fixtures/k8s-wire/admission/
mutatingwebhookconfiguration.stored.json and README sections 1 and 6):

- a stored object gets ``uid``, ``resourceVersion``, ``generation`` 1,
  ``creationTimestamp``, and each webhook the server's defaults ``matchPolicy:
  Equivalent``, ``objectSelector: {}``, ``namespaceSelector: {}``, ``reinvocationPolicy:
  Never``, ``timeoutSeconds: 10``, ``rules[].scope: "*"`` where not given;
- POST of an existing name: 409 AlreadyExists; GET/PUT/DELETE of a missing one: 404
  NotFound; PUT with a stale ``resourceVersion``: 409 Conflict; a PUT that changes the
  webhooks bumps ``generation``;
- DELETE answers 200 with a ``Status`` of ``Success``;
- every error is a ``Status`` with ``code`` equal to the HTTP status.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from datetime import UTC, datetime
from typing import Any

GROUP = "admissionregistration.k8s.io"
PLURAL = "mutatingwebhookconfigurations"
PREFIX = f"/apis/{GROUP}/v1/{PLURAL}"


def _status(code: int, reason: str, message: str, name: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if name:
        body["details"] = {"name": name, "group": GROUP, "kind": PLURAL}
    return body


def _with_defaults(webhooks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    result = copy.deepcopy(webhooks)
    for hook in result:
        hook.setdefault("matchPolicy", "Equivalent")
        hook.setdefault("namespaceSelector", {})
        hook.setdefault("objectSelector", {})
        hook.setdefault("reinvocationPolicy", "Never")
        hook.setdefault("timeoutSeconds", 10)
        for rule in hook.get("rules", []):
            rule.setdefault("scope", "*")
    return result


class WebhookConfigurations:
    """The stored configurations, by name (thread-safe)."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self._version = 700
        self._lock = threading.Lock()

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def serve(
        self, method: str, path: str, payload: bytes
    ) -> tuple[int, dict[str, Any]]:
        """Answer one request under PREFIX: (status, JSON body)."""
        name = path[len(PREFIX) :].strip("/")
        with self._lock:
            if method == "GET" and name:
                if name not in self.items:
                    return 404, self._not_found(name)
                return 200, copy.deepcopy(self.items[name])
            if method == "GET":
                return 200, {
                    "kind": "MutatingWebhookConfigurationList",
                    "apiVersion": f"{GROUP}/v1",
                    "metadata": {"resourceVersion": str(self._version)},
                    "items": [copy.deepcopy(o) for o in self.items.values()],
                }
            if method == "POST" and not name:
                return self._create(json.loads(payload))
            if method == "PUT" and name:
                return self._replace(name, json.loads(payload))
            if method == "DELETE" and name:
                if self.items.pop(name, None) is None:
                    return 404, self._not_found(name)
                self._next_version()
                return 200, {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Success",
                    "details": {"name": name, "group": GROUP, "kind": PLURAL},
                }
        return 405, _status(405, "MethodNotAllowed", f"{method} is not supported")

    @staticmethod
    def _not_found(name: str) -> dict[str, Any]:
        return _status(404, "NotFound", f'{PLURAL}.{GROUP} "{name}" not found', name)

    def _create(self, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = obj.get("metadata", {}).get("name", "")
        if name in self.items:
            return 409, _status(
                409, "AlreadyExists", f'{PLURAL}.{GROUP} "{name}" already exists', name
            )
        stored = {
            "kind": "MutatingWebhookConfiguration",
            "apiVersion": f"{GROUP}/v1",
            "metadata": {
                **obj.get("metadata", {}),
                "uid": str(uuid.uuid4()),
                "resourceVersion": self._next_version(),
                "generation": 1,
                "creationTimestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            "webhooks": _with_defaults(obj.get("webhooks", [])),
        }
        self.items[name] = stored
        return 201, copy.deepcopy(stored)

    def _replace(self, name: str, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        current = self.items.get(name)
        if current is None:
            return 404, self._not_found(name)
        version = obj.get("metadata", {}).get("resourceVersion")
        if version and version != current["metadata"]["resourceVersion"]:
            return 409, _status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {PLURAL}.{GROUP} "{name}": the '
                "object has been modified; please apply your changes to the latest "
                "version and try again",
                name,
            )
        webhooks = _with_defaults(obj.get("webhooks", []))
        generation = current["metadata"]["generation"]
        if webhooks != current["webhooks"]:
            generation += 1
        stored = {
            **current,
            "metadata": {
                **obj.get("metadata", {}),
                "uid": current["metadata"]["uid"],
                "creationTimestamp": current["metadata"]["creationTimestamp"],
                "generation": generation,
                "resourceVersion": self._next_version(),
            },
            "webhooks": webhooks,
        }
        self.items[name] = stored
        return 200, copy.deepcopy(stored)

"""Nodes (core/v1, cluster-scoped) as the fake API server serves them, each answer
from a recording in tests/fixtures/k8s-wire/nodes/ (README there):

- the objects: the items of ``11-sa-node-reader-node-list-200.json`` (a list by a
  reader bound to get/list/watch on nodes), stored in full form: ``kind: Node`` and
  ``apiVersion: v1`` put back (lists leave them out; the get in ``12`` has them);
- a list: the server's collection list answers as ``11`` does (``NodeList``,
  ``metadata.resourceVersion``, items without kind and apiVersion), and with
  ``limit`` pages as ``06`` does (``metadata.continue`` and ``remainingItemCount``;
  the token is opaque and the fake's own);
- a list or get by a reader whose role has no ``nodes`` (``FakeApiServer(allowed=)``
  without ``("", "nodes")``): 403 as ``07`` ("cannot list resource "nodes" in API
  group "" at the cluster scope", ``details: {"kind": "nodes"}``);
- ``GET /api/v1/nodes/{name}``: the object as ``12``; a missing one 404 as ``13``;
- any write: 403 as ``14`` (no role vpaweb ships grants a write on nodes).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.k8s_fake.rbac import USER

if TYPE_CHECKING:
    from tests.k8s_fake.server import FakeApiServer

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire" / "nodes"
PREFIX = "/api/v1/nodes/"
VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch"}


def recording(name: str) -> dict[str, Any]:
    """One recorded exchange (request and response) of the nodes directory."""
    data: dict[str, Any] = json.loads((RECORDINGS / name).read_text())
    return data


def recorded_nodes() -> list[dict[str, Any]]:
    """The recorded Node objects, in full form (as the fake server stores objects)."""
    body = recording("11-sa-node-reader-node-list-200.json")["response"]["body"]
    return [
        {"apiVersion": "v1", "kind": "Node", **copy.deepcopy(item)}
        for item in body["items"]
    ]


def _status(code: int, reason: str, message: str, details: dict[str, str]) -> Any:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }


def forbidden(verb: str, name: str = "") -> dict[str, Any]:
    """The 403 of 07 (a list) and 14 (a named node), for this fake's user."""
    subject = f'nodes "{name}"' if name else "nodes"
    details = {"name": name, "kind": "nodes"} if name else {"kind": "nodes"}
    return _status(
        403,
        "Forbidden",
        f'{subject} is forbidden: User "{USER}" cannot {verb} resource "nodes" in '
        'API group "" at the cluster scope',
        details,
    )


def handle(
    server: FakeApiServer, method: str, path: str
) -> tuple[int, dict[str, Any]] | None:
    """The answer to a request on one named node; None for any other path (a list
    of nodes is the server's collection list)."""
    if not path.startswith(PREFIX):
        return None
    name = path[len(PREFIX) :].split("/")[0]
    verb = VERBS.get(method, "delete")
    if method != "GET":
        return 403, forbidden(verb, name)
    if server.allowed is not None and ("", "nodes") not in server.allowed:
        return 403, forbidden("get", name)
    for node in server.objects("Node"):
        if node["metadata"]["name"] == name:
            return 200, copy.deepcopy(node)
    return 404, _status(
        404, "NotFound", f'nodes "{name}" not found', {"name": name, "kind": "nodes"}
    )

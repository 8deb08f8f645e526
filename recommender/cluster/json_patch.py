"""The JSON patch (RFC 6902) operations vpaweb sends, ``test`` and ``replace``, applied
to an object as the API server applies them: for the simulated cluster's writer.

Pure: a document and operations in, the patched copy out; ``PatchFailed`` when a test
does not hold or a path does not exist (the API server's bare 422, k8s-wire hpa/15,
17: nothing is changed)."""

from __future__ import annotations

import copy
from typing import Any


class PatchFailed(ValueError):
    """A ``test`` that did not hold, or a path the document does not have."""


def _parent(document: Any, path: str) -> tuple[Any, str]:
    """The container of ``path``'s last token, and the token (RFC 6901)."""
    if not path.startswith("/"):
        raise PatchFailed(f"path {path!r} does not start with /")
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]
    node = document
    for token in tokens[:-1]:
        node = _child(node, token, path)
    return node, tokens[-1]


def _child(node: Any, token: str, path: str) -> Any:
    if isinstance(node, dict) and token in node:
        return node[token]
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    raise PatchFailed(f"path {path!r} does not exist")


def apply_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """``document`` with ``operations`` applied, all or nothing."""
    patched = copy.deepcopy(document)
    for operation in operations:
        op, path = operation.get("op"), str(operation.get("path", ""))
        parent, token = _parent(patched, path)
        current = _child(parent, token, path)
        if op == "test":
            if current != operation.get("value"):
                raise PatchFailed(f"test of {path} failed")
        elif op == "replace":
            if isinstance(parent, list):
                parent[int(token)] = copy.deepcopy(operation.get("value"))
            else:
                parent[token] = copy.deepcopy(operation.get("value"))
        else:
            raise PatchFailed(f"operation {op!r} is not one vpaweb sends")
    return patched

"""HorizontalPodAutoscaler (autoscaling/v2) reads and patches of the fake API server,
answering as tests/fixtures/k8s-wire/hpa/ recorded (README section 8).

``FakeApiServer`` hands requests on one ``.../horizontalpodautoscalers/<name>`` here
first (lists stay with the server's list code). What is served, with the recorded
file each answer copies:

- ``GET``: 200 with the object, ``kind`` and ``apiVersion`` included (hpa/05); a missing
  one is the API server's NotFound (the shape writes.py copies from eviction/11).
- ``PATCH`` with ``application/json-patch+json``: ``test`` and ``replace`` applied in
  order, all or nothing (hpa/14, 16, 20); a failed ``test`` (or a path the object does
  not have) is 422 ``Invalid`` with ``details: {}``, no causes, never 409 (hpa/15, 17).
- ``PATCH`` with ``application/merge-patch+json``: RFC 7386, so ``spec.metrics`` is
  replaced whole (hpa/12, 13); a stale ``metadata.resourceVersion`` is 409 Conflict
  (hpa/21).
- ``PATCH`` with ``application/strategic-merge-patch+json``: ``metrics`` has no merge
  key, so the list is replaced whole too (hpa/18, 19).
- Every patch is validated as hpa/22-26 show: an ``averageUtilization`` below 1 is 422
  naming the field (hpa/22, 23); an ``averageValue`` of "0" is 422 "must be positive"
  (hpa/24); 1 and 250 are accepted (hpa/25, 26). A patch that took bumps
  ``metadata.resourceVersion`` and answers 200 with the whole object; HPAs have no
  ``metadata.generation`` (README §8 fact 2).
- RBAC (hpa/27, 28: 403 when ``patch`` on ``horizontalpodautoscalers`` is denied) is
  the server's ``rbac.py``, whose message and details match those files.

``answer_next_patch`` makes the next PATCH of an HPA answer a recorded failure as it is
(status and body), for the answers a JSON patch of vpaweb's cannot provoke against
this server: the 409 of hpa/21 (a conflict from any layer reads the same).
"""

from __future__ import annotations

import copy
import json
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.k8s_fake.writes import Answer, failure, merge_patch

if TYPE_CHECKING:
    from tests.k8s_fake.server import FakeApiServer

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire" / "hpa"
JSON_PATCH = "application/json-patch+json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
# hpa/15, 17: the whole message of a failed test.
TEST_FAILED = "the server rejected our request due to an error in our request"
_REPLAYS: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()


def answer_next_patch(server: FakeApiServer, recording: str) -> None:
    """Answer the next PATCH of an HPA with the recorded response of
    ``tests/fixtures/k8s-wire/hpa/<recording>`` (status and body)."""
    assert (RECORDINGS / recording).exists(), recording
    _REPLAYS.setdefault(server, []).append(recording)


def _path(path: str) -> tuple[str, str] | None:
    """(namespace, name) of ``/apis/autoscaling/v2/namespaces/<ns>/
    horizontalpodautoscalers/<name>``, else None."""
    segments = [s for s in path.split("/") if s]
    if (
        len(segments) == 7
        and segments[:3] == ["apis", "autoscaling", "v2"]
        and segments[3] == "namespaces"
        and segments[5] == "horizontalpodautoscalers"
    ):
        return segments[4], segments[6]
    return None


def _find(server: FakeApiServer, namespace: str, name: str) -> Any:
    for obj in server.objects("HorizontalPodAutoscaler"):
        meta = obj["metadata"]
        if meta.get("namespace") == namespace and meta["name"] == name:
            return obj
    return None


def _not_found(name: str) -> Answer:
    return (
        404,
        failure(
            404,
            "NotFound",
            f'horizontalpodautoscalers.autoscaling "{name}" not found',
            {"name": name, "group": "autoscaling", "kind": "horizontalpodautoscalers"},
        ),
        {},
    )


def _test_failed() -> Answer:
    return 422, failure(422, "Invalid", TEST_FAILED, {}), {}


class _Failed(Exception):
    pass


def _tokens(path: str) -> list[str]:
    if not path.startswith("/"):
        raise _Failed(path)
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _step(node: Any, token: str) -> Any:
    if isinstance(node, dict) and token in node:
        return node[token]
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    raise _Failed(token)


def _json_patch(obj: dict[str, Any], operations: Any) -> dict[str, Any]:
    """RFC 6902 ``test`` and ``replace`` (what hpa/14-17, 20, 22 send)."""
    patched = copy.deepcopy(obj)
    if not isinstance(operations, list):
        raise _Failed("not a list")
    for operation in operations:
        tokens = _tokens(str(operation.get("path", "")))
        parent = patched
        for token in tokens[:-1]:
            parent = _step(parent, token)
        current = _step(parent, tokens[-1])
        if operation.get("op") == "test":
            if current != operation.get("value"):
                raise _Failed("test")
        elif operation.get("op") == "replace":
            key: Any = int(tokens[-1]) if isinstance(parent, list) else tokens[-1]
            parent[key] = copy.deepcopy(operation.get("value"))
        else:
            raise _Failed(str(operation.get("op")))
    return patched


def _invalid(name: str, patched: dict[str, Any]) -> Answer | None:
    """hpa/22-24: a target the API server refuses, with the field it names."""
    for index, metric in enumerate((patched.get("spec") or {}).get("metrics") or ()):
        key = "resource" if metric.get("type") == "Resource" else "containerResource"
        target = (metric.get(key) or {}).get("target") or {}
        field = f"spec.metrics[{index}].{key}.target"
        utilization = target.get("averageUtilization")
        if utilization is not None and utilization < 1:
            cause = f"Invalid value: {utilization}: must be greater than 0"
            field += ".averageUtilization"
        elif str(target.get("averageValue", "1")).strip() in ("0", "0m"):
            cause = f'Invalid value: "{target["averageValue"]}": must be positive'
            field += ".averageValue"
        else:
            continue
        message = f'HorizontalPodAutoscaler.autoscaling "{name}" is invalid: {field}: '
        details = {
            "name": name,
            "group": "autoscaling",
            "kind": "HorizontalPodAutoscaler",
            "causes": [
                {"reason": "FieldValueInvalid", "message": cause, "field": field}
            ],
        }
        return 422, failure(422, "Invalid", message + cause, details), {}
    return None


def handle(
    server: FakeApiServer, method: str, path: str, raw: bytes, content_type: str
) -> Answer | None:
    """The answer to a single-HPA request (None: not one this module serves)."""
    found = _path(path)
    if found is None or method not in ("GET", "PATCH"):
        return None
    namespace, name = found
    obj = _find(server, namespace, name)
    if method == "GET":
        return (200, obj, {}) if obj is not None else _not_found(name)
    replays = _REPLAYS.get(server)
    if replays:
        recorded = json.loads((RECORDINGS / replays.pop(0)).read_text())["response"]
        return int(recorded["status"]), recorded["body"], {}
    if obj is None:
        return _not_found(name)
    try:
        body = json.loads(raw) if raw else None
    except ValueError as exc:
        return 400, failure(400, "BadRequest", f"invalid JSON: {exc}"), {}
    kind = content_type.split(";")[0].strip()
    if kind == JSON_PATCH:
        try:
            patched = _json_patch(obj, body)
        except (_Failed, ValueError, TypeError):
            return _test_failed()
    elif kind in (MERGE, STRATEGIC) and isinstance(body, dict):
        stale = (body.get("metadata") or {}).get("resourceVersion")
        if stale is not None and stale != obj["metadata"].get("resourceVersion"):
            message = (
                "Operation cannot be fulfilled on horizontalpodautoscalers.autoscaling "
                f'"{name}": the object has been modified; please apply your changes '
                "to the latest version and try again"
            )
            details = {
                "name": name,
                "group": "autoscaling",
                "kind": "horizontalpodautoscalers",
            }
            return 409, failure(409, "Conflict", message, details), {}
        # Both replace the metrics list whole (hpa/12, 18): no merge key.
        patched = merge_patch(obj, body)
    else:
        return 415, failure(415, "UnsupportedMediaType", kind), {}
    refused = _invalid(name, patched)
    if refused is not None:
        return refused
    with server.lock:
        obj.clear()
        obj.update(patched)
        server.resource_version += 1
        obj["metadata"]["resourceVersion"] = str(server.resource_version)
    return 200, copy.deepcopy(obj), {}

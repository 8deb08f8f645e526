"""The write verbs of the fake API server, answering as tests/fixtures/k8s-wire
recorded.

``FakeApiServer`` hands every non-GET request (and GETs of single Leases and Pods) to
``handle``. What is served, with the recorded file each answer copies:

- ``POST pods/<name>/eviction`` (policy/v1 Eviction): 201 with a ``Status`` body
  (eviction/05); 404 for a missing pod (eviction/11); 400 when the body names another
  pod (eviction/12); Pending and terminating pods are evicted without a PDB check
  (eviction/10, 16; a Pending pod is deleted at once, 17); one PDB whose status has no
  ``observedGeneration`` gives 429 with ``Retry-After: 10`` (eviction/26); one with
  ``disruptionsAllowed`` 0 gives 429 with the ``DisruptionBudget`` cause and no
  Retry-After (eviction/08); two PDBs give 500 without a reason (eviction/20); dry runs
  check the PDB and change nothing (eviction/02, 03, 09). A successful eviction sets
  ``deletionTimestamp`` (+30 s), adds the ``DisruptionTarget`` condition and updates
  the PDB's status (eviction/06, 07).
- ``PATCH pods/<name>/resize`` (strategic merge or JSON patch): 422 when the running
  containers' statuses carry no ``resources`` (resize/no-status-resources/01), when a
  limit or request would be removed (resize/14, 25) or the QoS class would change
  (resize/07); 403 with a ``NodeCapacity`` cause and no ``X-Content-Type-Options``
  when the pod would request more than its (stored) node's allocatable
  (kubelet/06); otherwise 200 with the whole pod, only resources copied (an image
  change is dropped, resize/13) and ``metadata.generation`` bumped (resize/02, 04).
- ``PATCH pods/<name>``: annotations merged (resize/20); a resources change is 422
  (resize/06).
- ``POST events`` (core/v1): 201 with the stored Event (events/01); 422 when
  ``involvedObject.namespace`` differs (events/06).
- Leases (coordination.k8s.io/v1): POST 201 or 409 AlreadyExists (lease/01, 02); GET;
  PUT 200, 409 Conflict when stale (lease/05), 422 without resourceVersion (lease/08),
  400 for a MicroTime without six fractional digits (lease/09; ``+00:00`` normalised to
  ``Z``, lease/10).
- ``PATCH verticalpodautoscalers/<name>/status`` (merge patch, RFC 7386: maps merge,
  ``null`` removes a key, lists are replaced; only ``status`` is taken): 200 with the
  whole object (admission/f4).
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from tests.k8s_fake.limit_ranger import quantity

if TYPE_CHECKING:
    from tests.k8s_fake.server import FakeApiServer

Answer = tuple[int, dict[str, Any], dict[str, str]]

MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
LEASES = ("coordination.k8s.io", "v1", "leases")


def _now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def failure(
    code: int,
    reason: str | None,
    message: str,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Status body as the API server sends it (``reason`` None: left out)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason is not None:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def _find(server: FakeApiServer, kind: str, namespace: str, name: str) -> Any:
    for obj in server.objects(kind):
        meta = obj["metadata"]
        if meta.get("namespace") == namespace and meta["name"] == name:
            return obj
    return None


def _bump(server: FakeApiServer, obj: dict[str, Any]) -> None:
    server.resource_version += 1
    obj["metadata"]["resourceVersion"] = str(server.resource_version)


def handle(
    server: FakeApiServer,
    method: str,
    path: str,
    query: dict[str, list[str]],
    raw: bytes,
) -> Answer | None:
    """The answer to a write (None: not a path this module serves)."""
    segments = [s for s in path.split("/") if s]
    try:
        body = json.loads(raw) if raw else {}
    except ValueError as exc:
        return 400, failure(400, "BadRequest", f"invalid JSON: {exc}"), {}
    if segments[:3] == ["api", "v1", "namespaces"] and len(segments) >= 5:
        namespace, resource, rest = segments[3], segments[4], segments[5:]
        subresource = rest[1] if resource == "pods" and len(rest) == 2 else ""
        if subresource == "eviction" and method == "POST":
            return _evict(server, namespace, rest[0], body, query)
        if subresource == "resize" and method == "PATCH":
            return _resize(server, namespace, rest[0], body)
        if resource == "pods" and len(rest) == 1 and method == "PATCH":
            return _patch_pod(server, namespace, rest[0], body)
        if resource == "pods" and len(rest) == 1 and method == "GET":
            pod = _find(server, "Pod", namespace, rest[0])
            if pod is None:
                return _not_found("pods", rest[0])
            return 200, pod, {}
        if resource == "events" and not rest and method == "POST":
            return _create_event(server, namespace, body)
    if (
        len(segments) >= 6
        and tuple(segments[1:3]) == LEASES[:2]
        and segments[3] == "namespaces"
        and segments[5] == "leases"
    ):
        return _lease(server, method, segments[4], segments[6:], body)
    if (
        len(segments) == 8
        and segments[1:3] == ["autoscaling.k8s.io", "v1"]
        and segments[5] == "verticalpodautoscalers"
        and segments[7] == "status"
        and method == "PATCH"
    ):
        vpa = _find(server, "VerticalPodAutoscaler", segments[4], segments[6])
        if vpa is None:
            return _not_found("verticalpodautoscalers.autoscaling.k8s.io", segments[6])
        with server.lock:
            # The status subresource takes only the status of the patch (RFC 7386).
            patched = merge_patch(vpa.get("status") or {}, body.get("status") or {})
            vpa["status"] = patched
            _bump(server, vpa)
        return 200, vpa, {}
    return None


def merge_patch(target: Any, patch: Any) -> Any:
    """A JSON merge patch (RFC 7386): maps merge, ``null`` removes, the rest replaces
    (a list is replaced whole)."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _not_found(kind: str, name: str) -> Answer:
    plural = kind.split(".")[0]
    return (
        404,
        failure(
            404,
            "NotFound",
            f'{kind} "{name}" not found',
            {"name": name, "kind": plural},
        ),
        {},
    )


# --- evictions ------------------------------------------------------------------------
def _pdbs_of(server: FakeApiServer, pod: dict[str, Any]) -> list[dict[str, Any]]:
    labels = pod["metadata"].get("labels") or {}
    found = []
    for pdb in server.objects("PodDisruptionBudget"):
        if pdb["metadata"].get("namespace") != pod["metadata"].get("namespace"):
            continue
        wanted = ((pdb.get("spec") or {}).get("selector") or {}).get(
            "matchLabels"
        ) or {}
        if wanted and all(labels.get(k) == v for k, v in wanted.items()):
            found.append(pdb)
    return found


def _evict(
    server: FakeApiServer,
    namespace: str,
    name: str,
    body: dict[str, Any],
    query: dict[str, list[str]],
) -> Answer:
    named = (body.get("metadata") or {}).get("name")
    pod = _find(server, "Pod", namespace, name)
    if pod is None:
        return _not_found("pods", name)
    if named and named != name:
        return (
            400,
            failure(
                400, "BadRequest", "name in URL does not match name in Eviction object"
            ),
            {},
        )
    dry_run = "All" in query.get("dryRun", []) or "All" in (
        (body.get("deleteOptions") or {}).get("dryRun") or []
    )
    success = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    meta = pod["metadata"]
    if meta.get("deletionTimestamp"):
        return 201, success, {}
    if (pod.get("status") or {}).get("phase") == "Pending":
        if not dry_run:
            server.remove("Pod", namespace, name)
        return 201, success, {}
    pdbs = _pdbs_of(server, pod)
    if len(pdbs) > 1:
        message = (
            "This pod has more than one PodDisruptionBudget, which the eviction "
            "subresource does not support."
        )
        return 500, failure(500, None, message), {}
    refusal = "Cannot evict pod as it would violate the pod's disruption budget."
    pdb = pdbs[0] if pdbs else None
    if pdb is not None:
        status = pdb.setdefault("status", {})
        pdb_name = pdb["metadata"]["name"]
        if "observedGeneration" not in status:
            cause = {
                "reason": "DisruptionBudget",
                "message": f"The disruption budget {pdb_name} is still being "
                "processed by the server.",
            }
            return (
                429,
                failure(
                    429,
                    "TooManyRequests",
                    refusal,
                    {"causes": [cause], "retryAfterSeconds": 10},
                ),
                {"Retry-After": "10"},
            )
        if int(status.get("disruptionsAllowed") or 0) <= 0:
            cause = {
                "reason": "DisruptionBudget",
                "message": f"The disruption budget {pdb_name} needs "
                f"{status.get('desiredHealthy', 0)} healthy pods and has "
                f"{status.get('currentHealthy', 0)} currently",
            }
            return (
                429,
                failure(429, "TooManyRequests", refusal, {"causes": [cause]}),
                {},
            )
    if dry_run:
        return 201, success, {}
    now = datetime.now(UTC)
    with server.lock:
        if pdb is not None:
            status = pdb["status"]
            status["disruptionsAllowed"] = int(status["disruptionsAllowed"]) - 1
            status["currentHealthy"] = int(status.get("currentHealthy") or 0) - 1
            status.setdefault("disruptedPods", {})[name] = now.strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            )
            _bump(server, pdb)
        meta["deletionTimestamp"] = (now + timedelta(seconds=30)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        meta["deletionGracePeriodSeconds"] = 30
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
            }
        )
        _bump(server, pod)
    server.evicted.append((namespace, name))
    return 201, success, {}


# --- resizes --------------------------------------------------------------------------
def _qos(containers: list[dict[str, Any]]) -> str:
    requests_any = limits_all = False
    guaranteed = True
    for container in containers:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        limits = resources.get("limits") or {}
        requests_any = requests_any or bool(requests) or bool(limits)
        for resource in ("cpu", "memory"):
            if (
                resource not in limits
                or requests.get(resource, limits.get(resource)) != limits[resource]
            ):
                guaranteed = False
        limits_all = limits_all or bool(limits)
    if not requests_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _invalid_pod(name: str, causes: list[tuple[str, str, str]]) -> Answer:
    """422 Invalid naming each (reason, message, field) cause, joined as the server
    joins them."""
    if len(causes) == 1:
        text = f"{causes[0][2]}: {causes[0][1]}"
    else:
        text = "[" + ", ".join(f"{f}: {m}" for _, m, f in causes) + "]"
    return (
        422,
        failure(
            422,
            "Invalid",
            f'Pod "{name}" is invalid: {text}',
            {
                "name": name,
                "kind": "Pod",
                "causes": [
                    {"reason": r, "message": m, "field": f} for r, m, f in causes
                ],
            },
        ),
        {},
    )


def _resize(server: FakeApiServer, namespace: str, name: str, body: Any) -> Answer:
    pod = _find(server, "Pod", namespace, name)
    if pod is None:
        return _not_found("pods", name)
    spec_containers = pod["spec"]["containers"]
    new = json.loads(json.dumps(spec_containers))
    if isinstance(body, list):  # JSON patch: replace/add on resources paths only
        for op in body:
            parts = op.get("path", "").strip("/").split("/")
            if parts[:2] != ["spec", "containers"] or len(parts) < 5:
                continue
            target = new[int(parts[2])]
            node = target
            for key in parts[3:-1]:
                node = node.setdefault(key, {})
            node[parts[-1]] = op.get("value")
    else:
        for patch in (body.get("spec") or {}).get("containers") or []:
            for container in new:
                if container["name"] == patch.get("name"):
                    resources = container.setdefault("resources", {})
                    for kind in ("requests", "limits"):
                        for resource, value in (
                            (patch.get("resources") or {}).get(kind) or {}
                        ).items():
                            if value is None:
                                resources.get(kind, {}).pop(resource, None)
                            else:
                                resources.setdefault(kind, {})[resource] = value
    causes: list[tuple[str, str, str]] = []
    for i, (old, changed) in enumerate(zip(spec_containers, new, strict=True)):
        for kind in ("requests", "limits"):
            before = (old.get("resources") or {}).get(kind) or {}
            after = (changed.get("resources") or {}).get(kind) or {}
            if any(r not in after for r in before):
                causes.append(
                    (
                        "FieldValueForbidden",
                        f"Forbidden: resource {kind} cannot be removed",
                        f"spec.containers[{i}].resources.{kind}",
                    )
                )
    before_qos = _qos(spec_containers)
    if _qos(new) != before_qos:
        causes.append(
            (
                "FieldValueInvalid",
                f'Invalid value: "{before_qos}": Pod QOS Class may not change as a '
                "result of resizing",
                "spec",
            )
        )
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    running = [s for s in statuses if "running" in (s.get("state") or {})]
    if running and "resources" not in running[0]:
        causes.append(
            (
                "FieldValueForbidden",
                "Forbidden: Pod running on node without support for resize",
                "spec",
            )
        )
    if causes:
        return _invalid_pod(name, causes)
    too_big = _beyond_node(server, pod, new)
    if too_big is not None:
        return too_big
    with server.lock:
        for container, changed in zip(spec_containers, new, strict=True):
            # Only resources are taken from the patch: an image change is dropped.
            container["resources"] = changed.get("resources") or {}
        meta = pod["metadata"]
        meta["generation"] = int(meta.get("generation") or 1) + 1
        _bump(server, pod)
    server.resized.append((namespace, name))
    return 200, pod, {}


def _beyond_node(
    server: FakeApiServer, pod: dict[str, Any], containers: list[dict[str, Any]]
) -> Answer | None:
    """403 as kubelet/06 when the resized pod requests more than its node's
    allocatable (a stored Node only): a ``NodeCapacity`` cause, no
    ``X-Content-Type-Options`` (an admission refusal, not RBAC's)."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    node = next(
        (n for n in server.objects("Node") if n["metadata"]["name"] == node_name), None
    )
    if node is None:
        return None
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    for resource in ("cpu", "memory"):
        if resource not in allocatable:
            continue
        requested = sum(
            quantity(((c.get("resources") or {}).get("requests") or {}).get(resource))
            for c in containers
            if ((c.get("resources") or {}).get("requests") or {}).get(resource)
        )
        limit = quantity(allocatable[resource])
        if requested <= limit:
            continue
        # cpu in millicores, memory in bytes, as the recorded message counts them.
        scale = 1000 if resource == "cpu" else 1
        name = pod["metadata"]["name"]
        return (
            403,
            failure(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: node didn\'t have enough allocatable '
                f"resources: {resource}, requested: {int(requested * scale)}, "
                f"allocatable: {int(limit * scale)}",
                {"name": name, "kind": "pods", "causes": [{"reason": "NodeCapacity"}]},
            ),
            {},
        )
    return None


def _patch_pod(
    server: FakeApiServer, namespace: str, name: str, body: dict[str, Any]
) -> Answer:
    pod = _find(server, "Pod", namespace, name)
    if pod is None:
        return _not_found("pods", name)
    if (body.get("spec") or {}).get("containers"):
        message = (
            f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change '
            "fields other than `spec.containers[*].image`, ..."
        )
        return (
            422,
            failure(
                422,
                "Invalid",
                message,
                {
                    "name": name,
                    "kind": "Pod",
                    "causes": [
                        {
                            "reason": "FieldValueForbidden",
                            "message": "Forbidden: pod updates may not change "
                            "fields other than ...",
                            "field": "spec",
                        }
                    ],
                },
            ),
            {},
        )
    with server.lock:
        annotations = pod["metadata"].setdefault("annotations", {})
        for key, value in (
            (body.get("metadata") or {}).get("annotations") or {}
        ).items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        _bump(server, pod)
    return 200, pod, {}


# --- events ---------------------------------------------------------------------------
def _create_event(
    server: FakeApiServer, namespace: str, body: dict[str, Any]
) -> Answer:
    involved = body.get("involvedObject") or {}
    meta = dict(body.get("metadata") or {})
    if involved.get("namespace") and involved["namespace"] != namespace:
        message = (
            f'Event "{meta.get("name", "")}" is invalid: involvedObject.namespace: '
            f'Invalid value: "{involved["namespace"]}": does not match event.namespace'
        )
        return (
            422,
            failure(
                422,
                "Invalid",
                message,
                {
                    "name": meta.get("name", ""),
                    "kind": "Event",
                    "causes": [
                        {
                            "reason": "FieldValueInvalid",
                            "message": f'Invalid value: "{involved["namespace"]}": '
                            "does not match event.namespace",
                            "field": "involvedObject.namespace",
                        }
                    ],
                },
            ),
            {},
        )
    if not meta.get("name"):
        meta["name"] = meta.get("generateName", "event.") + uuid.uuid4().hex[:5]
    meta.pop("generateName", None)
    meta.update(
        namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=_now_text()
    )
    stored = {"kind": "Event", "apiVersion": "v1", **body, "metadata": meta}
    with server.lock:
        _bump(server, stored)
    server.add(stored)
    return 201, stored, {}


# --- leases ---------------------------------------------------------------------------
def _lease_details(name: str) -> dict[str, Any]:
    return {"name": name, "group": "coordination.k8s.io", "kind": "leases"}


def _bad_time(spec: dict[str, Any]) -> str | None:
    for key in ("acquireTime", "renewTime"):
        value = spec.get(key)
        if value is not None and not MICRO_TIME.match(str(value)):
            text = str(value)
            tail = text[19:] or text
            return (
                'Lease in version "v1" cannot be handled as a Lease: parsing time '
                f'"{text}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse '
                f'"{tail}" as ".000000"'
            )
    return None


def _normalise_times(spec: dict[str, Any]) -> None:
    for key in ("acquireTime", "renewTime"):
        value = spec.get(key)
        if isinstance(value, str) and value.endswith("+00:00"):
            spec[key] = value[: -len("+00:00")] + "Z"


def _lease(
    server: FakeApiServer,
    method: str,
    namespace: str,
    rest: list[str],
    body: dict[str, Any],
) -> Answer:
    if method == "POST" and not rest:
        name = (body.get("metadata") or {}).get("name", "")
        if _find(server, "Lease", namespace, name) is not None:
            return (
                409,
                failure(
                    409,
                    "AlreadyExists",
                    f'leases.coordination.k8s.io "{name}" already exists',
                    _lease_details(name),
                ),
                {},
            )
        spec = dict(body.get("spec") or {})
        problem = _bad_time(spec)
        if problem:
            return 400, failure(400, "BadRequest", problem), {}
        _normalise_times(spec)
        stored = {
            "kind": "Lease",
            "apiVersion": "coordination.k8s.io/v1",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": str(uuid.uuid4()),
                "resourceVersion": "",
                "creationTimestamp": _now_text(),
            },
            "spec": spec,
        }
        with server.lock:
            _bump(server, stored)
        server.add(stored)
        return 201, stored, {}
    if len(rest) != 1:
        return None  # type: ignore[return-value]
    name = rest[0]
    lease = _find(server, "Lease", namespace, name)
    if lease is None:
        return _not_found("leases.coordination.k8s.io", name)
    if method == "GET":
        return 200, lease, {}
    if method == "PUT":
        version = (body.get("metadata") or {}).get("resourceVersion")
        if not version:
            message = "Invalid value: 0: must be specified for an update"
            return (
                422,
                failure(
                    422,
                    "Invalid",
                    f'leases.coordination.k8s.io "{name}" is invalid: '
                    f"metadata.resourceVersion: {message}",
                    {
                        **_lease_details(name),
                        "causes": [
                            {
                                "reason": "FieldValueInvalid",
                                "message": message,
                                "field": "metadata.resourceVersion",
                            }
                        ],
                    },
                ),
                {},
            )
        spec = dict(body.get("spec") or {})
        problem = _bad_time(spec)
        if problem:
            return 400, failure(400, "BadRequest", problem), {}
        if version != lease["metadata"]["resourceVersion"]:
            return (
                409,
                failure(
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled on leases.coordination.k8s.io "
                    f'"{name}": the object has been modified; please apply your '
                    "changes to the latest version and try again",
                    _lease_details(name),
                ),
                {},
            )
        _normalise_times(spec)
        with server.lock:
            lease["spec"] = spec
            _bump(server, lease)
        return 200, lease, {}
    return None  # type: ignore[return-value]

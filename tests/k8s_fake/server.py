"""A local fake Kubernetes API server: the read subset vpaweb's adapter uses, over real
HTTP.

``FakeApiServer`` runs ``http.server`` in a thread on 127.0.0.1 (a free port) and
answers as a real API server would:

- ``GET /version``;
- collection lists of core (``/api/v1/...``) and group (``/apis/<group>/<version>/...``)
  resources, across namespaces or in one namespace, with ``limit``/``continue``
  pagination (opaque base64 tokens bound to the list's resourceVersion,
  ``remainingItemCount``), ``fieldSelector`` (``a.b=c``, ``a.b!=c``) and
  ``labelSelector`` (the whole grammar: ``k=v``, ``k!=v``, ``k in (a,b)``,
  ``k notin (a,b)``, ``k``, ``!k``; 400 for one that does not parse) filtering;
  cluster-scoped lists (``/api/v1/namespaces``); items of built-in types come without
  ``apiVersion``/``kind``, custom resources with them;
- ``Status`` bodies for errors: 401 without the bearer token, 404 for an unknown path or
  an API that is switched off (``unserve``), 405 for any other write;
- Nodes (``nodes.py``, from tests/fixtures/k8s-wire/nodes: a test adds
  ``nodes.recorded_nodes()``): lists as the collections above, one node by name, 404
  and 403 as recorded;
- the writes vpaweb's updater makes (evictions, resizes, pod annotations, Events,
  Leases, VPA status), answered as the recordings in tests/fixtures/k8s-wire: see
  ``writes.py``;
- HorizontalPodAutoscaler reads and patches (coordinated HPA mode), answered as
  k8s-wire hpa/ recorded: see ``hpa.py``;
- write RBAC (``deny``) and SelfSubjectAccessReview answered from it: see ``rbac.py``;
- injected faults (``fail``): a status (429/500/403/410…) with an optional
  ``Retry-After``, or a delay longer than the client's read timeout, for the next N
  matching requests; writes held (``hold_writes``) until released, so a writer can be
  killed while its request is in flight.

Every request is recorded (method, path, query), so tests can prove no write verb is
sent.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.k8s_fake import hpa, limit_ranger, nodes, rbac, writes
from tests.k8s_fake.webhooks import WebhookConfigurations

FIXTURES = Path(__file__).parent / "fixtures"
# lastTransitionTime of the conditions the fake kubelet writes.
STARTED_TEXT = "2026-11-20T08:00:00Z"
TOKEN = "fake-token-for-tests-only"

# kind -> (group, version, plural, namespaced, built-in)
KINDS: dict[str, tuple[str, str, str, bool, bool]] = {
    "Pod": ("", "v1", "pods", True, True),
    "Event": ("", "v1", "events", True, True),
    "LimitRange": ("", "v1", "limitranges", True, True),
    "ReplicationController": ("", "v1", "replicationcontrollers", True, True),
    "Namespace": ("", "v1", "namespaces", False, True),
    "Node": ("", "v1", "nodes", False, True),
    "Deployment": ("apps", "v1", "deployments", True, True),
    "StatefulSet": ("apps", "v1", "statefulsets", True, True),
    "DaemonSet": ("apps", "v1", "daemonsets", True, True),
    "ReplicaSet": ("apps", "v1", "replicasets", True, True),
    "Job": ("batch", "v1", "jobs", True, True),
    "CronJob": ("batch", "v1", "cronjobs", True, True),
    "HorizontalPodAutoscaler": (
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        True,
        True,
    ),
    "PodDisruptionBudget": ("policy", "v1", "poddisruptionbudgets", True, True),
    "VerticalPodAutoscaler": (
        "autoscaling.k8s.io",
        "v1",
        "verticalpodautoscalers",
        True,
        False,
    ),
    "PodMetrics": ("metrics.k8s.io", "v1beta1", "pods", True, False),
    "Lease": ("coordination.k8s.io", "v1", "leases", True, True),
}
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")

# ``GET /version`` as kube-apiserver v1.36.2 answered it (k8s-wire version.json).
RECORDED_VERSION: dict[str, str] = json.loads(
    (
        Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire" / "version.json"
    ).read_text()
)["response"]["body"]


def version_body(git_version: str) -> dict[str, str]:
    """The recorded ``/version`` body, saying ``git_version`` (e.g. ``v1.34.3``)."""
    major, minor = git_version.lstrip("v").split(".")[:2]
    return {
        **RECORDED_VERSION,
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "gitVersion": git_version,
    }


# Served with writes by ``tests/k8s_fake/webhooks.py`` (the webhook's registration).
WEBHOOK_CONFIGURATIONS = (
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
)


def load_fixtures(*names: str) -> list[dict[str, Any]]:
    """Objects from ``fixtures/<name>.json`` (all files when no name is given)."""
    paths = [FIXTURES / f"{name}.json" for name in names] or sorted(
        FIXTURES.glob("*.json")
    )
    objects: list[dict[str, Any]] = []
    for path in paths:
        objects.extend(json.loads(path.read_text()))
    return objects


@dataclass
class Request:
    """One request as the server saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str
    body: bytes = b""
    content_type: str = ""


@dataclass
class Fault:
    """An injected answer for the next ``times`` GETs whose path contains ``path``."""

    path: str
    status: int = 500
    times: int = 1
    retry_after: str | None = None
    delay_s: float = 0.0
    message: str = ""
    # Only for requests that carry a continue token (a later page of a list).
    on_continue: bool = False
    # Answer 200 with this body instead (a proxy's HTML page, a truncated answer).
    raw_body: bytes | None = None


@dataclass
class _Collection:
    group: str
    version: str
    plural: str
    kind: str
    built_in: bool
    items: list[dict[str, Any]] = field(default_factory=list)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _dig(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _field_matches(obj: dict[str, Any], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if str(_dig(obj, key) or "") == value:
                return False
        else:
            key, value = term.split("=", 1)
            if str(_dig(obj, key.rstrip("=")) or "") != value.lstrip("="):
                return False
    return True


class _BadSelector(ValueError):
    """A labelSelector the API server cannot parse (answered 400)."""


_SELECTOR_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_SELECTOR_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _selector_terms(selector: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for i, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [t.strip() for t in terms]


def _check(key: str, values: list[str]) -> None:
    if not _SELECTOR_KEY.match(key):
        raise _BadSelector(f"unable to parse requirement: invalid label key {key!r}")
    for value in values:
        if not _SELECTOR_VALUE.match(value):
            raise _BadSelector(
                f"unable to parse requirement: invalid label value {value!r}"
            )


def _label_matches(obj: dict[str, Any], selector: str) -> bool:
    """Kubernetes' label selector grammar (labels.Parse): ``k=v``, ``k==v``,
    ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``; comma = and. A
    selector that does not parse raises ``_BadSelector``. (Not from a recording:
    tests/fixtures/k8s-wire has no namespace list; the grammar is the documented
    one.)"""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not selector.strip():
        return True
    result = True
    for term in _selector_terms(selector):
        found = re.match(r"^(\S+)\s+(in|notin)\s*\(([^()]*)\)$", term)
        if found:
            key, operator = found[1], found[2]
            values = [v.strip() for v in found[3].split(",")]
            _check(key, values)
            has = key in labels and labels[key] in values
            result &= has if operator == "in" else not has
            continue
        found = re.match(r"^([^=!\s]+)\s*(==|!=|=)\s*([^=!\s]*)$", term)
        if found:
            key, operator, value = found[1], found[2], found[3]
            _check(key, [value])
            equal = labels.get(key) == value
            result &= equal if operator != "!=" else not equal
            continue
        if term.startswith("!") and " " not in term:
            _check(term[1:], [])
            result &= term[1:] not in labels
            continue
        if term and " " not in term:
            _check(term, [])
            result &= term in labels
            continue
        raise _BadSelector(f"unable to parse requirement: {term!r}")
    return result


class FakeApiServer:
    """A thread serving fixture objects the way kube-apiserver lists them."""

    def __init__(
        self,
        objects: Iterable[dict[str, Any]] = (),
        *,
        token: str = TOKEN,
        allowed: set[tuple[str, str]] | None = None,
    ) -> None:
        self.token = token
        # RBAC: the (API group, resource) pairs the token may list; None allows all.
        self.allowed = allowed
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        # Writes whose path contains the key wait until its event is set.
        self.held_writes: dict[str, threading.Event] = {}
        self.unserved: set[str] = set()
        # Write permissions refused (rbac.py): (group, resource[/sub], verb).
        self.denied: set[rbac.Permission] = set()
        self.role: list[dict[str, Any]] | None = None  # bind_role
        self.resource_version = 900000
        # What ``GET /version`` says (k8s-wire version.json: v1.36.2).
        self.git_version = RECORDED_VERSION["gitVersion"]
        # Pods evicted and resized through the write verbs (tests/k8s_fake/writes.py).
        self.evicted: list[tuple[str, str]] = []
        self.resized: list[tuple[str, str]] = []
        self._collections: dict[tuple[str, str, str], _Collection] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        for kind, (group, version, plural, _, built_in) in KINDS.items():
            self._collections[(group, version, plural)] = _Collection(
                group, version, plural, kind, built_in
            )
        for obj in objects:
            self.add(obj)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.webhook_configurations = WebhookConfigurations()

    @property
    def lock(self) -> threading.Lock:
        """Held while a write changes stored objects."""
        return self._lock

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """The stored objects of ``kind`` (live: writes change them in place)."""
        group, version, plural, _, _ = KINDS[kind]
        with self._lock:
            return list(self._collections[(group, version, plural)].items)

    # --- set-up -----------------------------------------------------------------------
    def add(self, obj: dict[str, Any]) -> None:
        """Store an object (full form, with apiVersion and kind) as kube-apiserver
        would: a LimitRange defaulted, a pod defaulted and admitted by LimitRanger
        against its namespace's LimitRanges stored so far (``limit_ranger.py``)."""
        group, version, plural, _, _ = KINDS[obj["kind"]]
        if obj["kind"] == "LimitRange":
            obj = limit_ranger.default_limit_range(obj)
        elif obj["kind"] == "Pod":
            namespace = obj["metadata"].get("namespace")
            obj = limit_ranger.admit_pod(
                obj,
                [
                    r
                    for r in self._collections[("", "v1", "limitranges")].items
                    if r["metadata"].get("namespace") == namespace
                ],
            )
        with self._lock:
            self._collections[(group, version, plural)].items.append(obj)
            self.resource_version += 1
            # Created objects get one, as from kube-apiserver (recorded ones keep
            # theirs).
            obj.setdefault("metadata", {}).setdefault(
                "resourceVersion", str(self.resource_version)
            )

    def remove(self, kind: str, namespace: str, name: str) -> None:
        """Delete a stored object (as if a controller deleted it)."""
        group, version, plural, _, _ = KINDS[kind]
        with self._lock:
            collection = self._collections[(group, version, plural)]
            collection.items = [
                o
                for o in collection.items
                if (o["metadata"].get("namespace"), o["metadata"]["name"])
                != (namespace, name)
            ]
            self.resource_version += 1

    def fail(
        self,
        path: str,
        status: int = 500,
        *,
        times: int = 1,
        retry_after: str | None = None,
        delay_s: float = 0.0,
        message: str = "",
        on_continue: bool = False,
        raw_body: bytes | None = None,
    ) -> None:
        """Answer the next ``times`` GETs on ``path`` with an error or a delay."""
        with self._lock:
            self.faults.append(
                Fault(
                    path,
                    status,
                    times,
                    retry_after,
                    delay_s,
                    message,
                    on_continue,
                    raw_body,
                )
            )

    def hold_writes(self, path_part: str) -> threading.Event:
        """Hold every write (non-GET) whose path contains ``path_part`` until the
        returned event is set; one held when the server stops is refused (503)."""
        release = threading.Event()
        with self._lock:
            self.held_writes[path_part] = release
        return release

    def deny(self, group: str, resource: str, verb: str) -> None:
        """Refuse a write permission from now on (403, and in access reviews)."""
        with self._lock:
            self.denied.add((group, resource, verb))

    def bind_role(self, rules: list[dict[str, Any]]) -> None:
        """Grant writes (and answer access reviews) only as these ClusterRole rules
        do, from now on (``rbac.role_allows``)."""
        with self._lock:
            self.role = rules

    def kubelet_actuates(self, namespace: str, name: str) -> None:
        """Play a resize-capable kubelet once the resize is done (k8s-wire
        kubelet/04): the containers' status resources and ``allocatedResources``
        follow the spec, ``status.observedGeneration`` and every condition's is the
        pod's generation, no resize condition is left."""
        self._kubelet(namespace, name, done=True)

    def kubelet_resizing(self, namespace: str, name: str) -> None:
        """Play a kubelet 50 ms into a resize (k8s-wire kubelet/03):
        ``PodResizeInProgress`` True, ``allocatedResources`` already the new
        requests, the status ``resources`` still the old ones, the generation
        observed."""
        self._kubelet(namespace, name, done=False)

    def _kubelet(self, namespace: str, name: str, *, done: bool) -> None:
        with self._lock:
            for pod in self._collections[("", "v1", "pods")].items:
                meta = pod["metadata"]
                if (meta.get("namespace"), meta["name"]) != (namespace, name):
                    continue
                generation = int(meta.get("generation") or 1)
                status = pod.setdefault("status", {})
                status["observedGeneration"] = generation
                conditions = [
                    c
                    for c in status.get("conditions") or []
                    if c.get("type") not in ("PodResizePending", "PodResizeInProgress")
                ]
                if not done:
                    conditions.insert(
                        0,
                        {
                            "type": "PodResizeInProgress",
                            "status": "True",
                            "lastProbeTime": None,
                            "lastTransitionTime": STARTED_TEXT,
                        },
                    )
                for condition in conditions:
                    condition["observedGeneration"] = generation
                status["conditions"] = conditions
                specs = {c["name"]: c for c in pod["spec"]["containers"]}
                for container in status.get("containerStatuses") or []:
                    spec = specs.get(container.get("name"))
                    if spec is None:
                        continue
                    resources = json.loads(json.dumps(spec.get("resources") or {}))
                    container["allocatedResources"] = resources.get("requests") or {}
                    if done:
                        container["resources"] = resources
                # A kubelet's status write moves the pod's resourceVersion
                # (k8s-wire kubelet/02-04: 2709 the resize, 2711 and 2713 the
                # kubelet's writes); discovery's change markers rely on it.
                self.resource_version += 1
                meta["resourceVersion"] = str(self.resource_version)
            self.resource_version += 1

    def unserve(self, group: str) -> None:
        """Answer 404 for an API group, as when its CRD or server is not installed."""
        self.unserved.add(group)

    # --- life cycle -------------------------------------------------------------------
    def start(self) -> FakeApiServer:
        """Listen on a free port of 127.0.0.1 in a daemon thread."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes; without this, delayed ACKs add 40
            # ms to every request.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output quiet

            def _handle(self) -> None:
                server._serve(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # A short poll interval makes stop() (and each test's teardown) quick.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        assert self._httpd is not None, "start() the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def write_verbs(self) -> list[Request]:
        """Requests with a write verb (the adapter must send none)."""
        return [r for r in self.requests if r.method in WRITE_VERBS]

    def gets(self, path_part: str) -> list[Request]:
        """GET requests whose path contains ``path_part``."""
        return [r for r in self.requests if r.method == "GET" and path_part in r.path]

    # --- serving ----------------------------------------------------------------------
    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = parse_qs(parts.query)
        request = Request(
            handler.command, parts.path, query, handler.headers.get("Authorization", "")
        )
        length = int(handler.headers.get("Content-Length") or 0)
        if length:
            request.body = handler.rfile.read(length)
        request.content_type = handler.headers.get("Content-Type", "")
        with self._lock:
            self.requests.append(request)
        if request.authorization != f"Bearer {self.token}":
            return self._send(
                handler, 401, _status(401, "Unauthorized", "Unauthorized")
            )
        if parts.path == rbac.ACCESS_REVIEWS and request.method == "POST":
            code, review = rbac.access_review(self.denied, request.body, self.role)
            return self._send(handler, code, review)
        refusal = rbac.forbidden(self.denied, request.method, parts.path, self.role)
        if refusal is not None:
            # Authorization's 403s carry nosniff; admission's do not (k8s-wire
            # README, rbac/403-16 against kubelet/06).
            return self._send(handler, 403, refusal, rbac.HEADERS)
        if parts.path.startswith(WEBHOOK_CONFIGURATIONS):
            code, answer = self.webhook_configurations.serve(
                request.method, parts.path, request.body
            )
            return self._send(handler, code, answer)
        node_answer = nodes.handle(self, request.method, parts.path)
        if node_answer is not None:
            return self._send(handler, *node_answer)
        if request.method != "GET":
            with self._lock:
                holds = [e for p, e in self.held_writes.items() if p in parts.path]
            for release in holds:
                while not release.wait(0.1):
                    if self._stopping.is_set():
                        return self._send(
                            handler,
                            503,
                            _status(503, "ServiceUnavailable", "server stopping"),
                        )
        answer = hpa.handle(
            self, request.method, parts.path, request.body, request.content_type
        ) or writes.handle(self, request.method, parts.path, query, request.body)
        if answer is not None:
            code, body, headers = answer
            return self._send(handler, code, body, headers)
        if request.method != "GET":
            return self._send(
                handler,
                405,
                _status(
                    405,
                    "MethodNotAllowed",
                    f"the fake API server is read-only: {request.method}",
                ),
            )
        fault = self._take_fault(parts.path, has_continue="continue" in query)
        if fault is not None:
            if fault.raw_body is not None:
                return self._send_raw(handler, 200, fault.raw_body, "text/html")
            if fault.delay_s:
                # Longer than the client's read timeout; cut short when the server
                # stops.
                self._stopping.wait(fault.delay_s)
            else:
                headers = (
                    {"Retry-After": fault.retry_after} if fault.retry_after else {}
                )
                reason = {
                    403: "Forbidden",
                    410: "Expired",
                    429: "TooManyRequests",
                    500: "InternalError",
                    503: "ServiceUnavailable",
                }.get(fault.status, "Unknown")
                message = fault.message or f"injected {fault.status} for {parts.path}"
                return self._send(
                    handler,
                    fault.status,
                    _status(fault.status, reason, message),
                    headers,
                )
        if parts.path.rstrip("/") == "/version":
            # The recorded answer (k8s-wire version.json); a test plays an older
            # server by setting ``git_version`` (major and minor follow it).
            return self._send(handler, 200, version_body(self.git_version))
        routed = self._route(parts.path)
        if routed is None:
            return self._send(
                handler,
                404,
                _status(
                    404, "NotFound", "the server could not find the requested resource"
                ),
            )
        collection, namespace = routed
        if (
            self.allowed is not None
            and (collection.group, collection.plural) not in self.allowed
        ):
            resource = collection.plural + (
                f".{collection.group}" if collection.group else ""
            )
            scope = (
                f'in the namespace "{namespace}"'
                if namespace
                else "at the cluster scope"
            )
            message = (
                f'{resource} is forbidden: User "system:serviceaccount:vpaweb:vpaweb" '
                f'cannot list resource "{collection.plural}" in API group '
                f'"{collection.group}" {scope}'
            )
            # details as recorded: k8s-wire nodes/07 (core), hpa/11 (a group).
            details = {"group": collection.group} if collection.group else {}
            details["kind"] = collection.plural
            return self._send(
                handler, 403, {**_status(403, "Forbidden", message), "details": details}
            )
        try:
            body = self._list(collection, namespace, query)
        except ValueError as exc:
            return self._send(handler, 400, _status(400, "BadRequest", str(exc)))
        except LookupError as exc:
            return self._send(handler, 410, _status(410, "Expired", str(exc)))
        return self._send(handler, 200, body)

    def _take_fault(self, path: str, *, has_continue: bool) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.on_continue and not has_continue:
                    continue
                if fault.times > 0 and fault.path in path:
                    fault.times -= 1
                    return fault
        return None

    def _route(self, path: str) -> tuple[_Collection, str | None] | None:
        segments = [s for s in path.split("/") if s]
        if segments[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", segments[2:]
        elif len(segments) >= 3 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            return None
        if group in self.unserved:
            return None
        namespace = None
        if len(rest) == 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if len(rest) != 1:
            return None
        collection = self._collections.get((group, version, rest[0]))
        if collection is None:
            return None
        return collection, namespace

    def _list(
        self,
        collection: _Collection,
        namespace: str | None,
        query: dict[str, list[str]],
    ) -> dict[str, Any]:
        with self._lock:
            current_rv = str(self.resource_version)
            items = sorted(
                collection.items,
                key=lambda o: (
                    o["metadata"].get("namespace", ""),
                    o["metadata"]["name"],
                ),
            )
        if namespace is not None:
            items = [o for o in items if o["metadata"].get("namespace") == namespace]
        if "fieldSelector" in query:
            items = [o for o in items if _field_matches(o, query["fieldSelector"][0])]
        if "labelSelector" in query:
            items = [o for o in items if _label_matches(o, query["labelSelector"][0])]
        start = 0
        list_rv = current_rv
        if "continue" in query:
            try:
                token = json.loads(base64.urlsafe_b64decode(query["continue"][0]))
                start, list_rv = int(token["start"]), str(token["rv"])
            except (ValueError, KeyError, TypeError):
                raise ValueError("continue key is not valid") from None
            if list_rv != current_rv:
                # The real server keeps snapshots for a while; ours only has the current
                # one.
                raise LookupError(
                    "The provided continue parameter is too old to display a "
                    "consistent list result. You can start a new list without the "
                    "continue parameter."
                )
        limit = int(query["limit"][0]) if query.get("limit") else 0
        end = start + limit if limit > 0 else len(items)
        page = items[start:end]
        metadata: dict[str, Any] = {"resourceVersion": list_rv}
        if end < len(items):
            metadata["continue"] = base64.urlsafe_b64encode(
                json.dumps(
                    {"v": "meta.k8s.io/v1", "rv": list_rv, "start": end}
                ).encode()
            ).decode()
            metadata["remainingItemCount"] = len(items) - end
        if collection.built_in:
            # Lists of built-in types omit each item's apiVersion and kind.
            page = [
                {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
                for o in page
            ]
        api_version = (
            f"{collection.group}/{collection.version}" if collection.group else "v1"
        )
        return {
            "kind": f"{collection.kind}List",
            "apiVersion": api_version,
            "metadata": metadata,
            "items": page,
        }

    @classmethod
    def _send(
        cls,
        handler: BaseHTTPRequestHandler,
        code: int,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        cls._send_raw(
            handler, code, json.dumps(body).encode(), "application/json", headers
        )

    @staticmethod
    def _send_raw(
        handler: BaseHTTPRequestHandler,
        code: int,
        payload: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        try:
            handler.send_response(code)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(payload)))
            handler.send_header("Audit-Id", "00000000-0000-4000-8000-000000000000")
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)


def write_kubeconfig(
    path: Path, servers: dict[str, FakeApiServer], *, current: str
) -> Path:
    """A kubeconfig with a context per server (named by its key), token users."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "current-context": current,
        "clusters": [
            {"name": name, "cluster": {"server": server.url}}
            for name, server in servers.items()
        ],
        "users": [
            {"name": f"{name}-reader", "user": {"token": server.token}}
            for name, server in servers.items()
        ],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": f"{name}-reader"}}
            for name in servers
        ],
    }
    # JSON is valid YAML, and the kubernetes client reads kubeconfig files as YAML.
    path.write_text(json.dumps(config, indent=2))
    return path

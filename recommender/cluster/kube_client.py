"""Read-only access to one Kubernetes API server through the official ``kubernetes``
client.

Connection comes from a kubeconfig context (``KUBECONFIG``, else ``~/.kube/config``) or,
inside a pod, from the service account (in-cluster config). Every adapter builds its own
``ApiClient`` and ``Configuration``, never the client's global default, so several
clusters can be read at once."""
# Lists are paginated (``limit``/``continue``), each request has a connect and a read
# timeout, and transient failures (429, 5xx, timeouts, refused connections) are retried
# with exponential backoff and jitter, honouring ``Retry-After``. Anything else, or a
# failure that outlasts the retries, raises ``SourceUnavailable`` naming the cluster and
# the resource.
#
# This module only ever issues GET requests: there is no create, patch, replace or
# delete call here, and a test checks that no other verb reaches the API server.

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from recommender.errors import SourceUnavailable

logger = logging.getLogger(__name__)

# Answers worth asking again: throttling (API Priority and Fairness answers 429 with
# Retry-After) and server-side trouble. 4xx other than 429 will not change on a retry.
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
# An expired continue token (the list snapshot was compacted): restart the list from
# scratch.
GONE = 410
MESSAGE_LIMIT = 300
# Objects as the API returns them; named because KubeReader.list shadows ``list``.
KubeObjects = list[dict[str, Any]]


@dataclass(frozen=True)
class KubeClientSettings:
    """Timeouts, retries and page size for the API calls (see docs/kubernetes.md)."""

    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    retries: int = 4
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    page_size: int = 500

    @classmethod
    def from_settings(cls) -> KubeClientSettings:
        """Read the ``KUBERNETES_*`` Django settings (env ``VPAWEB_K8S_*``)."""
        from django.conf import settings

        default = cls()
        return cls(
            connect_timeout_s=getattr(
                settings, "KUBERNETES_CONNECT_TIMEOUT_S", default.connect_timeout_s
            ),
            read_timeout_s=getattr(
                settings, "KUBERNETES_READ_TIMEOUT_S", default.read_timeout_s
            ),
            retries=getattr(settings, "KUBERNETES_RETRIES", default.retries),
            backoff_s=getattr(settings, "KUBERNETES_BACKOFF_S", default.backoff_s),
            max_backoff_s=getattr(
                settings, "KUBERNETES_MAX_BACKOFF_S", default.max_backoff_s
            ),
            page_size=getattr(settings, "KUBERNETES_PAGE_SIZE", default.page_size),
        )


@dataclass(frozen=True)
class ResourceType:
    """A listable resource and the client methods that list it."""

    label: str  # as kubectl names it: "pods", "deployments.apps", …
    api: str  # attribute of ``API_CLASSES``
    all_method: str = ""  # list across namespaces
    namespaced_method: str = ""
    # Custom resources (CustomObjectsApi) instead of typed methods:
    group: str = ""
    version: str = ""
    plural: str = ""


API_CLASSES: dict[str, Callable[[k8s.ApiClient], Any]] = {
    "core": k8s.CoreV1Api,
    "apps": k8s.AppsV1Api,
    "batch": k8s.BatchV1Api,
    "autoscaling": k8s.AutoscalingV2Api,
    "policy": k8s.PolicyV1Api,
    "custom": k8s.CustomObjectsApi,
}


def _typed(label: str, api: str, name: str) -> ResourceType:
    return ResourceType(
        label,
        api,
        all_method=f"list_{name}_for_all_namespaces",
        namespaced_method=f"list_namespaced_{name}",
    )


def _custom(group: str, version: str, plural: str) -> ResourceType:
    return ResourceType(
        f"{plural}.{group}", "custom", group=group, version=version, plural=plural
    )


PODS = _typed("pods", "core", "pod")
# Cluster-scoped: one list method, no namespaced one.
NAMESPACES = ResourceType("namespaces", "core", all_method="list_namespace")
NODES = ResourceType("nodes", "core", all_method="list_node")
EVENTS = _typed("events", "core", "event")
LIMIT_RANGES = _typed("limitranges", "core", "limit_range")
REPLICATION_CONTROLLERS = _typed(
    "replicationcontrollers", "core", "replication_controller"
)
DEPLOYMENTS = _typed("deployments.apps", "apps", "deployment")
STATEFUL_SETS = _typed("statefulsets.apps", "apps", "stateful_set")
DAEMON_SETS = _typed("daemonsets.apps", "apps", "daemon_set")
REPLICA_SETS = _typed("replicasets.apps", "apps", "replica_set")
JOBS = _typed("jobs.batch", "batch", "job")
CRON_JOBS = _typed("cronjobs.batch", "batch", "cron_job")
HORIZONTAL_POD_AUTOSCALERS = _typed(
    "horizontalpodautoscalers.autoscaling", "autoscaling", "horizontal_pod_autoscaler"
)
POD_DISRUPTION_BUDGETS = _typed(
    "poddisruptionbudgets.policy", "policy", "pod_disruption_budget"
)
VERTICAL_POD_AUTOSCALERS = _custom("autoscaling.k8s.io", "v1", "verticalpodautoscalers")
POD_METRICS = _custom("metrics.k8s.io", "v1beta1", "pods")


def in_pod() -> bool:
    """True when running in a pod (the service account token is mounted)."""
    token = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and token.exists()


def load_api_client(
    *, cluster_name: str, context: str = "", kubeconfig: str | None = None
) -> k8s.ApiClient:
    """Build a private ``ApiClient`` for one cluster.

    A non-empty ``context`` selects that kubeconfig context. An empty one means
    in-cluster config when running in a pod, else the kubeconfig's current context.
    ``kubeconfig`` overrides the ``KUBECONFIG`` variable (which may list several files,
    separated by ``:``).
    """
    configuration = k8s.Configuration()
    config_file = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    try:
        if not context and in_pod():
            k8s_config.load_incluster_config(client_configuration=configuration)
            source = "in-cluster service account"
        else:
            k8s_config.load_kube_config(
                config_file=config_file,
                context=context or None,
                client_configuration=configuration,
                persist_config=False,
            )
            source = f"kubeconfig {config_file!r} context {context or '(current)'!r}"
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        where = f"context {context!r}" if context else "the current context"
        raise SourceUnavailable(
            f"cluster {cluster_name!r}: cannot load {where} from kubeconfig "
            f"{config_file!r} (KUBECONFIG): {exc}"
        ) from None
    # urllib3's own silent retries would multiply timeouts; KubeReader retries instead.
    configuration.retries = False
    logger.info(
        "cluster %s: API server %s from %s", cluster_name, configuration.host, source
    )
    return k8s.ApiClient(configuration=configuration)


def open_reader(
    *,
    cluster_name: str,
    context: str = "",
    kubeconfig: str | None = None,
    settings: KubeClientSettings | None = None,
    api_client: k8s.ApiClient | None = None,
    sleep: Callable[[float], None] | None = None,
) -> KubeReader:
    """A ``KubeReader`` of one cluster: the client set-up every reader of it shares.

    ``api_client`` (tests) replaces the kubeconfig or in-cluster set-up; ``settings``
    default to the ``VPAWEB_K8S_*`` Django settings.
    """
    if api_client is None:
        api_client = load_api_client(
            cluster_name=cluster_name, context=context, kubeconfig=kubeconfig
        )
    return KubeReader(
        cluster_name=cluster_name,
        api_client=api_client,
        settings=settings or KubeClientSettings.from_settings(),
        sleep=sleep or time.sleep,
    )


class _ContinueExpired(Exception):
    """The server no longer knows a continue token (410 Gone)."""


class _NotServed(Exception):
    """The server does not serve the resource (404: CRD or API not installed)."""


class KubeReader:
    """Paginated, retried, read-only lists against one API server."""

    def __init__(
        self,
        *,
        cluster_name: str,
        api_client: k8s.ApiClient,
        settings: KubeClientSettings | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.cluster_name = cluster_name
        self.api_client = api_client
        self.settings = settings or KubeClientSettings()
        self._sleep = sleep
        self._jitter = jitter
        self._apis: dict[str, Any] = {}
        self.request_count = 0

    def close(self) -> None:
        """Release the connection pool."""
        self.api_client.close()

    def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        missing_ok: bool = False,
    ) -> list[dict[str, Any]] | None:
        """All items of ``resource``, page by page (None: not served, missing_ok)."""
        for attempt in range(2):
            try:
                return self._list_pages(
                    resource, namespace, field_selector, label_selector
                )
            except _ContinueExpired:
                # The snapshot behind the token was compacted away mid-list; a fresh
                # list is consistent again (client-go's pager falls back the same way).
                logger.warning(
                    "cluster %s: continue token of %s expired, listing again (%d)",
                    self.cluster_name,
                    resource.label,
                    attempt + 1,
                )
            except _NotServed:
                if missing_ok:
                    logger.info(
                        "cluster %s: %s is not served (API not installed)",
                        self.cluster_name,
                        resource.label,
                    )
                    return None
                raise SourceUnavailable(
                    f"cluster {self.cluster_name!r}: {resource.label}"
                    f"{self._where(namespace)} is not served by the API server "
                    "(HTTP 404): is the API installed?"
                ) from None
        raise SourceUnavailable(
            f"cluster {self.cluster_name!r}: cannot list {resource.label}"
            f"{self._where(namespace)}: the continue token expired twice in a row"
        )

    def _list_pages(
        self,
        resource: ResourceType,
        namespace: str | None,
        field_selector: str | None,
        label_selector: str | None = None,
    ) -> KubeObjects:
        items: KubeObjects = []
        token: str | None = None
        while True:
            page = self._get_page(
                resource, namespace, field_selector, token, label_selector
            )
            page_items = page.get("items") or []
            if not isinstance(page_items, list):
                raise SourceUnavailable(
                    f"cluster {self.cluster_name!r}: the list of {resource.label}"
                    f"{self._where(namespace)} has no items array"
                )
            items.extend(item for item in page_items if isinstance(item, dict))
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def _method(
        self, resource: ResourceType, namespace: str | None
    ) -> Callable[..., Any]:
        api = self._apis.get(resource.api)
        if api is None:
            api = self._apis[resource.api] = API_CLASSES[resource.api](self.api_client)
        if resource.api == "custom":
            if namespace:
                return lambda **kw: api.list_namespaced_custom_object(
                    resource.group, resource.version, namespace, resource.plural, **kw
                )
            return lambda **kw: api.list_cluster_custom_object(
                resource.group, resource.version, resource.plural, **kw
            )
        if namespace:
            method = getattr(api, resource.namespaced_method)
            return lambda **kw: method(namespace, **kw)
        return getattr(api, resource.all_method)  # type: ignore[no-any-return]

    def _get_page(
        self,
        resource: ResourceType,
        namespace: str | None,
        field_selector: str | None,
        token: str | None,
        label_selector: str | None = None,
        *,
        limit: int | None = None,
    ) -> dict[str, Any]:
        method = self._method(resource, namespace)
        kwargs: dict[str, Any] = {"limit": limit or self.settings.page_size}
        if token:
            kwargs["_continue"] = token
        if field_selector:
            kwargs["field_selector"] = field_selector
        if label_selector:
            kwargs["label_selector"] = label_selector
        what = f"list {resource.label}{self._where(namespace)}"
        return self._request(
            what, lambda **extra: method(**kwargs, **extra), has_token=bool(token)
        )

    def server_version(self) -> str:
        """The API server's version (``GET /version``), e.g. ``v1.33.2``."""
        api = k8s.VersionApi(self.api_client)
        try:
            answer = self._request(
                "read the server version", api.get_code, has_token=False
            )
        except _NotServed:
            raise SourceUnavailable(
                f"cluster {self.cluster_name!r}: the server does not answer "
                "/version (HTTP 404): is this a Kubernetes API server?"
            ) from None
        return str(answer.get("gitVersion", ""))

    def probe(self, resource: ResourceType) -> int:
        """Read one item of ``resource``, proving access; the item count (0 or 1)."""
        try:
            page = self._get_page(resource, None, None, None, limit=1)
        except _NotServed:
            raise SourceUnavailable(
                f"cluster {self.cluster_name!r}: {resource.label} is not served "
                "by the API server (HTTP 404)"
            ) from None
        return len(page.get("items") or ())

    def _request(
        self, what: str, call: Callable[..., Any], *, has_token: bool
    ) -> dict[str, Any]:
        """One GET with timeouts, retried on transient failures; the JSON answer."""
        settings = self.settings
        attempt = 0
        while True:
            retry_after_s: float | None = None
            self.request_count += 1
            try:
                # Raw JSON instead of the client's model classes: deserialising tens of
                # thousands of pods into generated objects costs far more than the
                # request.
                response = call(
                    _preload_content=False,
                    _request_timeout=(
                        settings.connect_timeout_s,
                        settings.read_timeout_s,
                    ),
                )
                try:
                    body = response.data
                finally:
                    response.release_conn()
                answer = json.loads(body)
                if not isinstance(answer, dict):
                    raise ValueError("the answer is not a JSON object")
                return answer
            except ApiException as exc:
                if exc.status == GONE and has_token:
                    raise _ContinueExpired from None
                if exc.status == 404:
                    raise _NotServed from None
                problem = f"HTTP {exc.status} {exc.reason or ''}".rstrip()
                message = _status_message(exc.body)
                if message:
                    problem += f": {message}"
                retryable = exc.status in RETRYABLE_STATUSES
                retry_after_s = _retry_after_s(exc.headers)
            except urllib3.exceptions.NewConnectionError as exc:
                # Caught first: urllib3 makes it a subclass of ConnectTimeoutError.
                problem = f"cannot reach the API server: {exc}"
                retryable = True
            except urllib3.exceptions.TimeoutError:
                problem = (
                    "no answer within the timeout (connect "
                    f"{settings.connect_timeout_s:g} s, "
                    f"read {settings.read_timeout_s:g} s)"
                )
                retryable = True
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                problem = f"cannot reach the API server: {exc}"
                retryable = True
            except ValueError as exc:
                # A proxy's HTML error page or a truncated body: report, do not guess.
                problem = f"the answer is not valid JSON ({exc})"
                retryable = False
            if not retryable or attempt >= settings.retries:
                tries = f" (after {attempt + 1} attempts)" if attempt else ""
                raise SourceUnavailable(
                    f"cluster {self.cluster_name!r}: cannot {what}: {problem}{tries}"
                )
            delay_s = self._backoff_s(attempt, retry_after_s)
            logger.warning(
                "cluster %s: cannot %s (%s); retry %d of %d in %.2f s",
                self.cluster_name,
                what,
                problem,
                attempt + 1,
                settings.retries,
                delay_s,
            )
            self._sleep(delay_s)
            attempt += 1

    def _backoff_s(self, attempt: int, retry_after_s: float | None) -> float:
        settings = self.settings
        # Exponential backoff with "equal jitter": half fixed, half random, so a fleet
        # of workers that failed together does not retry together.
        base = min(settings.max_backoff_s, settings.backoff_s * 2.0**attempt)
        delay = base / 2 + base / 2 * self._jitter()
        if retry_after_s is not None:
            delay = max(delay, retry_after_s)
        return min(delay, settings.max_backoff_s)

    @staticmethod
    def _where(namespace: str | None) -> str:
        return f" in namespace {namespace!r}" if namespace else ""


def _status_message(body: Any) -> str:
    """The ``message`` of a ``Status`` body, or the start of any other body."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return str(body).strip()[:MESSAGE_LIMIT]
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])[:MESSAGE_LIMIT]
    return str(body).strip()[:MESSAGE_LIMIT]


def _retry_after_s(headers: Any) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if not headers:
        return None
    raw = headers.get("Retry-After")
    if raw is None:
        return None
    raw = str(raw).strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())

"""How to reach and read Prometheus: URL, credentials, labels, metrics.

The grid step is not a setting: the refresh cycle, the watermarks and the checkpoints
all assume one sample per minute (``services.refresh.ingest.STEP_S``).

Validated on construction, so a bad ``PROMETHEUS_*`` setting fails with the name of the
field before any query is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from recommender.errors import InvalidInput

# Prometheus' hard limit on the points of one series in one range query
# (web/api/v1/api.go: "exceeded maximum resolution of 11,000 points per timeseries").
PROMETHEUS_MAX_POINTS = 11_000


def display_url(url: str) -> str:
    """``url`` without its user:password part, for messages, logs and run rows."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unparsable URL)"
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def url_secrets(url: str) -> list[str]:
    """The password in ``url`` as written and decoded (to scrub from any text)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return []
    return [s for s in {password or "", unquote(password or "")} if s]


@dataclass(frozen=True)
class PrometheusConfig:
    """Where Prometheus is, how to authenticate, and how to read its series."""

    url: str
    bearer_token: str = ""
    username: str = ""
    password: str = ""
    # A CA bundle to verify the server's certificate; "" = the system's trust store.
    ca_file: str = ""
    timeout_s: float = 30.0
    # Lower bound of the rate() window: at least two scrape intervals, or rate() finds a
    # single sample per window and returns nothing.
    rate_window_s: float = 60.0
    concurrency: int = 4
    max_points: int = PROMETHEUS_MAX_POINTS
    retries: int = 3
    backoff_s: float = 0.5
    # gzip answers: Prometheus spends more CPU compressing a JSON answer than building
    # it (docs/prometheus.md, "Benchmark"), worth it only on slow links.
    gzip: bool = False
    namespace_label: str = "namespace"
    pod_label: str = "pod"
    container_label: str = "container"
    cpu_metric: str = "container_cpu_usage_seconds_total"
    memory_metric: str = "container_memory_working_set_bytes"
    # Extra matchers for the cAdvisor series, e.g. 'job="kubelet"'.
    cadvisor_selector: str = ""
    # Extra matchers for the kube-state-metrics series, e.g. 'job="kube-state-metrics"'.
    kube_state_selector: str = ""

    @property
    def display_url(self) -> str:
        """The URL without credentials: the only form that goes into any message."""
        return display_url(self.url)

    def redact(self, text: str) -> str:
        """``text`` with the URL's password replaced (HTTP libraries may quote it)."""
        text = text.replace(self.url, self.display_url)
        for secret in url_secrets(self.url):
            text = text.replace(secret, "***")
        return text

    def __post_init__(self) -> None:
        checks: list[tuple[str, bool, str]] = [
            (
                "url",
                self.url.startswith(("http://", "https://")),
                f"{display_url(self.url)!r} is not an http:// or https:// URL",
            ),
            ("timeout_s", self.timeout_s > 0, "must be positive"),
            ("rate_window_s", self.rate_window_s > 0, "must be positive"),
            ("concurrency", self.concurrency >= 1, "must be at least 1"),
            (
                "max_points",
                2 <= self.max_points <= PROMETHEUS_MAX_POINTS,
                f"must be between 2 and {PROMETHEUS_MAX_POINTS}",
            ),
            ("retries", self.retries >= 0, "must not be negative"),
            ("backoff_s", self.backoff_s >= 0, "must not be negative"),
        ]
        for label in ("namespace_label", "pod_label", "container_label"):
            value = getattr(self, label)
            checks.append(
                (label, value.isidentifier(), f"{value!r} is not a label name")
            )
        for name, is_ok, problem in checks:
            if not is_ok:
                raise InvalidInput(f"Prometheus {name} {problem}", field=name)
        if url_secrets(self.url) and (self.username or self.bearer_token):
            # requests would send the URL's user:password and silently drop the other.
            raise InvalidInput(
                "PROMETHEUS_URL holds a user:password and PROMETHEUS_USERNAME or "
                "PROMETHEUS_BEARER_TOKEN is also set: keep one (preferably "
                "PROMETHEUS_USERNAME/PASSWORD, which can be read from a _FILE)",
                field="url",
            )
        if bool(self.username) != bool(self.password):
            raise InvalidInput(
                "Prometheus basic auth needs both a username and a password",
                field="username",
            )

    @classmethod
    def from_settings(cls) -> PrometheusConfig:
        """The configuration in ``settings.PROMETHEUS_*``."""
        from django.conf import settings

        return cls(
            url=settings.PROMETHEUS_URL,
            bearer_token=settings.PROMETHEUS_BEARER_TOKEN,
            username=settings.PROMETHEUS_USERNAME,
            password=settings.PROMETHEUS_PASSWORD,
            ca_file=settings.PROMETHEUS_CA_FILE,
            timeout_s=settings.PROMETHEUS_TIMEOUT_S,
            rate_window_s=settings.PROMETHEUS_RATE_WINDOW_S,
            concurrency=settings.PROMETHEUS_CONCURRENCY,
            max_points=settings.PROMETHEUS_MAX_POINTS,
            retries=settings.PROMETHEUS_RETRIES,
            gzip=settings.PROMETHEUS_GZIP,
            namespace_label=settings.PROMETHEUS_NAMESPACE_LABEL,
            pod_label=settings.PROMETHEUS_POD_LABEL,
            container_label=settings.PROMETHEUS_CONTAINER_LABEL,
            cpu_metric=settings.PROMETHEUS_CPU_METRIC,
            memory_metric=settings.PROMETHEUS_MEMORY_METRIC,
            cadvisor_selector=settings.PROMETHEUS_CADVISOR_SELECTOR,
            kube_state_selector=settings.PROMETHEUS_KUBE_STATE_SELECTOR,
        )

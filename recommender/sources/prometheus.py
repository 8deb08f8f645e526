"""Usage history from Prometheus: cAdvisor CPU and memory, kube-state-metrics OOM kills.

Every query is a ``query_range`` on a grid aligned to the step (Unix seconds divisible
by the step), so two reads of overlapping ranges return the same timestamps and the
refresh service's per-container watermarks (the newest grid time ingested) stay exact.
"""
# - CPU: ``max by (namespace, pod, container) (rate(<cpu counter>[w]))`` in cores, where
#   ``w`` is the larger of the step and ``rate_window_s``. With ``w`` equal to the step
#   the windows tile the time axis, so every counter increment is counted once; ``rate``
#   handles counter resets (a restarted container).
# - Memory: ``max by (...) (max_over_time(<working set>[step - 1ms]))``: the peak of
#   each interval (t - step, t], which is what the VPA's memory histogram keeps
#   (upstream reads the gauge at one point per interval and misses the peaks between
#   points). The 1 ms keeps a scrape on a grid boundary in one interval only: Prometheus
#   2.x ranges include their left end.
# - ``max by`` rather than ``sum by``: cAdvisor briefly exports the old cgroup's series
#   next to the new one after a restart; summing would double the usage.
# - OOM kills: kube-state-metrics' restart counter going up while
#   ``kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}`` is 1, with
#   the memory request (``kube_pod_container_resource_requests``) at that time, as
#   upstream's OOM observer passes it.
#
# Prometheus refuses a query of more than 11,000 points per series, so long ranges are
# split into chunks of at most ``max_points`` grid points, fetched ``concurrency`` at a
# time. Transient failures (connection errors, timeouts, 429 and 5xx) are retried with
# exponential backoff and jitter; anything else, or a used-up retry budget, raises
# ``SourceUnavailable`` naming the query and what was wrong. A series that vanishes is
# simply absent (NaN) from then on.

from __future__ import annotations

import json
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import requests
from requests.adapters import HTTPAdapter

from recommender.cluster.base import OomKill
from recommender.errors import InvalidInput, SourceUnavailable
from recommender.sources.base import SeriesKey, SourceBase, UsageGrid
from recommender.sources.prometheus_answers import (
    Matrix,
    MatrixAnswer,
    concat,
    decode_matrix,
    parse_matrix,
    point_arrays,
    reindex,
    result_list,
    samples_of,
    series_arrays,
    series_order,
    short,
)
from recommender.sources.prometheus_config import PrometheusConfig
from recommender.sources.windows import (
    Samples,
    max_by_container,
    peak_on_grid,
    rate_on_grid,
)

logger = logging.getLogger(__name__)

# HTTP statuses worth retrying: overload and server-side failures.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Label values that are not a container: the pod cgroup ("") and the pause container.
NOT_A_CONTAINER = ("", "POD")
# OpenCost's node cost metrics (fetch_node_costs): USD per core-hour and per GiB-hour
# of each node, and 1 on a spot node.
NODE_COST_METRICS = (
    "node_cpu_hourly_cost",
    "node_ram_hourly_cost",
    "kubecost_node_is_spot",
)


@dataclass
class QueryStats:
    """What a source has asked so far (for benchmarks and the run's counts)."""

    queries: int = 0
    retries: int = 0
    # Values received: stored samples for usage reads, grid points for range queries.
    points: int = 0
    seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, *, retries: int, points: int, seconds: float) -> None:
        """Count one answered query."""
        with self._lock:
            self.queries += 1
            self.retries += retries
            self.points += points
            self.seconds += seconds


def grid(start_s: float, end_s: float, step_s: float) -> np.ndarray:
    """The step-aligned times in ``(start_s, end_s]``: the only times reported."""
    if step_s <= 0:
        raise InvalidInput(f"step {step_s} must be positive", field="step_s")
    first = math.floor(start_s / step_s) + 1
    last = math.floor(end_s / step_s)
    if last < first:
        return np.zeros(0)
    return np.arange(first, last + 1, dtype=np.float64) * step_s


def chunk_grid(times: np.ndarray, max_points: int) -> list[np.ndarray]:
    """Split a grid into consecutive pieces of at most ``max_points`` times."""
    return [times[i : i + max_points] for i in range(0, len(times), max_points)]


class PrometheusSource(SourceBase):
    """Reads usage and OOM history of a cluster from the Prometheus HTTP API, with
    cAdvisor's CFS counters and OpenCost's node costs; whole namespaces only."""

    keeps_history = True
    selects_workloads = False
    history_arrives_late = True
    keeps_oom_history = True
    counts_throttling = True
    reads_cluster_series = True

    def __init__(
        self,
        config: PrometheusConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.stats = QueryStats()
        self._labels = (
            config.namespace_label,
            config.pod_label,
            config.container_label,
        )
        self._sleep = sleep
        self._session = requests.Session()
        adapter = HTTPAdapter(
            pool_connections=1, pool_maxsize=max(config.concurrency, 1)
        )
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)
        if config.bearer_token:
            self._session.headers["Authorization"] = f"Bearer {config.bearer_token}"
        elif config.username:
            self._session.auth = (config.username, config.password)
        if config.ca_file:
            self._session.verify = config.ca_file
        self._session.headers["Accept"] = "application/json"
        self._session.headers["Accept-Encoding"] = "gzip" if config.gzip else "identity"

    def close(self) -> None:
        """Close pooled connections."""
        self._session.close()

    def __enter__(self) -> PrometheusSource:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- selectors and queries ----------------------------------------------------

    def _selector(self, *, namespace: str | None, extra: str, matcher: str) -> str:
        c = self.config
        matchers = [f'{c.pod_label}!=""']
        matchers += [f'{c.container_label}!="{value}"' for value in NOT_A_CONTAINER]
        if namespace is not None:
            matchers.append(f"{c.namespace_label}={_quote(namespace)}")
        if extra.strip():
            matchers.append(extra.strip().strip(","))
        if matcher:
            matchers.append(matcher)
        return "{" + ", ".join(matchers) + "}"

    def _by(self) -> str:
        c = self.config
        return f"by ({c.namespace_label}, {c.pod_label}, {c.container_label})"

    def cpu_query(self, *, namespace: str | None, step_s: float) -> str:
        """PromQL of CPU cores per container, averaged over each step."""
        c = self.config
        window = _duration(max(step_s, c.rate_window_s))
        selector = self._selector(
            namespace=namespace, extra=c.cadvisor_selector, matcher=""
        )
        return f"max {self._by()} (rate({c.cpu_metric}{selector}[{window}]))"

    def memory_query(self, *, namespace: str | None, step_s: float) -> str:
        """PromQL of the working-set peak per container in each step."""
        c = self.config
        selector = self._selector(
            namespace=namespace, extra=c.cadvisor_selector, matcher=""
        )
        return (
            f"max {self._by()} "
            f"(max_over_time({c.memory_metric}{selector}[{_duration(step_s - 0.001)}]))"
        )

    def oom_query(
        self, *, namespace: str | None, step_s: float, pods: Sequence[str] = ()
    ) -> str:
        """PromQL of OOM kills per step, valued with the memory request (0 if none).

        ``pods`` narrows every series to those pods, so the restart counters of the
        whole cluster are not scanned when only a few containers were OOM-killed.
        """
        c = self.config
        on = f"on ({c.namespace_label}, {c.pod_label}, {c.container_label})"
        only = f"{c.pod_label}=~{_quote(_any_of(pods))}" if pods else ""

        def sel(matcher: str) -> str:
            matchers = ", ".join(m for m in (matcher, only) if m)
            return self._selector(
                namespace=namespace, extra=c.kube_state_selector, matcher=matchers
            )

        oom_reason = sel('reason="OOMKilled"')
        memory = sel('resource="memory"')
        killed = (
            f"(changes(kube_pod_container_status_restarts_total{sel('')}"
            f"[{_duration(step_s)}]) > 0) and {on} "
            f"(kube_pod_container_status_last_terminated_reason{oom_reason} == 1)"
        )
        request = f"kube_pod_container_resource_requests{memory}"
        return (
            f"max {self._by()} ({request} and {on} {killed}) "
            f"or max {self._by()} ({killed} * 0)"
        )

    def oom_candidates_query(self, *, namespace: str | None, range_s: float) -> str:
        """PromQL of the containers last terminated by an OOM kill within a range."""
        c = self.config
        selector = self._selector(
            namespace=namespace,
            extra=c.kube_state_selector,
            matcher='reason="OOMKilled"',
        )
        return (
            f"max {self._by()} (max_over_time("
            f"kube_pod_container_status_last_terminated_reason{selector}"
            f"[{_duration(range_s)}]))"
        )

    def cpu_samples_query(self, *, namespace: str | None, range_ms: int) -> str:
        """PromQL of the stored CPU counter samples in ``range_ms`` before a time."""
        c = self.config
        selector = self._selector(
            namespace=namespace, extra=c.cadvisor_selector, matcher=""
        )
        return f"{c.cpu_metric}{selector}[{range_ms}ms]"

    def memory_samples_query(self, *, namespace: str | None, range_ms: int) -> str:
        """PromQL of the stored working-set samples in ``range_ms`` before a time."""
        c = self.config
        selector = self._selector(
            namespace=namespace, extra=c.cadvisor_selector, matcher=""
        )
        return f"{c.memory_metric}{selector}[{range_ms}ms]"

    # --- public reads -------------------------------------------------------------

    def fetch_usage(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> UsageGrid:
        """CPU cores and memory peaks on the step grid in ``(start_s, end_s]``.

        The values are those of :meth:`cpu_query` and :meth:`memory_query` on that
        grid, computed here from the stored samples (``recommender.sources.windows``):
        Prometheus then only reads and serialises samples, no per-step evaluation.
        """
        times = grid(start_s, end_s, step_s)
        if len(times) == 0:
            return UsageGrid.empty()
        step_ms = _milliseconds(step_s)
        window_ms = _milliseconds(max(step_s, self.config.rate_window_s))
        chunks = chunk_grid(times, self.config.max_points)
        jobs = [(kind, chunk) for chunk in chunks for kind in ("cpu", "memory")]

        def run(job: tuple[str, np.ndarray]) -> Matrix:
            kind, chunk = job
            grid_ms = np.rint(chunk * 1000).astype(np.int64)
            lookback_ms = window_ms if kind == "cpu" else step_ms
            # 1 ms more than needed: Prometheus 3 ranges exclude their left end.
            range_ms = int(grid_ms[-1] - grid_ms[0]) + lookback_ms + 1
            query = (
                self.cpu_samples_query(namespace=namespace, range_ms=range_ms)
                if kind == "cpu"
                else self.memory_samples_query(namespace=namespace, range_ms=range_ms)
            )
            samples = self.storedsamples_of(query, at_s=chunk[-1], range_ms=range_ms)
            if kind == "cpu":
                values = rate_on_grid(samples, grid_ms=grid_ms, window_ms=window_ms)
            else:
                values = peak_on_grid(samples, grid_ms=grid_ms, step_ms=step_ms)
            keys, values = max_by_container(samples.series, values)
            # NaN/Inf (a rate over a broken counter) are not usage: gaps.
            values[~np.isfinite(values)] = np.nan
            return Matrix(series=keys, timestamp_s=chunk, values=values)

        parts = self._run_all(run, jobs)
        cpu, memory = concat(parts[0::2], times), concat(parts[1::2], times)
        series = tuple(sorted(set(cpu.series) | set(memory.series), key=series_order))
        return UsageGrid(
            series=series,
            timestamp_s=times,
            cpu_cores=reindex(cpu, series),
            memory_bytes=reindex(memory, series),
        )

    def fetch_throttling(
        self, *, namespace: str | None, start_s: float, end_s: float
    ) -> dict[SeriesKey, tuple[float, float]]:
        """cAdvisor's CFS counters per container (``prometheus_throttling.py``)."""
        from recommender.sources import prometheus_throttling  # it imports this one

        return prometheus_throttling.fetch_throttling(
            self, namespace=namespace, start_s=start_s, end_s=end_s
        )

    def fetch_oom_kills(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> tuple[OomKill, ...]:
        """OOM kills seen in ``(start_s, end_s]``, at the grid time that saw them."""
        times = grid(start_s, end_s, step_s)
        if len(times) == 0:
            return ()
        # Step 1 (cheap, usually empty): which pods had an OOM-killed container at all.
        candidates = self._instant_vector(
            self.oom_candidates_query(
                namespace=namespace, range_s=times[-1] - times[0] + step_s
            ),
            at_s=times[-1],
        )
        pods = sorted({metric.get(self.config.pod_label, "") for metric in candidates})
        if not pods:
            return ()
        # Step 2: when their restarts went up, on the grid, for those pods only.
        (matrix,) = self._range_many(
            [self.oom_query(namespace=namespace, step_s=step_s, pods=pods)],
            times=times,
            step_s=step_s,
        )
        kills = []
        for row, key in enumerate(matrix.series):
            for column in np.flatnonzero(~np.isnan(matrix.values[row])):
                kills.append(
                    OomKill(
                        namespace=key.namespace,
                        pod=key.pod,
                        container=key.container,
                        occurred_at=datetime.fromtimestamp(times[column], tz=UTC),
                        memory_request_bytes=int(matrix.values[row, column]),
                    )
                )
        kills.sort(key=lambda k: (k.occurred_at, k.namespace, k.pod, k.container))
        return tuple(kills)

    def has_oom_series(self, *, at_s: float) -> bool:
        """Whether kube-state-metrics' restart counters reached Prometheus in the
        hour before ``at_s``: without them no OOM kill can be found in history."""
        selector = self._selector(
            namespace=None, extra=self.config.kube_state_selector, matcher=""
        )
        query = (
            "count(last_over_time("
            f"kube_pod_container_status_restarts_total{selector}[{_duration(3600)}]))"
        )
        return bool(self._instant_vector(query, at_s=at_s))

    def fetch_namespaces(self, *, start_s: float, end_s: float) -> list[str]:
        """Namespaces with CPU series in ``(start_s, end_s]``: the back-fill shards."""
        c = self.config
        selector = self._selector(namespace=None, extra=c.cadvisor_selector, matcher="")
        window = _duration(max(end_s - start_s, 1.0))
        query = (
            f"count by ({c.namespace_label}) "
            f"(last_over_time({c.cpu_metric}{selector}[{window}]))"
        )
        metrics = self._instant_vector(query, at_s=end_s)
        names = {str(metric.get(c.namespace_label, "")) for metric in metrics}
        return sorted(name for name in names if name)

    def _instant_vector(self, query: str, *, at_s: float) -> list[dict[str, str]]:
        """The label sets of an instant query's answer at ``at_s``."""
        body = self._post(
            "query", {"query": query, "time": _format_time(at_s)}, query=query
        )
        metrics = []
        for item in result_list(body, query=query, result_type="vector"):
            metric = item.get("metric") if isinstance(item, dict) else None
            if not isinstance(metric, dict):
                raise SourceUnavailable(
                    f"Prometheus answered an item without metric to {short(query)}"
                )
            metrics.append({str(k): str(v) for k, v in metric.items()})
        return metrics

    def fetch_node_costs(self, *, at_s: float) -> list[tuple[dict[str, str], float]]:
        """OpenCost's (Kubecost's) node cost series at ``at_s``: each series' labels
        (``__name__`` one of ``NODE_COST_METRICS``, ``node``, ``instance_type``, ...)
        and value; empty when Prometheus has none (services/refresh/node_prices.py)."""
        return self.instant_samples(NODE_COST_METRICS, at_s=at_s)

    def instant_samples(
        self, names: Sequence[str], *, at_s: float
    ) -> list[tuple[dict[str, str], float]]:
        """Every series of the metrics ``names`` at ``at_s`` (one instant query):
        its labels, ``__name__`` among them, and its value."""
        query = '{__name__=~"' + "|".join(names) + '"}'
        body = self._post(
            "query", {"query": query, "time": _format_time(at_s)}, query=query
        )
        out = []
        for item in result_list(body, query=query, result_type="vector"):
            metric = item.get("metric") if isinstance(item, dict) else None
            value = item.get("value") if isinstance(item, dict) else None
            try:
                number = float(value[1])  # type: ignore[index]
            except (TypeError, ValueError, IndexError) as exc:
                raise SourceUnavailable(
                    f"Prometheus answered a sample without a number to {short(query)}"
                ) from exc
            if not isinstance(metric, dict) or not math.isfinite(number):
                continue
            out.append(({str(k): str(v) for k, v in metric.items()}, number))
        return out

    # --- HTTP ---------------------------------------------------------------------

    def _run_all(
        self, run: Callable[[Any], Matrix], jobs: Sequence[Any]
    ) -> list[Matrix]:
        """``run`` each job, ``concurrency`` at a time; results in job order."""
        if self.config.concurrency == 1 or len(jobs) == 1:
            return [run(job) for job in jobs]
        with ThreadPoolExecutor(
            max_workers=min(self.config.concurrency, len(jobs)),
            thread_name_prefix="prometheus",
        ) as pool:
            # map() re-raises the first failure in job order.
            return list(pool.map(run, jobs))

    def _range_many(
        self, queries: Sequence[str], *, times: np.ndarray, step_s: float
    ) -> list[Matrix]:
        """Run each query over the whole grid in chunks, ``concurrency`` at a time."""
        chunks = chunk_grid(times, self.config.max_points)
        jobs = [
            (q, i, chunk) for q in range(len(queries)) for i, chunk in enumerate(chunks)
        ]

        def run(job: tuple[int, int, np.ndarray]) -> Matrix:
            query_index, _, chunk = job
            return self.query_range(queries[query_index], times=chunk, step_s=step_s)

        parts = self._run_all(run, jobs)
        by_query: list[list[Matrix]] = [[] for _ in queries]
        for (query_index, _, _), part in zip(jobs, parts, strict=True):
            by_query[query_index].append(part)
        return [concat(pieces, times) for pieces in by_query]

    def storedsamples_of(self, query: str, *, at_s: float, range_ms: int) -> Samples:
        """The stored samples a range-vector query (``...[range_ms]``) selects at
        ``at_s``, checked to lie in that range and to increase in time."""
        started = time.perf_counter()
        body, retries = self._post_counted(
            "query",
            {
                "query": query,
                "time": _format_time(at_s),
                "timeout": f"{self.config.timeout_s:g}s",
            },
            query=query,
            fast=decode_matrix,
        )
        if isinstance(body, MatrixAnswer):
            for warning in body.warnings:
                logger.warning("prometheus: warning for %s: %s", short(query), warning)
            arrays = [
                (item.metric, *point_arrays(item.values)) for item in body.data.result
            ]
        else:
            arrays = series_arrays(
                result_list(body, query=query, result_type="matrix"), query=query
            )
        end_ms = _milliseconds(at_s)
        samples = samples_of(
            arrays,
            first_ms=end_ms - range_ms,
            last_ms=end_ms,
            labels=self._labels,
            query=query,
        )
        self.stats.add(
            retries=retries,
            points=len(samples.values),
            seconds=time.perf_counter() - started,
        )
        return samples

    def query_range(self, query: str, *, times: np.ndarray, step_s: float) -> Matrix:
        """One ``query_range`` over a step-aligned grid, parsed into a matrix."""
        params = {
            "query": query,
            "start": _format_time(times[0]),
            "end": _format_time(times[-1]),
            "step": _format_time(step_s),
            "timeout": f"{self.config.timeout_s:g}s",
        }
        started = time.perf_counter()
        body, retries = self._post_counted("query_range", params, query=query)
        result = result_list(body, query=query, result_type="matrix")
        matrix = parse_matrix(
            result, times=times, step_s=step_s, labels=self._labels, query=query
        )
        self.stats.add(
            retries=retries,
            points=int(np.count_nonzero(~np.isnan(matrix.values))),
            seconds=time.perf_counter() - started,
        )
        return matrix

    def _post(self, endpoint: str, params: dict[str, str], *, query: str) -> Any:
        body, retries = self._post_counted(endpoint, params, query=query)
        self.stats.add(retries=retries, points=0, seconds=0.0)
        return body

    def _post_counted(
        self,
        endpoint: str,
        params: dict[str, str],
        *,
        query: str,
        fast: Callable[[bytes], Any] | None = None,
    ) -> tuple[Any, int]:
        """POST a form to ``/api/v1/<endpoint>``, retrying what is transient.

        ``fast`` may decode a 200 answer straight from its bytes (None = it cannot);
        anything it declines goes through ``json`` and the usual checks.
        """
        url = f"{self.config.url.rstrip('/')}/api/v1/{endpoint}"
        attempt = 0
        while True:
            problem, retryable, body = self._attempt(
                url, params, query=query, fast=fast
            )
            if problem is None:
                return body, attempt
            if not retryable or attempt >= self.config.retries:
                tries = f" (after {attempt + 1} attempts)" if attempt else ""
                raise SourceUnavailable(self.config.redact(f"{problem}{tries}"))
            # Exponential backoff with jitter: shards that failed together spread out.
            delay = self.config.backoff_s * (2**attempt) * (0.5 + random.random() / 2)
            logger.warning(
                "prometheus: %s; retry %d in %.2f s",
                self.config.redact(problem),
                attempt + 1,
                delay,
            )
            self._sleep(delay)
            attempt += 1

    def _attempt(
        self,
        url: str,
        params: dict[str, str],
        *,
        query: str,
        fast: Callable[[bytes], Any] | None = None,
    ) -> tuple[str | None, bool, Any]:
        """One request: (problem or None, whether to retry, parsed body)."""
        where = f"Prometheus at {self.config.display_url}"
        try:
            response = self._session.post(
                url, data=params, timeout=self.config.timeout_s
            )
        except requests.Timeout:
            return f"{where} timed out after {self.config.timeout_s:g} s", True, None
        except requests.exceptions.SSLError as exc:
            return f"{where}: TLS failed: {_first_line(exc)}", False, None
        except requests.ConnectionError as exc:
            return f"{where} is unreachable: {_first_line(exc)}", True, None
        except requests.RequestException as exc:
            return f"{where}: request failed: {_first_line(exc)}", True, None
        status = response.status_code
        try:
            content = response.content
        except requests.RequestException as exc:  # the connection dropped mid-body
            return f"{where}: the answer was cut off: {_first_line(exc)}", True, None
        if status in (401, 403):
            return (
                f"{where} refused the credentials (HTTP {status}); check "
                "PROMETHEUS_BEARER_TOKEN or PROMETHEUS_USERNAME/PASSWORD",
                False,
                None,
            )
        if fast is not None and status == 200:
            decoded = fast(content)
            if decoded is not None:
                return None, False, decoded
        text = response.text
        try:
            body = json.loads(text)
        except ValueError as exc:
            snippet = text[:120].replace("\n", " ")
            retryable = status in RETRY_STATUSES
            return (
                f"{where} answered HTTP {status} with malformed JSON ({exc}) to "
                f"{short(query)}: {snippet!r}",
                retryable,
                None,
            )
        if (
            status >= 400
            or not isinstance(body, dict)
            or body.get("status") != "success"
        ):
            error = body.get("error") if isinstance(body, dict) else None
            kind = body.get("errorType") if isinstance(body, dict) else None
            detail = f"{kind}: {error}" if error else "no error message"
            return (
                f"{where} answered HTTP {status} ({detail}) to {short(query)}",
                status in RETRY_STATUSES,
                None,
            )
        for warning in body.get("warnings") or ():
            logger.warning("prometheus: warning for %s: %s", short(query), warning)
        return None, False, body


def _any_of(values: Sequence[str]) -> str:
    """An RE2 regex matching exactly one of ``values``."""
    return "|".join(re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", v) for v in values)


def _quote(value: str) -> str:
    """A PromQL string literal."""
    return json.dumps(value)


def _duration(seconds: float) -> str:
    """A PromQL duration in whole milliseconds."""
    return f"{round(seconds * 1000)}ms"


def _milliseconds(seconds: float) -> int:
    """Whole milliseconds, rounded as in :func:`_duration`."""
    return round(seconds * 1000)


def _format_time(seconds: float) -> str:
    """Unix seconds as Prometheus reads them (no exponent, no float noise)."""
    return f"{float(seconds):.3f}".rstrip("0").rstrip(".")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

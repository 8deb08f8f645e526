"""Live usage from metrics-server (``metrics.k8s.io/v1beta1`` PodMetrics), for clusters
without
Prometheus.

metrics-server keeps only the latest sample per container, so this source has no
history, like upstream's recommender: each call returns the current sample as a
one-column ``UsageGrid``. CPU is read as upstream does (``MilliValue()`` of the
quantity, then cores), memory as the working-set bytes metrics-server reports.

Every PodMetrics carries its own ``timestamp`` (pods are scraped node by node). A sample
counts when that timestamp lies in ``(start_s, end_s]``, so a pod not scraped again
since the last call is not fed twice; the column is stamped with the newest accepted
timestamp, a shift of at most one scrape interval for the others. Plain init containers
are dropped, as upstream drops them; native sidecars (init containers with
``restartPolicy: Always``) run for the pod's whole life and are kept, since vpaweb
recommends for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

import numpy as np
from kubernetes import client as k8s

from recommender.cluster import kube_client
from recommender.cluster.kube_client import KubeClientSettings, KubeReader
from recommender.engine.quantity import parse_cpu_millicores, parse_memory_bytes
from recommender.errors import SourceUnavailable
from recommender.sources.base import SeriesKey, UsageGrid

logger = logging.getLogger(__name__)


class MetricsServerSource:
    """Reads PodMetrics of one cluster (the ``UsageSource``)."""

    def __init__(
        self,
        *,
        cluster_name: str,
        context: str = "",
        kubeconfig: str | None = None,
        settings: KubeClientSettings | None = None,
        api_client: k8s.ApiClient | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.cluster_name = cluster_name
        if api_client is None:
            api_client = kube_client.load_api_client(
                cluster_name=cluster_name, context=context, kubeconfig=kubeconfig
            )
        extra = {"sleep": sleep} if sleep is not None else {}
        self.reader = KubeReader(
            cluster_name=cluster_name,
            api_client=api_client,
            settings=settings or KubeClientSettings.from_settings(),
            **extra,
        )

    def close(self) -> None:
        """Release the HTTP connections."""
        self.reader.close()

    def _init_containers(self, namespace: str | None) -> set[tuple[str, str, str]]:
        """(namespace, pod, container) of every plain init container."""
        names = set()
        for pod in self.reader.list(kube_client.PODS, namespace=namespace) or ():
            meta = pod.get("metadata") or {}
            for container in (pod.get("spec") or {}).get("initContainers") or ():
                if container.get("restartPolicy") != "Always":
                    names.add(
                        (
                            meta.get("namespace", ""),
                            meta.get("name", ""),
                            container.get("name", ""),
                        )
                    )
        return names

    def fetch_usage(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> UsageGrid:
        """The current sample of each container whose pod was scraped in the range."""
        if not end_s > start_s:
            raise ValueError(f"end_s ({end_s}) must be after start_s ({start_s})")
        items = self.reader.list(
            kube_client.POD_METRICS, namespace=namespace, missing_ok=True
        )
        if items is None:
            raise SourceUnavailable(
                f"cluster {self.cluster_name!r}: metrics.k8s.io/v1beta1 is not "
                "served: is metrics-server installed?"
            )
        init_containers = self._init_containers(namespace)
        series: list[SeriesKey] = []
        cpu: list[float] = []
        memory: list[float] = []
        newest_s = -np.inf
        skipped = 0
        for item in items:
            meta = item.get("metadata") or {}
            pod_ns, pod_name = meta.get("namespace", ""), meta.get("name", "")
            where = f"PodMetrics {pod_ns}/{pod_name}"
            try:
                stamp_s = datetime.fromisoformat(str(item.get("timestamp"))).timestamp()
            except ValueError:
                logger.warning(
                    "cluster %s: %s has no valid timestamp: %r",
                    self.cluster_name,
                    where,
                    item.get("timestamp"),
                )
                skipped += 1
                continue
            if not start_s < stamp_s <= end_s:
                # Already fed (not scraped again since), or in the caller's future.
                continue
            for container in item.get("containers") or ():
                name = container.get("name", "")
                if (pod_ns, pod_name, name) in init_containers:
                    continue
                usage = container.get("usage") or {}
                try:
                    cpu_cores = parse_cpu_millicores(str(usage.get("cpu"))) / 1000.0
                    memory_bytes = float(parse_memory_bytes(str(usage.get("memory"))))
                except ValueError as exc:
                    logger.warning(
                        "cluster %s: %s container %s: %s",
                        self.cluster_name,
                        where,
                        name,
                        exc,
                    )
                    skipped += 1
                    continue
                series.append(SeriesKey(pod_ns, pod_name, name))
                cpu.append(cpu_cores)
                memory.append(memory_bytes)
                newest_s = max(newest_s, stamp_s)
        logger.info(
            "cluster %s: metrics-server gave %d container samples (%d skipped)",
            self.cluster_name,
            len(series),
            skipped,
        )
        if not series:
            return UsageGrid.empty()
        return UsageGrid(
            series=tuple(series),
            timestamp_s=np.array([newest_s], dtype=np.float64),
            cpu_cores=np.array(cpu, dtype=np.float64).reshape(-1, 1),
            memory_bytes=np.array(memory, dtype=np.float64).reshape(-1, 1),
        )

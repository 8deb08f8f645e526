"""Live usage from metrics-server (``metrics.k8s.io/v1beta1`` PodMetrics), for clusters
without Prometheus.

metrics-server keeps only the latest sample per container, so this source has no
history, like upstream's recommender: each call returns the current sample of every
container. CPU is read as upstream does (``MilliValue()`` of the quantity, then cores),
memory as the working-set bytes metrics-server reports."""
# Time: every PodMetrics carries its own ``timestamp`` (pods are scraped node by node).
# Each sample is placed on the caller's step grid at the end of the step holding its
# timestamp (``ceil``), or at ``end_s`` when it was taken after ``end_s`` but less than
# a step later (a refresh's ``end_s`` is the minute boundary before its ``now``: a
# sample taken between the two belongs to this cycle, since metrics-server may replace
# it before the next one). It counts when that time lies in ``(start_s, end_s]``. The
# grid also carries each sample's own time (``observed_at_s``), with which the caller
# feeds only samples no earlier cycle could have seen (``services/refresh/ingest.py``):
# so each sample enters once, whatever second the scheduler runs at. Usually every pod
# falls in one step: a one-column ``UsageGrid``; a scrape straddling a step boundary
# gives two columns, with NaN where a pod has no sample.
#
# Plain init containers are dropped, as upstream drops them. Native sidecars (init
# containers with ``restartPolicy: Always``) run for the pod's whole life and are kept:
# vpaweb recommends for them (a deliberate difference from upstream, which drops every
# init container).

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import numpy as np
from kubernetes import client as k8s

from recommender.cluster import kube_client
from recommender.cluster.kube_client import KubeClientSettings
from recommender.engine.feed import cores_from_millicores
from recommender.engine.quantity import parse_cpu_millicores, parse_memory_bytes
from recommender.errors import SourceUnavailable
from recommender.sources.base import SeriesKey, SourceBase, UsageGrid

logger = logging.getLogger(__name__)

# A refresh asks for its window in day-long chunks; they all see the same live sample,
# so one read serves every chunk of a pass (metrics-server itself refreshes every 15 s
# to 60 s).
CACHE_S = 10.0

_Sample = tuple[SeriesKey, float, float, float]  # key, time, cpu cores, memory bytes


class MetricsServerSource(SourceBase):
    """Reads PodMetrics of one cluster (the ``UsageSource``): live usage only, no
    history of usage, OOM kills, CFS counters or node costs."""

    keeps_history = False
    selects_workloads = False
    keeps_oom_history = False
    counts_throttling = False
    reads_cluster_series = False

    def __init__(
        self,
        *,
        cluster_name: str,
        context: str = "",
        kubeconfig: str | None = None,
        settings: KubeClientSettings | None = None,
        api_client: k8s.ApiClient | None = None,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster_name = cluster_name
        self.reader = kube_client.open_reader(
            cluster_name=cluster_name,
            context=context,
            kubeconfig=kubeconfig,
            settings=settings,
            api_client=api_client,
            sleep=sleep,
        )
        self._clock = clock
        self._cache: tuple[str | None, float, list[_Sample]] | None = None

    def close(self) -> None:
        """Release the HTTP connections."""
        self.reader.close()

    def fetch_usage(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> UsageGrid:
        """The live sample of each container whose step time is in the range."""
        if not end_s > start_s:
            raise ValueError(f"end_s ({end_s}) must be after start_s ({start_s})")
        if not step_s > 0:
            raise ValueError(f"step_s ({step_s}) must be positive")
        picked = []
        for key, stamp_s, cpu_cores, memory_bytes in self._samples(namespace):
            step_time_s = math.ceil(stamp_s / step_s) * step_s
            if end_s < stamp_s < end_s + step_s:
                step_time_s = end_s  # taken since the last boundary, before now
            if start_s < step_time_s <= end_s:
                picked.append((key, step_time_s, cpu_cores, memory_bytes, stamp_s))
        if not picked:
            return UsageGrid.empty()
        times = sorted({sample[1] for sample in picked})
        column = {t: i for i, t in enumerate(times)}
        cpu = np.full((len(picked), len(times)), np.nan)
        memory = np.full((len(picked), len(times)), np.nan)
        for row, (_, step_time_s, cpu_cores, memory_bytes, _) in enumerate(picked):
            cpu[row, column[step_time_s]] = cpu_cores
            memory[row, column[step_time_s]] = memory_bytes
        return UsageGrid(
            series=tuple(sample[0] for sample in picked),
            timestamp_s=np.array(times, dtype=np.float64),
            cpu_cores=cpu,
            memory_bytes=memory,
            observed_at_s=np.array([sample[4] for sample in picked], dtype=np.float64),
        )

    def _samples(self, namespace: str | None) -> list[_Sample]:
        """Every container's live sample, read at most once per ``CACHE_S``."""
        now = self._clock()
        if self._cache is not None:
            cached_namespace, read_at, samples = self._cache
            if cached_namespace == namespace and now - read_at < CACHE_S:
                return samples
        items = self.reader.list(
            kube_client.POD_METRICS, namespace=namespace, missing_ok=True
        )
        if items is None:
            raise SourceUnavailable(
                f"cluster {self.cluster_name!r}: metrics.k8s.io/v1beta1 is not "
                "served: is metrics-server installed?"
            )
        samples = self._parse(items, self._init_containers(namespace))
        self._cache = (namespace, now, samples)
        return samples

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

    def _parse(
        self, items: list[dict[str, Any]], init_containers: set[tuple[str, str, str]]
    ) -> list[_Sample]:
        samples: list[_Sample] = []
        skipped = 0
        for item in items:
            meta = item.get("metadata") or {}
            namespace, pod = meta.get("namespace", ""), meta.get("name", "")
            where = f"PodMetrics {namespace}/{pod}"
            try:
                stamp = datetime.fromisoformat(str(item.get("timestamp")))
                if stamp.tzinfo is None:
                    raise ValueError("no time zone")
            except ValueError:
                logger.warning(
                    "cluster %s: %s has no valid timestamp: %r",
                    self.cluster_name,
                    where,
                    item.get("timestamp"),
                )
                skipped += 1
                continue
            for container in item.get("containers") or ():
                name = container.get("name", "")
                if (namespace, pod, name) in init_containers:
                    continue
                usage = container.get("usage") or {}
                try:
                    # Whole millicores, kept whole through the engine's truncation.
                    millicores = parse_cpu_millicores(str(usage.get("cpu")))
                    cpu_cores = float(cores_from_millicores(np.array([millicores]))[0])
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
                key = SeriesKey(namespace, pod, name)
                samples.append((key, stamp.timestamp(), cpu_cores, memory_bytes))
        logger.info(
            "cluster %s: metrics-server gave %d container samples (%d skipped)",
            self.cluster_name,
            len(samples),
            skipped,
        )
        return samples

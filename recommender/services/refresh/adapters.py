"""Which cluster adapter and usage source serve a ``Cluster`` row: one small dispatch.

Services get adapters and sources only through these two functions, so adding a kind of
cluster (or a source) is one branch here and nothing else.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from recommender.cluster.base import ClusterAdapter
from recommender.cluster.kubernetes import KubernetesAdapter
from recommender.cluster.simulated import SimulatedCluster, build_fleet
from recommender.errors import InvalidInput
from recommender.models import Cluster
from recommender.services.actuation.simulated_store import overrides_of
from recommender.services.admission.review import simulated_admission
from recommender.sources.base import UsageSource
from recommender.sources.metrics_server import MetricsServerSource
from recommender.sources.prometheus import PrometheusSource
from recommender.sources.prometheus_config import PrometheusConfig
from recommender.sources.simulated import SimulatedUsageSource

logger = logging.getLogger(__name__)


def cluster_adapter_for(
    cluster: Cluster,
    *,
    now: datetime | None = None,
    namespace: str | None = None,
    flush_admissions: bool = True,
) -> ClusterAdapter:
    """The (read-only) adapter of ``cluster``, or of one of its namespaces (a shard).

    ``flush_admissions=False``: a simulated cluster's admissions of new pods are
    counted in memory only; the caller flushes them (``cycle.discover_and_store``
    does, once per pass, instead of a statement per pod).

    ``now`` is when the simulated cluster is observed (its pods come and go with
    time); a real cluster is always observed as it is. With ``namespace`` the adapter
    lists only that namespace, so a shard never reads the whole cluster.
    """
    if cluster.kind == Cluster.Kind.SIMULATED:
        fleet = build_fleet(settings.SIMULATION_SEED, settings.SIMULATION_WORKLOADS)
        return SimulatedCluster(
            name=cluster.name,
            fleet=fleet,
            now=now or timezone.now(),
            namespace=namespace,
            # New pods go through the webhook's service, as in a real cluster.
            admit=simulated_admission(cluster.name, flush=flush_admissions),
            admit_window_s=2.0 * settings.REFRESH_INTERVAL_S,
            # Resizes and evictions the updater wrote (services/actuation).
            overrides=overrides_of(cluster),
            namespace_selector=cluster.namespace_selector,
        )
    if cluster.kind == Cluster.Kind.KUBERNETES:
        return KubernetesAdapter(
            cluster_name=cluster.name,
            context=cluster.context,
            namespace=namespace,
            namespace_selector=cluster.namespace_selector,
        )
    raise InvalidInput(
        f"cluster {cluster.name!r}: no adapter for kind {cluster.kind!r}", field="kind"
    )


def usage_source_for(cluster: Cluster) -> UsageSource:
    """The source of usage history for ``cluster``."""
    if cluster.kind == Cluster.Kind.SIMULATED:
        fleet = build_fleet(settings.SIMULATION_SEED, settings.SIMULATION_WORKLOADS)
        return SimulatedUsageSource(fleet=fleet)
    if cluster.kind == Cluster.Kind.KUBERNETES and settings.PROMETHEUS_URL:
        # History (8-day back-fill, OOM kills) from Prometheus when one is configured.
        return PrometheusSource(PrometheusConfig.from_settings())
    if cluster.kind == Cluster.Kind.KUBERNETES:
        # No Prometheus: live samples from metrics-server, no history (as upstream).
        return MetricsServerSource(cluster_name=cluster.name, context=cluster.context)
    raise InvalidInput(
        f"cluster {cluster.name!r}: no usage source for kind {cluster.kind!r}",
        field="kind",
    )


def close_quietly(*resources: object) -> None:
    """Close adapters and sources that have ``close()``; a failing close is logged."""
    for resource in resources:
        close = getattr(resource, "close", None)
        if close is None:
            continue
        try:
            close()
        except Exception:
            logger.warning("closing %r failed", resource, exc_info=True)

"""Everything ``advise_pod`` reads from the database, for many pods at once.

A right-size request of 500 manifests must not cost 500 x 5 queries: ``prefetch_advice``
reads the workloads of all the pods' owners, their containers' latest recommendations,
their namespaces' LimitRanges and the static coefficients in a fixed number of queries
(at most five, whatever the number of pods), and ``AdviceLookup`` answers from memory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from recommender.errors import InvalidInput, NotFound
from recommender.models import (
    Cluster,
    Container,
    NamespaceLimitRange,
    Recommendation,
    StaticCoefficient,
    Workload,
)
from recommender.services.advice.limits import LimitRangePair, item_from_dict

# (namespace, owner kind, owner name) of one pod; kind and name may be unknown.
PodKey = tuple[str, str | None, str | None]


@dataclass(frozen=True)
class AdviceLookup:
    """The rows advice needs for a known set of pods, already read."""

    cluster: str | None
    cluster_exists: bool
    workloads: dict[tuple[str, str, str], list[Workload]] = field(default_factory=dict)
    latest: dict[int, dict[str, Recommendation]] = field(default_factory=dict)
    limit_ranges: dict[tuple[int, str], LimitRangePair] = field(default_factory=dict)
    coefficients: dict[str, StaticCoefficient] = field(default_factory=dict)

    def check_cluster(self) -> None:
        """NotFound when the request named a cluster that does not exist."""
        if self.cluster and not self.cluster_exists:
            raise NotFound(f"cluster {self.cluster!r} does not exist")

    def workload(self, *, namespace: str, kind: str, name: str) -> Workload | None:
        """The active workload with this natural key, or None.

        Only active workloads match: a deleted workload's last recommendation is stale,
        so a key that only an inactive (deleted) workload has is treated as unknown
        (static coefficient, or unchanged), and it never makes a key ambiguous. Raises
        NotFound for an unknown cluster and InvalidInput when the key is ambiguous.
        """
        self.check_cluster()
        found = self.workloads.get((namespace, kind, name), [])
        if len(found) > 1:
            names = ", ".join(sorted(w.cluster.name for w in found))
            raise InvalidInput(
                f"{namespace}/{kind}/{name} exists in several clusters ({names}); "
                "say which with the cluster parameter",
                field="cluster",
            )
        return found[0] if found else None

    def latest_of(self, workload: Workload) -> dict[str, Recommendation]:
        """Container name -> latest recommendation, for the containers that have one."""
        return self.latest.get(workload.pk, {})

    def limit_ranges_of(self, workload: Workload) -> LimitRangePair:
        """The combined (Container, Pod) LimitRange items of its namespace."""
        return self.limit_ranges.get(
            (workload.cluster_id, workload.namespace), (None, None)
        )

    def coefficient_for(self, namespace: str) -> StaticCoefficient | None:
        """The namespace's coefficient, else the global one (""), else None."""
        return self.coefficients.get(namespace) or self.coefficients.get("")


def prefetch_advice(*, pods: Iterable[PodKey], cluster: str | None) -> AdviceLookup:
    """Read what advising ``pods`` needs in at most five queries."""
    keys = list(pods)
    cluster_exists = bool(cluster) and Cluster.objects.filter(name=cluster).exists()
    namespaces = {namespace for namespace, _, _ in keys}
    owners = {(ns, kind, name) for ns, kind, name in keys if kind and name}
    workloads: dict[tuple[str, str, str], list[Workload]] = defaultdict(list)
    if owners and (not cluster or cluster_exists):
        rows = Workload.objects.select_related("cluster", "policy").filter(
            namespace__in={ns for ns, _, _ in owners},
            kind__in={kind for _, kind, _ in owners},
            name__in={name for _, _, name in owners},
            is_active=True,
        )
        if cluster:
            rows = rows.filter(cluster__name=cluster)
        for workload in rows.order_by("pk"):
            key = (workload.namespace, workload.kind, workload.name)
            if key in owners:  # the three IN lists also match mixed keys
                workloads[key].append(workload)
    matched = [w for found in workloads.values() for w in found]
    latest: dict[int, dict[str, Recommendation]] = defaultdict(dict)
    limit_ranges: dict[tuple[int, str], LimitRangePair] = {}
    if matched:
        containers = Container.objects.filter(
            workload_id__in=[w.pk for w in matched],
            latest_recommendation__isnull=False,
        ).select_related("latest_recommendation")
        for container in containers:
            if container.latest_recommendation is not None:
                latest[container.workload_id][container.name] = (
                    container.latest_recommendation
                )
        wanted = {(w.cluster_id, w.namespace) for w in matched}
        for row in NamespaceLimitRange.objects.filter(
            cluster_id__in={cluster_id for cluster_id, _ in wanted},
            namespace__in={namespace for _, namespace in wanted},
        ):
            if (row.cluster_id, row.namespace) in wanted:
                limit_ranges[(row.cluster_id, row.namespace)] = (
                    item_from_dict(row.container_item),
                    item_from_dict(row.pod_item),
                )
    coefficients = {
        row.namespace: row
        for row in StaticCoefficient.objects.filter(namespace__in=[*namespaces, ""])
    }
    return AdviceLookup(
        cluster=cluster,
        cluster_exists=cluster_exists,
        workloads=dict(workloads),
        latest=dict(latest),
        limit_ranges=limit_ranges,
        coefficients=coefficients,
    )

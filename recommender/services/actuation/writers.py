"""Which ``ClusterWriter`` the updater writes to a ``Cluster`` row with: the one
dispatch (simulated or Kubernetes).

The updater cycle (``apply.run_cycle``) asks for a writer only after
``control.write_block_reason`` said the cluster's writes are allowed, so "Off means
off" has one door for the updater. The webhook's registration is the one other writer:
it opens a Kubernetes writer itself (``admission/registration.py``).
"""

from __future__ import annotations

from datetime import datetime

from recommender.cluster.base import ClusterSnapshot
from recommender.cluster.kube_writer import KubernetesWriter
from recommender.cluster.simulated_writer import SimulatedWriter
from recommender.cluster.writer import ClusterWriter
from recommender.errors import Conflict, InvalidInput
from recommender.models import Cluster
from recommender.services.actuation.simulated_store import DatabasePodStore
from recommender.services.admission.review import simulated_admission


def cluster_writer_for(
    cluster: Cluster, *, snapshot: ClusterSnapshot, now: datetime
) -> ClusterWriter:
    """The writer of ``cluster``; ``snapshot`` is what the simulated one holds.
    Conflict for a cluster whose actuation an operator has not allowed."""
    if not cluster.actuation_allowed:
        raise Conflict(f"actuation is not allowed for cluster {cluster.name}")
    if cluster.kind == Cluster.Kind.SIMULATED:
        # An evicted pod is recreated through the admission webhook's own service.
        return SimulatedWriter(
            store=DatabasePodStore(
                cluster=cluster,
                snapshot=snapshot,
                now=now,
                admit=simulated_admission(cluster.name, clock=lambda: now),
            )
        )
    if cluster.kind == Cluster.Kind.KUBERNETES:
        return KubernetesWriter(cluster_name=cluster.name, context=cluster.context)
    raise InvalidInput(
        f"cluster {cluster.name!r}: no writer for kind {cluster.kind!r}", field="kind"
    )

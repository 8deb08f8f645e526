"""Registering clusters: a Cluster row is created only once vpaweb can read it."""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from recommender.cluster.kube_client import in_pod
from recommender.cluster.kubernetes import KubernetesAdapter
from recommender.errors import Conflict, InvalidInput
from recommender.models import Cluster

logger = logging.getLogger(__name__)


def add_kubernetes_cluster(
    *, name: str, context: str = "", in_cluster: bool = False
) -> tuple[Cluster, str]:
    """Check that the cluster answers (version, one pod), then store it; returns the
    row and the server's version.

    ``context`` names a kubeconfig context (``KUBECONFIG``); ``in_cluster`` uses the
    pod's service account, stored as an empty context.
    """
    if not name or slugify(name) != name:
        raise InvalidInput(
            f"cluster name {name!r} must be a slug: lower-case letters, digits and "
            "hyphens",
            field="name",
        )
    if in_cluster and context:
        raise InvalidInput(
            "give either a kubeconfig context or in-cluster, not both", field="context"
        )
    if not in_cluster and not context:
        raise InvalidInput(
            "give a kubeconfig context, or in-cluster when running in a pod",
            field="context",
        )
    if in_cluster and not in_pod():
        raise InvalidInput(
            "in-cluster config needs a pod's service account "
            "(KUBERNETES_SERVICE_HOST and a mounted token); use a kubeconfig context",
            field="in_cluster",
        )
    if Cluster.objects.filter(name=name).exists():
        raise Conflict(f"a cluster named {name!r} exists already")
    # Raises SourceUnavailable, naming the cluster and what failed, before any row.
    adapter = KubernetesAdapter(cluster_name=name, context=context)
    try:
        version = adapter.check_connection()
    finally:
        adapter.close()
    try:
        with transaction.atomic():
            cluster = Cluster.objects.create(
                name=name, kind=Cluster.Kind.KUBERNETES, context=context
            )
    except IntegrityError:
        raise Conflict(f"a cluster named {name!r} exists already") from None
    logger.info(
        "added cluster %s (id %s, Kubernetes %s, context %r)",
        name,
        cluster.pk,
        version,
        context or "(in-cluster)",
    )
    return cluster, version

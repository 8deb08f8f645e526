"""Registering clusters: a Cluster row is created only once vpaweb can read it."""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction
from django.utils.text import slugify

from recommender.cluster import label_selector
from recommender.cluster.kube_client import in_pod
from recommender.errors import Conflict, InvalidInput
from recommender.models import Cluster
from recommender.services.connections import kubernetes_version

logger = logging.getLogger(__name__)

# Cluster.namespace_selector's max_length.
MAX_NAMESPACE_SELECTOR = 1000


def checked_namespace_selector(text: str) -> str:
    """A namespace opt-in selector, stripped; ``InvalidInput`` naming what is wrong.

    Empty means the whole cluster; otherwise a label selector as ``kubectl -l``
    takes it, e.g. ``vpaweb.io/enabled=true`` (docs/kubernetes.md).
    """
    text = (text or "").strip()
    try:
        label_selector.parse(text)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="namespace_selector") from None
    if len(text) > MAX_NAMESPACE_SELECTOR:
        raise InvalidInput(
            f"the namespace selector is longer than {MAX_NAMESPACE_SELECTOR} "
            "characters",
            field="namespace_selector",
        )
    return text


def add_kubernetes_cluster(
    *,
    name: str,
    context: str = "",
    in_cluster: bool = False,
    namespace_selector: str = "",
) -> tuple[Cluster, str]:
    """Check that the cluster answers (version, one pod, and the namespaces the
    selector picks), then store it; returns the row and the server's version.

    ``context`` names a kubeconfig context (``KUBECONFIG``); ``in_cluster`` uses the
    pod's service account, stored as an empty context. ``namespace_selector`` (e.g.
    ``vpaweb.io/enabled=true``) reads only the namespaces it selects.
    """
    namespace_selector = checked_namespace_selector(namespace_selector)
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
    version = kubernetes_version(
        Cluster(
            name=name,
            kind=Cluster.Kind.KUBERNETES,
            context=context,
            namespace_selector=namespace_selector,
        )
    )
    try:
        with transaction.atomic():
            cluster = Cluster.objects.create(
                name=name,
                kind=Cluster.Kind.KUBERNETES,
                context=context,
                namespace_selector=namespace_selector,
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

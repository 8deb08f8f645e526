"""Labels of the simulated cluster's namespaces and workloads: teams (for rollups by
label) and the namespaces that opted in to vpaweb (for ``Cluster.namespace_selector``).

Derived from names only (no random draw), so adding labels never changes a fleet.
"""

from __future__ import annotations

import hashlib


def _hash(*parts: object) -> int:
    digest = hashlib.blake2b(
        "\x1f".join(map(str, parts)).encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "little")


# The team owning each namespace (workloads' ``team`` label, for rollups by label);
# node-level DaemonSets belong to the platform team.
TEAMS = {
    "payments": "payments",
    "checkout": "storefront",
    "search": "discovery",
    "catalog": "discovery",
    "platform": "platform",
    "data": "data",
    "monitoring": "platform",
    "web": "storefront",
}
TEAM_LABEL = "team"
PART_OF_LABEL = "app.kubernetes.io/part-of"
# Namespaces that opted in to vpaweb the Goldilocks way (a cluster's
# ``namespace_selector``, e.g. vpaweb.io/enabled=true), as their labels say.
OPTED_IN_LABEL = "vpaweb.io/enabled"
OPTED_IN_NAMESPACES = ("payments", "checkout", "web")


def namespace_labels(namespace: str) -> dict[str, str]:
    """A simulated namespace's labels (the API server always sets the name label)."""
    labels = {"kubernetes.io/metadata.name": namespace}
    if namespace in TEAMS:
        labels[TEAM_LABEL] = TEAMS[namespace]
    if namespace in OPTED_IN_NAMESPACES:
        labels[OPTED_IN_LABEL] = "true"
    return labels


def workload_labels(kind: str, namespace: str, name: str) -> dict[str, str]:
    """A simulated workload's labels: its app, the product it is part of and, for
    nine in ten, its team (node agents belong to the platform team)."""
    labels = {
        "app": name,
        PART_OF_LABEL: name.split("-", 1)[0],
    }
    if _hash("team", namespace, name) % 10:
        team = "platform" if kind == "DaemonSet" else TEAMS.get(namespace, namespace)
        labels[TEAM_LABEL] = team
    return labels

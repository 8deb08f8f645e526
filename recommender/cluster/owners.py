"""Owner chains: from a pod (or any controller) up to its top-most well-known
controller.

Follows ``metadata.ownerReferences[controller=true]`` the way upstream VPA's controller
fetcher does (``FindTopMostWellKnownOrScalable``): pod → ReplicaSet → Deployment, pod →
Job → CronJob. An object owned by a well-known controller is not itself a workload (a
ReplicaSet of a Deployment, a Job of a CronJob). When the owner is a kind we do not list
(an operator's custom resource, say an Argo Rollout owning ReplicaSets), the chain stops
at the last well-known controller; upstream would go on through the ``/scale``
subresource, which needs a request per owner. Objects are the API's JSON dicts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

# Upstream's well-known controllers (``wellKnownController`` in
# ``pkg/target/controller_fetcher/controller_fetcher.go``), by kind and API group.
WELL_KNOWN_GROUPS: dict[str, str] = {
    "Deployment": "apps",
    "StatefulSet": "apps",
    "DaemonSet": "apps",
    "ReplicaSet": "apps",
    "Job": "batch",
    "CronJob": "batch",
    "ReplicationController": "",
}
# Owner chains are a handful of links deep; this only guards against a reference cycle.
MAX_DEPTH = 10

Obj = dict[str, Any]


def controller_ref(obj: Obj) -> Obj | None:
    """The owner reference with ``controller: true`` (``metav1.GetControllerOf``)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def _api_group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def is_well_known(ref: Obj) -> bool:
    """True when an owner reference names a well-known kind of its usual group."""
    kind = ref.get("kind", "")
    return (
        kind in WELL_KNOWN_GROUPS
        and _api_group(ref.get("apiVersion", "")) == (WELL_KNOWN_GROUPS[kind])
    )


class OwnerIndex:
    """The listed controllers of a cluster: owner chains without further requests."""

    def __init__(self, controllers: Mapping[str, Iterable[Obj]]) -> None:
        self._by_uid: dict[str, tuple[str, Obj]] = {}
        self._by_name: dict[tuple[str, str, str], tuple[str, Obj]] = {}
        for kind, objects in controllers.items():
            for obj in objects:
                meta = obj.get("metadata") or {}
                entry = (kind, obj)
                if meta.get("uid"):
                    self._by_uid[meta["uid"]] = entry
                self._by_name[
                    (kind, meta.get("namespace", ""), meta.get("name", ""))
                ] = entry

    def owner_of(self, obj: Obj) -> tuple[str, Obj] | None:
        """The listed controller owning ``obj`` (by uid, then by kind and name)."""
        ref = controller_ref(obj)
        if ref is None:
            return None
        found = self._by_uid.get(ref.get("uid", ""))
        if found is None and is_well_known(ref):
            namespace = (obj.get("metadata") or {}).get("namespace", "")
            found = self._by_name.get(
                (ref.get("kind", ""), namespace, ref.get("name", ""))
            )
        return found

    def top_controller(self, kind: str, obj: Obj) -> tuple[str, Obj] | None:
        """The top-most well-known controller of ``obj`` (itself if it has no such
        owner).

        None when ``obj`` is a pod with no well-known controller, or when its chain
        leads to a well-known owner that is not listed (being deleted): such pods belong
        to no workload.
        """
        current: tuple[str, Obj] | None = (
            (kind, obj) if kind in WELL_KNOWN_GROUPS else None
        )
        link: Obj = obj
        for _ in range(MAX_DEPTH):
            ref = controller_ref(link)
            if ref is None:
                return current
            owner = self.owner_of(link)
            if owner is None:
                if is_well_known(ref):
                    # The owner exists in the API's eyes but not in our lists:
                    # mid-deletion, or it appeared after we listed it. Wait for the next
                    # pass.
                    return None
                return current
            current = owner
            link = owner[1]
        meta = obj.get("metadata") or {}
        logger.warning(
            "owner chain of %s %s/%s is deeper than %d links; stopping there",
            kind,
            meta.get("namespace", ""),
            meta.get("name", ""),
            MAX_DEPTH,
        )
        return current

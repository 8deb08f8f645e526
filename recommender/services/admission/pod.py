"""The received pod's containers as the webhook reads them: each with where it sits in
the object (``containers`` or ``initContainers``, its index), so the decision advises
them and the patch writes back at the same place."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from recommender.engine.limits import ContainerResources
from recommender.engine.resources import Resources
from recommender.errors import InvalidInput
from recommender.services.advice.pod_spec import parse_resource_list


@dataclass(frozen=True)
class PodContainerRef:
    """A container of the received pod, with where it sits in the object."""

    list_key: str  # "containers" or "initContainers" (native sidecars only)
    index: int
    name: str
    requests: Resources
    limits: Resources
    raw: Mapping[str, Any]

    def as_engine(self) -> ContainerResources:
        """The engine's view of its current requests and limits."""
        return ContainerResources(
            name=self.name, requests=self.requests, limits=self.limits
        )


def read_containers(spec: object) -> list[PodContainerRef]:
    """The pod's containers and native sidecars; plain init containers are skipped.

    Raises InvalidInput naming the path of a malformed part.
    """
    if not isinstance(spec, Mapping):
        raise InvalidInput("object.spec must be a pod spec", field="object.spec")
    found: list[PodContainerRef] = []
    for key in ("containers", "initContainers"):
        items = spec.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise InvalidInput(f"spec.{key} must be a list", field=f"spec.{key}")
        for index, item in enumerate(items):
            path = f"spec.{key}[{index}]"
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise InvalidInput(f"{path} must be a named container", field=path)
            if key == "initContainers" and item.get("restartPolicy") != "Always":
                continue
            resources = item.get("resources") or {}
            if not isinstance(resources, Mapping):
                raise InvalidInput(
                    f"{path}.resources must be a mapping", field=f"{path}.resources"
                )
            found.append(
                PodContainerRef(
                    list_key=key,
                    index=index,
                    name=item["name"],
                    requests=parse_resource_list(
                        resources.get("requests"), field=f"{path}.resources.requests"
                    ),
                    limits=parse_resource_list(
                        resources.get("limits"), field=f"{path}.resources.limits"
                    ),
                    raw=item,
                )
            )
    return found

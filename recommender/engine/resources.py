"""Resource amounts as upstream keeps them: int64 CPU millicores, int64 memory bytes.

A missing resource is ``None`` (upstream: the key is absent from the ResourceList).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

CPU = "cpu"
MEMORY = "memory"
RESOURCE_NAMES = (CPU, MEMORY)

# model.MaxResourceAmount in upstream VPA (recommender/model/types.go).
MAX_RESOURCE_AMOUNT = 10**14


@dataclass(frozen=True)
class Resources:
    """CPU in millicores and memory in bytes; ``None`` means the resource is absent."""

    cpu_millicores: int | None = None
    memory_bytes: int | None = None

    def get(self, resource: str) -> int | None:
        """Return the amount of ``resource`` ("cpu" or "memory")."""
        if resource == CPU:
            return self.cpu_millicores
        if resource == MEMORY:
            return self.memory_bytes
        raise ValueError(f"resource must be 'cpu' or 'memory', not {resource!r}")

    def with_amount(self, resource: str, amount: int | None) -> Resources:
        """Return a copy with ``resource`` set to ``amount``."""
        if resource == CPU:
            return replace(self, cpu_millicores=amount)
        if resource == MEMORY:
            return replace(self, memory_bytes=amount)
        raise ValueError(f"resource must be 'cpu' or 'memory', not {resource!r}")

    def only(self, resources: tuple[str, ...] | list[str]) -> Resources:
        """Keep only the named resources (upstream's controlledResources filter)."""
        return Resources(
            cpu_millicores=self.cpu_millicores if CPU in resources else None,
            memory_bytes=self.memory_bytes if MEMORY in resources else None,
        )

    def is_empty(self) -> bool:
        """True when neither resource is present."""
        return self.cpu_millicores is None and self.memory_bytes is None

    def to_dict(self) -> dict[str, int]:
        """``{"cpu": millicores, "memory": bytes}`` with absent resources left out."""
        out: dict[str, int] = {}
        if self.cpu_millicores is not None:
            out[CPU] = self.cpu_millicores
        if self.memory_bytes is not None:
            out[MEMORY] = self.memory_bytes
        return out


# A shared empty value, for dataclass and argument defaults (Resources is frozen).
NO_RESOURCES = Resources()

"""First contact in chunks of containers: memory bounded whatever the fleet's size.

A container met for the first time (no watermark: a new fleet, a new workload, an
expired checkpoint) reads its whole history. Done for the whole fleet at once, the
usage grids, the engine state and the rows of every container are in memory together,
which grows with the fleet (4.6 GB at 9,000 containers). ``plan`` cuts those
workloads into chunks of about ``VPAWEB_FIRST_CONTACT_CHUNK_CONTAINERS`` containers;
the cycle (``cycle.ingest_fleet``) ingests, recommends and stores each chunk as a window
of its own, reading from the source the usage of that chunk's workloads only."""
# A workload is never split (its containers share the pod minimum), and each container's
# result depends only on its own samples and OOM kills, so chunked results equal
# unchunked ones exactly (``tests/services/test_refresh_chunks.py``). Only sources that
# can read the usage of chosen workloads (``fetch_workload_usage``: the simulated one)
# are read in chunks; for the others a chunk would read the whole namespace again, so
# their first contact stays one window.

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import Any

from recommender.models import Checkpoint, Container
from recommender.services.refresh.discovery import Discovery


def can_select_workloads(source: object) -> bool:
    """True when the source reads the usage of chosen workloads only."""
    return callable(getattr(source, "fetch_workload_usage", None))


def fresh_workloads(discovery: Discovery) -> set[int]:
    """Discovered workloads with a container whose checkpoint has no watermark."""
    rows = Checkpoint.objects.filter(
        container__workload__cluster=discovery.cluster,
        container__workload__is_active=True,
        last_sample_at__isnull=True,
    )
    if discovery.namespace is not None:
        rows = rows.filter(container__workload__namespace=discovery.namespace)
    found = set(rows.values_list("container__workload_id", flat=True).distinct())
    return found & discovery.spec_names.keys()


def plan(
    discovery: Discovery, workload_ids: Collection[int], chunk_containers: int
) -> list[list[int]]:
    """``workload_ids`` (by id) in chunks of at most ``chunk_containers`` non-init
    containers each; a larger workload is a chunk of its own."""
    chunks: list[list[int]] = []
    current: list[int] = []
    size = 0
    for workload_id in sorted(workload_ids):
        count = sum(
            1
            for _name, kind in discovery.spec_names.get(workload_id, ())
            if kind != Container.Kind.INIT
        )
        if current and size + count > chunk_containers:
            chunks.append(current)
            current, size = [], 0
        current.append(workload_id)
        size += count
    if current:
        chunks.append(current)
    return chunks


def restrict(discovery: Discovery, workload_ids: Sequence[int]) -> Discovery:
    """``discovery`` seen as holding ``workload_ids`` only: the window of one chunk.

    Its ``chunk_keys`` tell the source which workloads to read.
    """
    wanted = set(workload_ids)
    return dataclasses.replace(
        discovery,
        spec_names={w: discovery.spec_names[w] for w in workload_ids},
        chunk_keys=frozenset(
            key for key, w in discovery.workload_by_key.items() if w in wanted
        ),
    )


def add_counts(total: dict[str, Any], part: dict[str, Any]) -> None:
    """Add the counts of one chunk's window to the cycle's."""
    for name, value in part.items():
        if name == "error_samples":
            total[name] = (total.get(name, []) + list(value))[:5]
        elif name == "series_unmatched":
            total[name] = max(total.get(name, 0), value)
        elif isinstance(value, int | float):
            total[name] = total.get(name, 0) + value
        else:
            total[name] = value

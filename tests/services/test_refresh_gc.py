"""A refresh and Python's cyclic garbage collector: a steady cycle's reads are freed
by reference counting (no reference cycle holds them), and what a cycle leaves alive
is frozen out of later collections, collected in full once every
``FULL_COLLECTION_EVERY_S`` (``cycle.cyclic_gc_paused``)."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest

from recommender.models import RefreshRun
from recommender.services.refresh import cycle
from recommender.services.refresh.cycle import cyclic_gc_paused, refresh_cluster
from tests.services.test_refresh_scale import NOW, fleet_in_windows


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector on, nothing frozen, before and after the test."""
    was_enabled = gc.isenabled()
    gc.enable()
    gc.unfreeze()
    yield
    gc.unfreeze()
    if not was_enabled:
        gc.disable()


def _cyclic_garbage() -> Counter[str]:
    """What only the cyclic collector would free now (the frozen objects included),
    by type name; freed."""
    gc.unfreeze()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return Counter(type(found).__qualname__ for found in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()


@pytest.mark.django_db
def test_a_steady_cycle_in_windows_leaves_no_reference_cycle_holding_its_reads(
    settings, collector
):
    cluster = fleet_in_windows(settings, "garbage")
    _cyclic_garbage()

    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert run.counts["steady_windows"] > 1  # the windows shared their reads
    garbage = _cyclic_garbage()
    held = {"SharedReads", "Discovery", "PodOwners", "SharedHistory", "RunRecorder"}
    assert not {name: garbage[name] for name in held if garbage[name]}


def test_what_the_block_leaves_alive_is_frozen_and_collected_in_full_hourly(
    collector, monkeypatch
):
    monkeypatch.setattr(cycle, "_full_collection_at", cycle.time.monotonic())
    kept: list[object] = []
    with cyclic_gc_paused():
        assert not gc.isenabled()
        kept.append([[] for _ in range(1000)])
    assert gc.isenabled()
    assert gc.get_freeze_count() >= 1001

    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections.append(info["generation"])

    an_hour_ago = cycle.time.monotonic() - cycle.FULL_COLLECTION_EVERY_S
    monkeypatch.setattr(cycle, "_full_collection_at", an_hour_ago)
    gc.callbacks.append(seen)
    try:
        with cyclic_gc_paused():
            kept.append([])
    finally:
        gc.callbacks.remove(seen)
    assert gc.get_freeze_count() == 0
    assert 2 in collections  # a full collection
    assert gc.isenabled()


def test_what_a_failed_block_leaves_is_not_frozen(collector, monkeypatch):
    """A failed block's traceback holds its frames: left to the collector, which frees
    them once the error is handled, not frozen for an hour."""
    monkeypatch.setattr(cycle, "_full_collection_at", cycle.time.monotonic())

    with pytest.raises(RuntimeError), cyclic_gc_paused():
        rows = [[] for _ in range(1000)]  # noqa: F841 (held by the frame)
        raise RuntimeError("source down")

    assert gc.get_freeze_count() == 0
    assert gc.isenabled()

"""The refresh as named steps: the window plans of its three uses, the pure choice of
the checkpoints a window writes, and the usage sources' declared capabilities (a
source is asked only for what it declares)."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta

import pytest

from recommender.cluster.base import OomKill
from recommender.cluster.simulated import build_fleet
from recommender.engine.profiles import get_profile
from recommender.models import Cluster, Policy, RefreshRun
from recommender.roles import Role
from recommender.services.policy.changes import update_policy
from recommender.services.refresh import cycle
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.ingest import CheckpointRef, ContainerRef, Row
from recommender.services.refresh.plan import (
    CheckpointSchedule,
    WindowPlan,
    choose_checkpoints,
)
from recommender.sources.base import UsageSource
from recommender.sources.metrics_server import MetricsServerSource
from recommender.sources.prometheus import PrometheusSource
from recommender.sources.simulated import SimulatedUsageSource
from tests.factories import make_user

NOW = datetime(2026, 11, 21, 12, 0, 30, tzinfo=UTC)
END = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SCHEDULE = CheckpointSchedule(interval_s=600.0, timeout_s=10.0)


def row(
    pk: int,
    *,
    written_ago_s: float = 3600.0,
    watermark: datetime | None = END - timedelta(minutes=1),
    key: str = "k",
    is_fed: bool = True,
    is_rebuilt: bool = False,
    ooms: int = 0,
) -> Row:
    """A window's row whose checkpoint was last written ``written_ago_s`` before NOW."""
    kill = OomKill(
        namespace="ns", pod="p", container="c", occurred_at=END, memory_request_bytes=1
    )
    return Row(
        container=ContainerRef(
            pk=pk,
            workload_id=1,
            name=f"c{pk}",
            namespace="ns",
            workload="ns/Deployment/w",
            latest_recommendation_id=None,
            latest_values=None,
        ),
        checkpoint=CheckpointRef(
            pk=pk,
            version=1,
            histogram_key=key,
            last_sample_at=watermark,
            updated_at=NOW - timedelta(seconds=written_ago_s),
            has_state=True,
        ),
        profile=get_profile("vpa"),
        key_text="k",
        container_policy=None,
        containers_in_pod=1,
        start_s=0.0,
        is_fed=is_fed,
        is_rebuilt=is_rebuilt,
        ooms=[kill] * ooms,
    )


def pks(rows: list[Row]) -> list[int]:
    return [r.checkpoint.pk for r in rows]


def test_without_a_schedule_every_checkpoint_behind_the_window_is_written():
    up_to_date = row(3, watermark=END, is_fed=False)
    choice = choose_checkpoints(
        [row(1), row(2, written_ago_s=0), up_to_date],
        end_at=END,
        now=NOW,
        schedule=None,
        batch=2,
    )
    assert pks(choice.now) == [1, 2]
    assert choice.due == []
    assert choice.behind == 2


def test_material_checkpoints_go_now_and_due_ones_oldest_first_in_batches():
    rows = [
        row(1, written_ago_s=700),
        row(2, written_ago_s=60),  # not due: written a minute ago
        row(3, written_ago_s=5000),
        row(4, written_ago_s=60, is_rebuilt=True),  # material, however recent
        row(5, written_ago_s=60, ooms=1),  # an OOM kill to store with it
        row(6, written_ago_s=60, key="old"),  # a new histogram key
        row(7, written_ago_s=60, watermark=None),  # no watermark yet
        row(8, written_ago_s=900),
        row(9, written_ago_s=600),  # exactly due
        row(10, watermark=END, is_fed=False),  # not behind at all
    ]
    choice = choose_checkpoints(rows, end_at=END, now=NOW, schedule=SCHEDULE, batch=2)
    assert pks(choice.now) == [4, 5, 6, 7]
    assert [pks(batch) for batch in choice.due] == [[3, 8], [1, 9]]
    assert choice.behind == 9


def test_a_row_fed_nothing_with_its_watermark_behind_is_still_behind():
    choice = choose_checkpoints(
        [row(1, is_fed=False)], end_at=END, now=NOW, schedule=None, batch=10
    )
    assert pks(choice.now) == [1]


def test_the_minute_cycle_plan_follows_whether_the_source_keeps_history(settings):
    settings.CHECKPOINT_INTERVAL_S = 300
    settings.CHECKPOINTS_TIMEOUT_S = 20
    kill = OomKill(
        namespace="ns", pod="p", container="c", occurred_at=END, memory_request_bytes=1
    )
    common = {"now": NOW, "history_s": 86400.0, "snapshot_kills": [kill]}
    kept = WindowPlan.minute_cycle(
        **common, live_pods={1: {"p"}}, source_keeps_history=True
    )
    assert kept.checkpoints == CheckpointSchedule(interval_s=300.0, timeout_s=20.0)
    assert kept.keeps_engine_rows and kept.recommend
    assert kept.snapshot_kills == (kill,)
    assert kept.live_pods == {1: {"p"}}
    assert not kept.chunks_every_workload
    assert kept.end_s == END.timestamp()  # the grid time at or before ``now``
    live = WindowPlan.minute_cycle(**common, live_pods={}, source_keeps_history=False)
    assert live.checkpoints is None and not live.keeps_engine_rows


def test_a_backfill_day_writes_every_checkpoint_and_recommends_on_the_last_day():
    day = WindowPlan.backfill_day(
        end=END, history_s=86400.0, snapshot_kills=(), is_last=False
    )
    assert not day.recommend
    assert day.checkpoints is None and not day.keeps_engine_rows
    assert day.live_pods is None
    assert day.chunks_every_workload
    last = WindowPlan.backfill_day(
        end=END, history_s=86400.0, snapshot_kills=(), is_last=True
    )
    assert last.recommend


def test_a_first_contact_chunk_is_its_window_without_kept_engine_rows():
    cycle = WindowPlan.minute_cycle(
        now=NOW,
        history_s=3600.0,
        snapshot_kills=(),
        live_pods={},
        source_keeps_history=True,
    )
    chunk = cycle.first_contact_chunk()
    assert not chunk.keeps_engine_rows
    assert chunk.checkpoints == cycle.checkpoints
    assert (chunk.end, chunk.recommend, chunk.history_s) == (
        cycle.end,
        cycle.recommend,
        cycle.history_s,
    )


PROTOCOL_FLAGS = sorted(
    name for name, kind in UsageSource.__annotations__.items() if kind == "bool"
)
PROTOCOL_METHODS = sorted(
    name
    for name, member in vars(UsageSource).items()
    if inspect.isfunction(member) and not name.startswith("_")
)


@pytest.mark.parametrize(
    "source_class", [SimulatedUsageSource, PrometheusSource, MetricsServerSource]
)
def test_every_source_declares_every_capability(source_class):
    assert PROTOCOL_FLAGS == [
        "counts_throttling",
        "history_arrives_late",
        "keeps_history",
        "keeps_oom_history",
        "reads_cluster_series",
        "selects_workloads",
    ]
    for flag in PROTOCOL_FLAGS:
        assert isinstance(getattr(source_class, flag), bool), flag
    for method in PROTOCOL_METHODS:
        assert inspect.signature(getattr(source_class, method)).parameters.keys() == (
            inspect.signature(getattr(UsageSource, method)).parameters.keys()
        ), method


class UndeclaringSource(SimulatedUsageSource):
    """The simulation declaring neither throttling counters nor workload reads: its
    methods for them fail if asked."""

    counts_throttling = False
    selects_workloads = False

    def fetch_throttling(self, **kwargs):
        raise AssertionError("asked for counters it does not declare")

    def fetch_workload_usage(self, **kwargs):
        raise AssertionError("asked for workloads it does not declare")


@pytest.fixture
def undeclaring(settings, monkeypatch):
    """Refreshes read the simulated fleet through ``UndeclaringSource``."""
    settings.SIMULATION_SEED = 2
    settings.SIMULATION_WORKLOADS = 4  # a DaemonSet container throttled at its limit
    settings.SIMULATION_HISTORY_DAYS = 0.1

    def source_for(cluster):
        fleet = build_fleet(settings.SIMULATION_SEED, settings.SIMULATION_WORKLOADS)
        return UndeclaringSource(fleet=fleet)

    monkeypatch.setattr(cycle, "usage_source_for", source_for)


@pytest.mark.django_db
def test_a_first_contact_without_workload_reads_is_one_window(settings, undeclaring):
    settings.FIRST_CONTACT_CHUNK_CONTAINERS = 2
    cluster = Cluster.objects.create(name="whole", kind="simulated")
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert run.status == RefreshRun.Status.SUCCEEDED
    assert run.counts["samples"] > 0
    assert "first_contact_chunks" not in run.counts


@pytest.mark.django_db
def test_a_source_without_counters_is_not_asked_for_them(undeclaring):
    operator = make_user("olga", Role.OPERATOR)
    cluster = Cluster.objects.create(name="hot", kind="simulated")
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    for policy in Policy.objects.filter(workload__cluster=cluster):
        update_policy(
            workload_id=policy.workload_id,
            changes={"profile_overrides": {"throttling_boost": 0.5}},
            actor=operator,
            now=NOW,
        )
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    assert run.status == RefreshRun.Status.SUCCEEDED
    assert "containers_throttling_boosted" not in run.counts

"""Back-fill and incremental ingestion from a real Prometheus, end to end.

The cluster is discovered by the real Kubernetes adapter (through the official client)
from a local API server that serves the generated fleet's workloads; usage and OOM
history come from a real Prometheus loaded by promtool. The recommendations stored must
equal what ``manage.py recommend`` computes from the same samples written as CSV.
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import call_command

from recommender.cluster.kubernetes import KubernetesAdapter
from recommender.engine import AggregateSet, get_profile, recommend
from recommender.engine.quantity import format_cpu, format_memory
from recommender.errors import SourceUnavailable
from recommender.models import (
    Checkpoint,
    Cluster,
    Container,
    OomKill,
    RefreshRun,
    Workload,
)
from recommender.services.refresh.backfill import backfill_cluster
from recommender.services.refresh.cycle import refresh_cluster
from recommender.sources.prometheus import PrometheusConfig, PrometheusSource
from tests.k8s_fake.plugin import FAST
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig
from tests.prometheus_support.fake import FakePrometheus, hang, raw
from tests.prometheus_support.fixtures import prometheus_with_history
from tests.prometheus_support.k8s_objects import objects_for
from tests.prometheus_support.openmetrics import expected_ooms, expected_usage

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
__all__ = ["prometheus_with_history"]  # the fixture, imported for pytest

DAY = 86_400


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@pytest.fixture
def adapter(prometheus_with_history, tmp_path: Path):
    loaded = prometheus_with_history
    server = FakeApiServer(objects_for(loaded.specs, live_at_s=loaded.end_s)).start()
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig", {"fake": server}, current="fake"
    )
    adapter = KubernetesAdapter(
        cluster_name="prod", context="fake", kubeconfig=str(kubeconfig), settings=FAST
    )
    yield adapter
    adapter.close()
    server.stop()


@pytest.fixture
def cluster() -> Cluster:
    return Cluster.objects.create(name="prod", kind=Cluster.Kind.KUBERNETES)


def source_for(url: str, **overrides) -> PrometheusSource:
    return PrometheusSource(PrometheusConfig(url=url, backoff_s=0.01, **overrides))


def offline_recommendations(
    loaded, tmp_path: Path, *, start_s: int | None = None, with_ooms: bool = True
) -> dict[tuple[str, str, str], dict]:
    """`manage.py recommend` over the generator's samples in ``(start_s, end]``
    (default: the whole 8 days), and its OOM kills unless not ``with_ooms``."""
    start_s = loaded.start_s if start_s is None else start_s
    usage = tmp_path / "usage.csv"
    with usage.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["timestamp", "namespace", "workload", "pod", "container",
                         "cpu_cores", "memory_bytes"])  # fmt: skip
        for r in expected_usage(loaded.specs, start_s=start_s, end_s=loaded.end_s):
            cpu = "" if math.isnan(r.cpu_cores) else repr(r.cpu_cores)
            writer.writerow([r.timestamp_s, r.namespace, r.workload, r.pod, r.container,
                             cpu, repr(r.memory_bytes)])  # fmt: skip
    ooms = tmp_path / "ooms.csv"
    with ooms.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["timestamp", "namespace", "workload", "pod", "container",
                         "memory_request_bytes"])  # fmt: skip
        kills = expected_ooms(loaded.specs, start_s=start_s, end_s=loaded.end_s)
        for o in kills if with_ooms else ():
            writer.writerow([o.timestamp_s, o.namespace, o.workload, o.pod, o.container,
                             o.memory_request_bytes])  # fmt: skip
    out = io.StringIO()
    call_command("recommend", samples=usage, oom_events=ooms, format="json", stdout=out)
    return {
        (r["namespace"], r["workload"], r["containerName"]): r
        for r in json.loads(out.getvalue())["recommendations"]
    }


def quantities(resources) -> dict[str, str]:
    return {
        "cpu": format_cpu(resources.cpu_millicores),
        "memory": format_memory(resources.memory_bytes),
    }


def stored_recommendations() -> dict[tuple[str, str, str], dict]:
    out = {}
    for container in Container.objects.select_related(
        "workload", "latest_recommendation"
    ):
        rec = container.latest_recommendation
        if rec is None:
            continue
        out[(container.workload.namespace, container.workload.name, container.name)] = {
            "target": quantities(rec.target),
            "lowerBound": quantities(rec.lower_bound),
            "upperBound": quantities(rec.upper_bound),
            "uncappedTarget": quantities(rec.uncapped_target),
        }
    return out


def checkpoint_recommendations() -> dict[tuple[str, str, str], dict]:
    """What the engine recommends from the stored checkpoints right now.

    The refresh service stores a new Recommendation row only when a value moved enough,
    so after an incremental step the stored row may be older than the state; the
    checkpoints are what ingestion produced.
    """
    profile = get_profile("vpa")
    containers = list(
        Container.objects.select_related("workload", "checkpoint").order_by("pk")
    )
    per_workload: dict[int, int] = {}
    for container in containers:
        per_workload[container.workload_id] = (
            per_workload.get(container.workload_id, 0) + 1
        )
    aggregates = AggregateSet.from_checkpoints(
        profile, [bytes(c.checkpoint.state) for c in containers]
    )
    results = recommend(
        aggregates,
        rows=list(range(len(containers))),
        profile=profile,
        containers_in_pod=[per_workload[c.workload_id] for c in containers],
    )
    return {
        (c.workload.namespace, c.workload.name, c.name): {
            "target": quantities(r.target),
            "lowerBound": quantities(r.lower_bound),
            "upperBound": quantities(r.upper_bound),
            "uncappedTarget": quantities(r.uncapped_target),
        }
        for c, r in zip(containers, results, strict=True)
    }


def assert_same(got: dict, expected: dict) -> None:
    assert (
        set(got)
        == set(expected)
        == {
            ("shop", "web", "app"),
            ("shop", "web", "proxy"),
            ("shop", "db", "postgres"),
            ("batch", "worker", "app"),
        }
    )
    for key, rec in expected.items():
        for bound in ("target", "lowerBound", "upperBound", "uncappedTarget"):
            assert got[key][bound] == rec[bound], (key, bound)


def test_one_backfill_stores_exactly_the_offline_recommendations(
    prometheus_with_history, adapter, cluster, tmp_path
):
    loaded = prometheus_with_history
    run = backfill_cluster(
        cluster_id=cluster.pk,
        now=at(loaded.end_s),
        adapter=adapter,
        source=source_for(loaded.url),
    )
    assert run.status == RefreshRun.Status.SUCCEEDED
    assert run.counts["series_unmatched"] == 0
    expected = offline_recommendations(loaded, tmp_path)
    assert_same(stored_recommendations(), expected)
    assert_same(checkpoint_recommendations(), expected)


def test_backfill_then_incremental_equals_the_offline_recommendations(
    prometheus_with_history, adapter, cluster, tmp_path
):
    loaded = prometheus_with_history
    source = source_for(loaded.url)
    progress: list[float] = []
    # First contact three hours before the end of the data: 8 days back from there.
    first = backfill_cluster(
        cluster_id=cluster.pk,
        now=at(loaded.end_s - 3 * 3600),
        days=8,
        adapter=adapter,
        source=source,
        on_progress=lambda run: progress.append(run.progress),
    )
    assert first.status == RefreshRun.Status.SUCCEEDED
    assert first.kind == RefreshRun.Kind.BACKFILL
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert len(progress) >= 8  # a progress report per committed day
    assert first.counts["containers"] == 4
    assert first.counts["oom_kills_new"] == 1
    watermarks = set(Checkpoint.objects.values_list("last_sample_at", flat=True))
    assert watermarks == {at(loaded.end_s - 3 * 3600)}

    # Then incremental ingestion from each watermark up to the end of the data.
    second = backfill_cluster(
        cluster_id=cluster.pk, now=at(loaded.end_s), adapter=adapter, source=source
    )
    assert second.status == RefreshRun.Status.SUCCEEDED
    assert second.counts["oom_kills_new"] == 0  # stored once, not again
    assert second.counts["samples"] == 5 * 180 * 2  # 5 live series, 3 h, CPU + memory
    assert OomKill.objects.count() == 1
    kill = OomKill.objects.get()
    (db,) = (s for s in loaded.specs if s.oom_at_s is not None)
    assert kill.occurred_at == at(db.oom_at_s)
    assert kill.memory_request_bytes == db.memory_request_bytes

    # Ingestion in two parts holds exactly what one pass over the same samples holds.
    # First contact was 3 h before the end, so its 8 days reach 3 h further back than
    # the data's 8 days: the grid point at the data's first scrape is one sample more
    # than the last 8 days hold (it moves every memory window by one step).
    expected = offline_recommendations(
        loaded, tmp_path, start_s=loaded.end_s - 3 * 3600 - 8 * DAY
    )
    assert_same(checkpoint_recommendations(), expected)
    assert expected != offline_recommendations(loaded, tmp_path)


def oom_time(loaded) -> int:
    (db,) = (s for s in loaded.specs if s.oom_at_s is not None)
    return db.oom_at_s


@pytest.mark.parametrize(
    "cuts",
    [
        # Inside a day (not on a step or window edge), then minutes before the end.
        lambda end, oom: [end - 5 * DAY - 7 * 3600 - 13 * 60, end - 17 * 60],
        # Right at the OOM kill, and one grid step before it.
        lambda end, oom: [oom - 60, oom],
        # A cut one step after the OOM, then one inside the OOM's memory window.
        lambda end, oom: [oom + 60, oom + 5 * 3600, end - 3 * 3600],
        # Ten minutes before the OOM: the next day-long step holds the OOM and runs
        # past the end of its memory window, so feeding OOMs after their day's
        # samples would judge it against the next window's peak.
        lambda end, oom: [oom - 600],
    ],
    ids=["inside-a-day", "at-the-oom", "after-the-oom", "before-the-oom"],
)
def test_the_result_does_not_depend_on_where_history_is_split(
    prometheus_with_history, adapter, cluster, tmp_path, cuts
):
    loaded = prometheus_with_history
    source = source_for(loaded.url)
    first_s = loaded.end_s - 8 * DAY - 3 * 3600  # history starts here in every run
    moments = [*cuts(loaded.end_s, oom_time(loaded)), loaded.end_s]
    for number, moment in enumerate(moments):
        run = backfill_cluster(
            cluster_id=cluster.pk,
            now=at(moment),
            days=(moment - first_s) / DAY if number == 0 else 8,
            adapter=adapter,
            source=source,
        )
        assert run.status == RefreshRun.Status.SUCCEEDED
    split = checkpoint_recommendations()
    split_states = sorted(
        (c.container_id, bytes(c.state)) for c in Checkpoint.objects.all()
    )
    assert OomKill.objects.count() == 1

    # One pass over the same history, from scratch.
    Cluster.objects.all().delete()
    fresh = Cluster.objects.create(name="prod", kind=Cluster.Kind.KUBERNETES)
    backfill_cluster(
        cluster_id=fresh.pk,
        now=at(loaded.end_s),
        days=(loaded.end_s - first_s) / DAY,
        adapter=adapter,
        source=source,
    )
    assert checkpoint_recommendations() == split
    one_pass_states = sorted(
        (c.container.pk, bytes(c.state)) for c in Checkpoint.objects.all()
    )
    # Byte for byte (container ids differ between the two clusters, so compare blobs).
    assert [b for _, b in one_pass_states] == [b for _, b in split_states]
    assert_same(split, offline_recommendations(loaded, tmp_path, start_s=first_s))


def test_a_namespace_shard_writes_only_its_containers(
    prometheus_with_history, adapter, cluster
):
    loaded = prometheus_with_history
    run = backfill_cluster(
        cluster_id=cluster.pk,
        now=at(loaded.end_s),
        namespace="batch",
        adapter=adapter,
        source=source_for(loaded.url),
    )
    assert run.shard == "batch"
    assert run.counts["containers"] == 1
    fed = Checkpoint.objects.exclude(last_sample_at=None)
    assert {c.container.workload.namespace for c in fed} == {"batch"}
    # A shard reads and writes only its namespace (the whole-cluster pass finds the
    # others): nothing of "shop" is stored yet.
    assert not Workload.objects.filter(namespace="shop").exists()
    assert not Container.objects.filter(workload__namespace="shop").exists()
    shop = backfill_cluster(
        cluster_id=cluster.pk,
        now=at(loaded.end_s),
        namespace="shop",
        adapter=adapter,
        source=source_for(loaded.url),
    )
    assert shop.counts["containers"] == 3
    assert Checkpoint.objects.filter(last_sample_at=None).count() == 0


def test_prometheus_stopped_mid_backfill_keeps_finished_days_and_resumes(
    prometheus_with_history, adapter, cluster, tmp_path
):
    loaded = prometheus_with_history
    now = at(loaded.end_s)

    def stop_after_three_days(run: RefreshRun) -> None:
        if (
            run.counts.get("steps_done") == 3
            and run.status == RefreshRun.Status.RUNNING
        ):
            loaded.server.stop()

    try:
        with pytest.raises(SourceUnavailable, match="unreachable"):
            backfill_cluster(
                cluster_id=cluster.pk,
                now=now,
                adapter=adapter,
                source=source_for(loaded.url, retries=1, timeout_s=2),
                on_progress=stop_after_three_days,
            )
    finally:
        loaded.server.start()
    failed = RefreshRun.objects.get(kind=RefreshRun.Kind.BACKFILL)
    assert failed.status == RefreshRun.Status.FAILED
    assert "step 4/" in failed.error and "unreachable" in failed.error
    assert "3 finished step(s) are stored" in failed.error
    assert failed.progress == pytest.approx(3 / failed.counts["steps"])
    # The first three days are committed: the watermark moved to the third step's end.
    third_end = loaded.end_s - 8 * DAY + 3 * DAY
    marks = set(Checkpoint.objects.values_list("last_sample_at", flat=True))
    assert marks == {at(third_end)}

    resumed = backfill_cluster(
        cluster_id=cluster.pk, now=now, adapter=adapter, source=source_for(loaded.url)
    )
    assert resumed.status == RefreshRun.Status.SUCCEEDED
    assert resumed.counts["steps"] == 5  # only the days still missing
    # Nothing lost, nothing counted twice: the same result as one uninterrupted run.
    expected = offline_recommendations(loaded, tmp_path)
    assert_same(checkpoint_recommendations(), expected)
    assert_same(stored_recommendations(), expected)


@pytest.mark.parametrize(
    ("responder", "problem"),
    [
        (raw(200, b"<html>502 from the ingress</html>"), "malformed JSON"),
        (raw(200, b'{"status":"success","data":{"resultType":"matrix","resu'), "JSON"),
        (hang(2.0), "timed out"),
    ],
)
def test_a_broken_prometheus_fails_the_run_and_keeps_stored_recommendations(
    prometheus_with_history, adapter, cluster, responder, problem
):
    loaded = prometheus_with_history
    # A good back-fill first, so there is something to keep.
    backfill_cluster(
        cluster_id=cluster.pk,
        now=at(loaded.end_s - 3600),
        adapter=adapter,
        source=source_for(loaded.url),
    )
    before = stored_recommendations()
    checkpoints = list(
        Checkpoint.objects.values_list("pk", "version", "last_sample_at")
    )
    assert len(before) == 4

    broken = FakePrometheus(default=responder).start()
    try:
        with pytest.raises(SourceUnavailable, match=problem):
            backfill_cluster(
                cluster_id=cluster.pk,
                now=at(loaded.end_s),
                adapter=adapter,
                source=source_for(broken.url, retries=1, timeout_s=0.5),
            )
    finally:
        broken.stop()
    run = RefreshRun.objects.filter(kind=RefreshRun.Kind.BACKFILL).first()
    assert run.status == RefreshRun.Status.FAILED
    assert problem in run.error and "Prometheus at" in run.error
    assert stored_recommendations() == before
    assert (
        list(Checkpoint.objects.values_list("pk", "version", "last_sample_at"))
        == checkpoints
    )


@pytest.mark.parametrize("window_containers", [None, 1])
def test_the_minute_cycle_takes_oom_kills_from_prometheus(
    prometheus_with_history, adapter, tmp_path, settings, monkeypatch, window_containers
):
    """refresh_cluster on a Kubernetes cluster with Prometheus: the OOM kill that only
    kube-state-metrics remembers is stored once, and a first contact then minute
    cycles equal one pass over the same samples; the same in windows by namespace
    (``window_containers`` 1: a window per namespace, sharing one OOM history read)."""
    loaded = prometheus_with_history
    if window_containers is not None:
        settings.STEADY_WINDOW_CONTAINERS = window_containers
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))  # the fake API
    settings.PROMETHEUS_URL = loaded.url
    settings.PROMETHEUS_BACKFILL_DAYS = 8
    # Every cycle stores its checkpoints (the last one is compared with one pass).
    settings.CHECKPOINT_INTERVAL_S = 0
    cluster = Cluster.objects.create(
        name="prod", kind=Cluster.Kind.KUBERNETES, context="fake"
    )
    oom = oom_time(loaded)
    # First contact just before the OOM, then cycles across it to the end.
    moments = [oom - 120, oom - 60, oom, oom + 60, loaded.end_s]
    for moment in moments:
        run = refresh_cluster(cluster_id=cluster.pk, now=at(moment))
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert OomKill.objects.count() == 1
    assert OomKill.objects.get().occurred_at == at(oom)
    runs = RefreshRun.objects.filter(cluster=cluster).order_by("pk")
    assert [r.counts.get("oom_kills_new", 0) for r in runs] == [0, 0, 1, 0, 0]
    if window_containers is not None:
        assert all(r.counts.get("steady_windows", 1) > 1 for r in runs[1:])
    again = refresh_cluster(cluster_id=cluster.pk, now=at(loaded.end_s))
    assert again.counts["samples"] == 0 and again.counts.get("oom_kills_new", 0) == 0

    expected = offline_recommendations(loaded, tmp_path, start_s=moments[0] - 8 * DAY)
    assert_same(checkpoint_recommendations(), expected)

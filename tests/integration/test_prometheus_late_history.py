"""A workload whose whole history reaches a real Prometheus after vpaweb first met it
is read by a later cycle: a window that returned none of its samples does not move its
watermark (``plan.HISTORY_WAIT_S``).

Prometheus starts with a day of the small fleet's cAdvisor history without any sample
of the ``shop/web`` pods; a cycle meets the workload; then its history arrives (a TSDB
block of it, as a delayed remote write would add it) and the next cycle runs: web's
checkpoints equal those of a first contact that found its history there. Once the wait
is over, a window without samples moves the watermark as before.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recommender.models import Checkpoint, Cluster, RefreshRun
from recommender.services.refresh import plan
from recommender.services.refresh.cycle import refresh_cluster
from tests.conftest import service_missing
from tests.k8s_fake.server import FakeApiServer, write_kubeconfig
from tests.prometheus_support.fixtures import END_S
from tests.prometheus_support.k8s_objects import objects_for
from tests.prometheus_support.openmetrics import (
    FAMILIES,
    SeriesSpec,
    family_text,
    small_fleet,
)
from tests.prometheus_support.server import (
    PrometheusServer,
    create_blocks,
    ensure_installed,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FIRST_S = END_S - 5 * 60  # the first cycle meets web; none of its history is there


def is_late(spec: SeriesSpec) -> bool:
    return (spec.namespace, spec.workload) == ("shop", "web")


def exposition(specs: list[SeriesSpec], *, late: bool) -> str:
    """The cpu and memory families of the late workload (``late``), or the rest."""
    text = []
    for family in ("cpu", "memory"):
        name, kind = FAMILIES[family]
        text.append(f"# TYPE {name} {kind}\n")
        for spec in specs:
            if is_late(spec) == late:
                text.append(family_text(family, spec))
    return "".join(text) + "# EOF\n"


class LateHistory:
    """A real Prometheus whose web history arrives on ``deliver()``."""

    def __init__(self, work: Path) -> None:
        binaries = ensure_installed()
        if binaries is None:
            service_missing("prometheus and promtool (Debian package 'prometheus')")
        self.binary, self.promtool = binaries
        self.work = work
        self.specs = small_fleet(end_s=END_S, days=1)
        (work / "on-time.om").write_text(exposition(self.specs, late=False))
        create_blocks(self.promtool, work / "on-time.om", work / "data")
        self.server = PrometheusServer(self.binary, work / "data").start()

    def deliver(self) -> None:
        """Add web's history as a block of its own and restart Prometheus."""
        (self.work / "late.om").write_text(exposition(self.specs, late=True))
        create_blocks(self.promtool, self.work / "late.om", self.work / "late")
        self.server.stop()
        for block in (self.work / "late").iterdir():
            shutil.move(str(block), str(self.work / "data" / block.name))
        self.server.start()


@pytest.fixture
def prometheus(tmp_path: Path, settings, monkeypatch) -> Iterator[LateHistory]:
    loaded = LateHistory(tmp_path)
    api = FakeApiServer(objects_for(loaded.specs, live_at_s=END_S)).start()
    write_kubeconfig(tmp_path / "kubeconfig", {"fake": api}, current="fake")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    settings.PROMETHEUS_URL = loaded.server.url
    settings.PROMETHEUS_BACKFILL_DAYS = 0.5
    settings.CHECKPOINT_INTERVAL_S = 0  # every cycle stores every checkpoint
    settings.LATE_SAMPLES_S = 0  # the default: late minutes are not read again
    yield loaded
    loaded.server.stop()
    api.stop()


def cycle(cluster: Cluster, seconds: float) -> RefreshRun:
    run = refresh_cluster(
        cluster_id=cluster.pk, now=datetime.fromtimestamp(seconds, tz=UTC)
    )
    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    return run


def states(cluster: Cluster) -> dict[tuple[str, str], tuple[bytes, int]]:
    return {
        (c.container.workload.name, c.container.name): (bytes(c.state), c.sample_count)
        for c in Checkpoint.objects.filter(
            container__workload__cluster=cluster, container__workload__namespace="shop"
        ).select_related("container__workload")
    }


def watermarks(cluster: Cluster) -> set[datetime | None]:
    """The watermarks of web's containers."""
    return set(
        Checkpoint.objects.filter(
            container__workload__cluster=cluster,
            container__workload__namespace="shop",
            container__workload__name="web",
        ).values_list("last_sample_at", flat=True)
    )


def test_history_that_arrives_after_first_contact_is_read(prometheus):
    def cluster(name: str) -> Cluster:
        return Cluster.objects.create(
            name=name, kind=Cluster.Kind.KUBERNETES, context="fake"
        )

    late = cluster("late")
    cycle(late, FIRST_S)
    # Nothing of web was returned: no watermark, so its history is read again.
    assert watermarks(late) == {None}
    prometheus.deliver()
    cycle(late, END_S)
    assert None not in watermarks(late)
    # web's checkpoints are those of a first contact at END_S with its history there.
    on_time = cluster("on-time")
    cycle(on_time, END_S)

    def web(found: dict) -> dict:
        return {k: v for k, v in found.items() if k[0] == "web"}

    expected = web(states(on_time))
    assert len(expected) == 2 and all(count > 600 for _, count in expected.values())
    assert web(states(late)) == expected


def test_after_the_wait_a_window_without_samples_moves_the_watermark(prometheus):
    late = Cluster.objects.create(
        name="late", kind=Cluster.Kind.KUBERNETES, context="fake"
    )
    cycle(late, FIRST_S - plan.HISTORY_WAIT_S)
    assert watermarks(late) == {None}
    cycle(late, FIRST_S)
    assert None not in watermarks(late)

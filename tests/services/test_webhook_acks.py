"""The webhook's side of the handshake: a process acknowledges how far it has loaded
the journal (a ``WebhookAck`` row per process and cluster, shown in ``/readyz``), and
the updater's question (``acks.not_loaded``) names the workloads a live process has
not loaded yet; a process not seen for ``LIVE_S`` is not waited for."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from recommender.models import Cluster, WebhookAck
from recommender.services.admission.snapshot import forget_holders, holder_for
from recommender.services.policy.changes import update_policy
from recommender.services.readmodels import webhook_acks as acks
from recommender.webhook import WebhookApp
from tests.services.test_admission import MI, workload_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def hooked():
    forget_holders()
    cluster = Cluster.objects.create(name="wire", kind="simulated")
    workload = workload_with(cluster, "hooked", "wire-hook", {"app": (250, 300 * MI)})
    yield cluster, workload
    forget_holders()


def switch(workload, mode: str) -> None:
    update_policy(
        workload_id=workload.pk,
        changes={"mode": mode},
        actor=None,
        actor_label="test",
        now=timezone.now(),
    )


def test_a_process_acknowledges_what_it_loaded_and_the_updater_waits_for_it(hooked):
    cluster, workload = hooked
    holder = holder_for("wire")
    holder.refresh()
    holder.acknowledge(now=timezone.now())
    (ack,) = WebhookAck.objects.all()
    assert ack.process == acks.PROCESS and ack.cluster_id == cluster.pk
    now = timezone.now()
    assert (
        acks.not_loaded(cluster_id=cluster.pk, workload_ids=[workload.pk], now=now)
        == {}
    )

    switch(workload, "Recreate")  # journals the workload
    waiting = acks.not_loaded(
        cluster_id=cluster.pk, workload_ids=[workload.pk], now=timezone.now()
    )
    assert waiting[workload.pk].startswith(acks.WAITING)
    assert acks.PROCESS in waiting[workload.pk]

    holder.refresh()
    holder.acknowledge(now=timezone.now())
    assert (
        acks.not_loaded(
            cluster_id=cluster.pk, workload_ids=[workload.pk], now=timezone.now()
        )
        == {}
    )


def test_readyz_shows_the_journal_loaded(hooked):
    holder = holder_for("wire")
    holder.refresh()
    app = WebhookApp(default_cluster="wire", deadline_s=1.0)
    try:
        reply = app.handle(method="GET", path="/readyz", content_type="", body=b"")
    finally:
        app.close()
    cache = json.loads(reply.body)["caches"]["wire"]
    assert cache["process"] == acks.PROCESS
    assert cache["journal_loaded"] == holder.loaded().after


def test_a_process_not_seen_for_live_s_is_not_waited_for(hooked):
    cluster, workload = hooked
    switch(workload, "Recreate")
    WebhookAck.objects.create(
        process="gone", cluster=cluster, journal_after=0, seen_at=timezone.now()
    )
    later = timezone.now() + timedelta(seconds=acks.LIVE_S + 1)
    assert (
        acks.not_loaded(cluster_id=cluster.pk, workload_ids=[workload.pk], now=later)
        == {}
    )
    assert workload.pk in acks.not_loaded(
        cluster_id=cluster.pk, workload_ids=[workload.pk], now=timezone.now()
    )


def test_a_hole_in_the_journal_is_not_loaded():
    ack = WebhookAck(journal_after=10, journal_holes=[[4, 6]])
    assert [ack.has_loaded(i) for i in (3, 4, 6, 7, 10, 11)] == [
        True,
        False,
        False,
        True,
        True,
        False,
    ]


def test_an_acknowledgement_that_cannot_be_stored_is_logged_once(
    hooked, monkeypatch, caplog
):
    holder = holder_for("wire")
    holder.refresh()

    def down(**kwargs):
        raise OSError("database unreachable")

    monkeypatch.setattr(acks, "acknowledge", down)
    for _ in range(3):
        holder.acknowledge(now=timezone.now())
    warnings = [r for r in caplog.records if "acknowledgement not stored" in r.message]
    assert len(warnings) == 1
    assert not WebhookAck.objects.exists()

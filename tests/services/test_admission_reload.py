"""The webhook's cache reloads only what changed, and ends where a full rebuild would.

Changes are made by the real writers (the refresh, discovery, the policy and kill
switch services), which journal the workloads they change; the holder then reloads
from the journal and is compared with a full rebuild of the same database.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from recommender.models import AdmissionChange, Cluster, Policy, Workload
from recommender.services.actuation.control import set_kill_switch
from recommender.services.admission import snapshot as snapshot_module
from recommender.services.admission.decision import (
    LEFT_ALONE,
    PATCHED,
    decide_admission,
)
from recommender.services.admission.snapshot import (
    HOLE_WAIT_S,
    AdmissionSnapshot,
    JournalMark,
    SnapshotHolder,
    load_snapshot,
)
from recommender.services.connections import cluster_adapter_for
from recommender.services.policy.changes import update_policy
from recommender.services.readmodels import generation
from recommender.services.readmodels.generation import (
    JOURNAL_KEEP,
    mark_admission_data_changed,
    note_admission_changes,
)
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.discovery import upsert_discovery

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "k8s-wire" / "admission"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    settings.MIN_HISTORY_HOURS = 0.0


@pytest.fixture
def cluster():
    cluster = Cluster.objects.create(
        name="sim-hook", kind=Cluster.Kind.SIMULATED, actuation_allowed=True
    )
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    return cluster


def fingerprint(snapshot: AdmissionSnapshot) -> dict[str, Any]:
    """Everything the webhook decides from, comparable between two snapshots."""

    def inputs_of(entry):
        inputs = entry.inputs
        if inputs is None:
            return None
        workload = inputs.workload
        return (
            inputs.namespace,
            None if workload is None else workload.pk,
            None if workload is None else workload.hpa_conflicts,
            None if workload is None else workload.policy.mode,
            inputs.policies,
            {name: rec.pk for name, rec in inputs.latest.items()},
            inputs.container_range,
            inputs.pod_range,
            inputs.coefficient,
        )

    return {
        "kill_switch": snapshot.kill_switch,
        "limit_ranges": dict(snapshot.limit_ranges),
        "keys_by_id": dict(snapshot.keys_by_id),
        "workloads": {
            key: (
                e.workload_id,
                e.mode,
                e.is_actionable,
                e.why_not,
                e.last_seen_at,
                inputs_of(e),
            )
            for key, e in snapshot.workloads.items()
        },
    }


def switch(cluster, mode: str, *, count: int | None = None) -> list[Workload]:
    """Set ``count`` (or all) of the cluster's workloads to ``mode`` as an operator."""
    workloads = list(Workload.objects.filter(cluster=cluster, is_active=True))
    for workload in workloads[:count]:
        update_policy(
            workload_id=workload.pk,
            changes={"mode": mode},
            actor=None,
            actor_label="test",
            now=NOW,
            confirm_large_increase=True,
        )
    return workloads[:count]


def pod_of(workload: Workload) -> dict[str, Any]:
    """The recorded pod review, as a new pod of ``workload`` with its containers, each
    requesting 1 CPU and 1 GiB."""
    body = json.loads((WIRE / "a-replicaset-pod.admissionreview.json").read_text())
    review = copy.deepcopy(body["body"])
    request = review["request"]
    request["namespace"] = workload.namespace
    pod = request["object"]
    metadata = pod["metadata"]
    metadata["namespace"] = workload.namespace
    metadata["labels"] = {}
    metadata["ownerReferences"] = [
        {"kind": workload.kind, "name": workload.name, "controller": True}
    ]
    pod["spec"]["initContainers"] = []
    pod["spec"]["containers"] = [
        {
            "name": name,
            "image": "registry.example/app:1",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        }
        for name in workload.containers.filter(kind="regular").values_list(
            "name", flat=True
        )
    ]
    return request


def reload(holder: SnapshotHolder) -> AdmissionSnapshot:
    """What the webhook's background thread does: reload when told to."""
    holder.refresh_if_needed()
    snapshot = holder.current()
    assert snapshot is not None and holder.last_error == ""
    return snapshot


def test_an_incremental_reload_equals_a_full_rebuild_after_each_change(cluster):
    switch(cluster, Policy.Mode.INITIAL)
    holder = SnapshotHolder(cluster.name)
    assert reload(holder).reloaded is None  # the first load is a full rebuild

    # New recommendations: the refresh a minute later.
    run = refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))
    assert run.counts["recommendations_changed"] > 0
    snapshot = reload(holder)
    assert 0 < snapshot.reloaded < len(snapshot.workloads)
    assert fingerprint(snapshot) == fingerprint(load_snapshot(cluster=cluster))

    # An operator switches one workload Off.
    (off,) = switch(cluster, Policy.Mode.OFF, count=1)
    snapshot = reload(holder)
    assert snapshot.reloaded == 1
    assert not snapshot.workloads[(off.namespace, off.kind, off.name)].is_actionable
    assert fingerprint(snapshot) == fingerprint(load_snapshot(cluster=cluster))

    # A workload is deleted from the cluster: discovery no longer finds it.
    later = NOW + timedelta(minutes=2)
    found = cluster_adapter_for(cluster, now=later).discover()
    gone = found.workloads[-1]
    upsert_discovery(
        cluster=cluster,
        snapshot=replace(found, workloads=found.workloads[:-1]),
        now=later,
    )
    mark_admission_data_changed()  # as the refresh cycle does after discovery
    snapshot = reload(holder)
    assert snapshot.reloaded == 1
    assert (gone.namespace, gone.kind, gone.name) not in snapshot.workloads
    assert fingerprint(snapshot) == fingerprint(load_snapshot(cluster=cluster))

    # The kill switch.
    set_kill_switch(stopped=True, actor=None, now=later, reason="incident 7")
    snapshot = reload(holder)
    assert snapshot.reloaded == 0
    assert "kill switch is on (incident 7)" in snapshot.kill_switch
    assert fingerprint(snapshot) == fingerprint(load_snapshot(cluster=cluster))


def test_off_and_the_kill_switch_are_honoured_after_a_reload(cluster):
    first, second = switch(cluster, Policy.Mode.INITIAL, count=2)
    holder = SnapshotHolder(cluster.name)
    reload(holder)
    for workload in (first, second):
        decision = decide_admission(
            request=pod_of(workload), snapshot=holder.current(), now=NOW
        )
        assert decision.outcome == PATCHED, decision.reason

    update_policy(
        workload_id=first.pk,
        changes={"mode": Policy.Mode.OFF},
        actor=None,
        actor_label="test",
        now=NOW,
    )
    snapshot = reload(holder)
    off = decide_admission(request=pod_of(first), snapshot=snapshot, now=NOW)
    assert (off.outcome, off.patch) == (LEFT_ALONE, ())
    assert "its mode is Off" in off.reason

    set_kill_switch(stopped=True, actor=None, now=NOW, reason="")
    snapshot = reload(holder)
    stopped = decide_admission(request=pod_of(second), snapshot=snapshot, now=NOW)
    assert (stopped.outcome, stopped.patch) == (LEFT_ALONE, ())
    assert "the actuation kill switch is on" in stopped.reason

    set_kill_switch(stopped=False, actor=None, now=NOW, reason="")
    snapshot = reload(holder)
    again = decide_admission(request=pod_of(second), snapshot=snapshot, now=NOW)
    assert again.outcome == PATCHED, again.reason


def test_a_reload_reads_only_the_changed_workloads(cluster):
    switch(cluster, Policy.Mode.INITIAL)
    holder = SnapshotHolder(cluster.name)
    full = reload(holder)
    assert len(full.workloads) == 24
    (changed,) = switch(cluster, Policy.Mode.RECREATE, count=1)

    with CaptureQueriesContext(connection) as queries:
        snapshot = reload(holder)

    assert snapshot.reloaded == 1
    # The cluster, the journal, the kill switch, the LimitRanges, the largest nodes,
    # then the one workload, its advice inputs and its reverts: a constant number,
    # whatever the fleet.
    assert len(queries) <= 11, [q["sql"] for q in queries]
    reads = [
        q["sql"]
        for q in queries
        if q["sql"].startswith("SELECT") and ('FROM "recommender_workload"' in q["sql"])
    ]
    assert reads
    for sql in reads:  # each workload read names the changed workload, no other
        assert f"IN ({changed.pk})" in sql or f"IN ('{changed.name}')" in sql, sql
    journal = [q["sql"] for q in queries if "recommender_admissionchange" in q["sql"]]
    assert len(journal) == 1 and '"id" >' in journal[0]


def test_a_journal_row_committed_late_is_still_read():
    mark = JournalMark(after=10)
    # Rows 12 and 13 are visible, 11 is not yet (its transaction is still open).
    read = mark.advanced([12, 13], now_s=100.0)
    assert (read.after, read.holes) == (13, ((11, 11, 100.0),))
    assert AdmissionChange.objects.filter(read.unread()).query is not None
    # Next time 11 is read with the new rows; then nothing is missing.
    later = read.advanced([11, 15], now_s=101.0)
    assert (later.after, later.holes) == (15, ((14, 14, 101.0),))
    # A hole never filled (a rolled-back transaction) is dropped after HOLE_WAIT_S.
    assert later.advanced([], now_s=101.0 + HOLE_WAIT_S + 1).holes == ()


def test_the_holder_applies_a_change_whose_journal_row_appears_below_its_mark(
    cluster,
):
    """A writer's transaction that took its journal id before another's but committed
    after it: the holder re-reads the gap and applies the change."""
    switch(cluster, Policy.Mode.INITIAL)
    holder = SnapshotHolder(cluster.name)
    reload(holder)
    late, early = Workload.objects.filter(cluster=cluster, is_active=True)[:2]
    # Two writers: "late" takes a journal id first, "early" commits first.
    Policy.objects.filter(workload=late).update(mode=Policy.Mode.OFF)
    late_row = AdmissionChange.objects.create(cluster=cluster, workload_id=late.pk)
    late_row.delete()  # not visible yet
    update_policy(
        workload_id=early.pk,
        changes={"mode": Policy.Mode.OFF},
        actor=None,
        actor_label="test",
        now=NOW,
    )
    snapshot = reload(holder)
    assert snapshot.reloaded == 1
    assert snapshot.workloads[(late.namespace, late.kind, late.name)].is_actionable

    AdmissionChange.objects.create(pk=late_row.pk, cluster=cluster, workload_id=late.pk)
    holder.refresh()
    snapshot = holder.current()
    assert snapshot.reloaded == 1
    assert not snapshot.workloads[(late.namespace, late.kind, late.name)].is_actionable
    assert fingerprint(snapshot) == fingerprint(load_snapshot(cluster=cluster))


def test_discovery_moving_last_seen_at_is_reloaded_and_a_large_change_rebuilds(
    cluster, monkeypatch
):
    holder = SnapshotHolder(cluster.name)
    reload(holder)
    # Discovery moves every last_seen_at every 10 minutes (the staleness check reads
    # it): each workload is journaled and reloaded.
    refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=30))
    snapshot = reload(holder)
    assert snapshot.reloaded == 24
    assert fingerprint(snapshot) == fingerprint(load_snapshot(cluster=cluster))
    # The same change with a lower threshold: more than a quarter of the fleet is a
    # full rebuild (here in steps of 2 workloads).
    monkeypatch.setattr(snapshot_module, "FULL_REBUILD_MIN", 2)
    monkeypatch.setattr(snapshot_module, "CHUNK", 2)
    refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=60))
    snapshot = reload(holder)
    assert snapshot.reloaded is None
    assert fingerprint(snapshot) == fingerprint(load_snapshot(cluster=cluster))


def test_an_admin_edit_of_a_policy_reaches_the_webhook_at_once(
    cluster, client, django_capture_on_commit_callbacks
):
    switch(cluster, Policy.Mode.INITIAL)
    holder = SnapshotHolder(cluster.name)
    reload(holder)
    policy = Policy.objects.filter(workload__cluster=cluster).first()
    admin = get_user_model().objects.create_superuser("root", password="pw-test-only")
    client.force_login(admin)
    form = {
        "workload": policy.workload_id,
        "mode": "Off",
        "profile": policy.profile,
        "profile_overrides": "{}",
        "container_policies": "[]",
        "approval": policy.approval,
        "hpa_coordination": policy.hpa_coordination,
        "eviction_requirements": "[]",
        "maintenance_windows": "[]",
        "source": policy.source,
        "updated_at_0": "2026-11-21",
        "updated_at_1": "12:00:00",
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/admin/recommender/policy/{policy.pk}/change/", form)
    assert response.status_code == 302, response.content[:2000]
    snapshot = reload(holder)
    assert snapshot.reloaded == 1
    key = (policy.workload.namespace, policy.workload.kind, policy.workload.name)
    assert not snapshot.workloads[key].is_actionable


def test_the_journal_keeps_an_hour(cluster, django_capture_on_commit_callbacks):
    old = AdmissionChange.objects.create(
        cluster=cluster,
        workload_id=1,
        created_at=timezone.now() - JOURNAL_KEEP - timedelta(minutes=1),
    )
    generation._pruned_at[0] = -generation._PRUNE_EVERY_S  # not pruned lately
    with django_capture_on_commit_callbacks(execute=True):
        assert note_admission_changes(cluster_id=cluster.pk, workload_ids=[9, 9]) == 1
    assert not AdmissionChange.objects.filter(pk=old.pk).exists()
    assert AdmissionChange.objects.latest("pk").workload_id == 9


def test_a_cycles_many_changed_workloads_are_journaled_in_one_statement(cluster):
    """13,854 recommendations moved in one cycle at 100,000 containers: the journal
    took 27 INSERTs of 500 rows. One statement now, where the backend binds that
    many parameters (PostgreSQL sends them in the statement's text; SQLite binds
    at most 999: 333 rows of 3)."""
    ids = list(range(1, 1201))
    before = AdmissionChange.objects.filter(cluster=cluster).count()
    with CaptureQueriesContext(connection) as queries:
        assert note_admission_changes(cluster_id=cluster.pk, workload_ids=ids) == 1200
    inserts = [q for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert len(inserts) == (1 if connection.vendor == "postgresql" else 4)
    assert AdmissionChange.objects.filter(cluster=cluster).count() == before + 1200
    new = AdmissionChange.objects.filter(cluster=cluster).order_by("pk")[before:]
    assert [row.workload_id for row in new] == ids  # in order, one a workload
    assert all(timezone.now() - row.created_at < timedelta(minutes=1) for row in new)

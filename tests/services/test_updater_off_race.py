"""Off wins every race: an operator's decision committed while an updater cycle runs
(after the cycle read the policy and the switches, before it writes) stops the write.
Against the fake API server, so "zero writes" counts real HTTP requests."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from recommender.models import Policy, ResizeChange
from recommender.services.actuation import approvals, control
from recommender.services.actuation import proposals as updater
from recommender.services.policy import changes as policies
from tests.k8s_fake.actuation import FakeCluster
from tests.services.test_updater_fake_api import (
    NOW,
    S,
    cycle,
    setup_world,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def cleanup() -> Iterator[list[FakeCluster]]:
    fakes: list[FakeCluster] = []
    yield fakes
    for fake in fakes:
        fake.close()


def _after(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, then: Any) -> None:
    """Run ``then()`` right after ``module.name`` returns, once, inside the cycle."""
    original = getattr(module, name)
    done: list[bool] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if not done:
            done.append(True)
            then()
        return result

    monkeypatch.setattr(module, name, wrapped)


def test_off_committed_after_the_cycle_read_the_policy_writes_nothing(
    tmp_path, cleanup, monkeypatch
):
    # Automatic approval: the cycle would insert approved changes and apply them.
    fake, cluster, workload = setup_world(
        tmp_path, mode="Recreate", approval="automatic"
    )
    cleanup.append(fake)

    def switch_off() -> None:
        policies.update_policy(
            workload_id=workload.pk, changes={"mode": "Off"}, actor=None, now=NOW
        )

    # The operator's switch lands between planning (the policy read as Recreate) and
    # the insert of the automatically approved changes.
    _after(monkeypatch, updater, "load_context", switch_off)
    report = cycle(fake, cluster)
    assert fake.writes() == []
    assert report.evicted == 0 and report.auto_approved == 0
    assert not ResizeChange.objects.filter(status__in=(S.APPROVED, S.APPLYING)).exists()
    # Later cycles see Off and do nothing either.
    for minute in range(1, 4):
        cycle(fake, cluster, NOW + timedelta(minutes=minute))
    assert fake.writes() == []


def test_a_policy_leaving_vpaweb_between_planning_and_applying_writes_nothing(
    tmp_path, cleanup, monkeypatch
):
    fake, cluster, workload = setup_world(tmp_path, mode="Recreate")
    cleanup.append(fake)
    cycle(fake, cluster)
    for change in ResizeChange.objects.all():
        approvals.approve_change(change_id=change.pk, approved_by=None, now=NOW)

    def mirror() -> None:
        # Discovery found an upstream VPA object: the policy mirrors it (no
        # withdrawal runs), and vpaweb must never act on it.
        Policy.objects.filter(workload=workload).update(source=Policy.Source.VPA_OBJECT)

    _after(monkeypatch, updater, "propose", mirror)
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    assert fake.writes() == []
    assert report.evicted == 0
    assert ResizeChange.objects.filter(status=S.APPROVED).count() == 3


@pytest.mark.parametrize("switch", ["kill_switch", "pause"])
def test_a_switch_set_after_the_cycle_checked_it_writes_nothing(
    tmp_path, cleanup, monkeypatch, switch
):
    fake, cluster, _ = setup_world(tmp_path, mode="Recreate")
    cleanup.append(fake)
    cycle(fake, cluster)
    for change in ResizeChange.objects.all():
        approvals.approve_change(change_id=change.pk, approved_by=None, now=NOW)

    def stop() -> None:
        if switch == "kill_switch":
            control.set_kill_switch(stopped=True, actor=None, now=NOW, reason="x")
        else:
            control.set_cluster_paused(
                cluster=cluster, paused=True, actor=None, now=NOW
            )

    # The cycle asked "may I write?" and got yes; the operator stops writes now.
    _after(monkeypatch, control, "write_block_reason", stop)
    report = cycle(fake, cluster, NOW + timedelta(minutes=1))
    assert not report.writes_blocked  # the cycle's own check came before the switch
    assert fake.writes() == []
    assert ResizeChange.objects.filter(status=S.APPROVED).count() == 3

"""Inputs that cannot blow up a cluster: bounded margins and factors, and a confirmation
before a policy change more than doubles a container's target."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.errors import InvalidInput
from recommender.models import AuditEvent, Policy
from recommender.roles import Role
from recommender.services.policy.changes import LargeIncreaseUnconfirmed, update_policy
from tests.factories import make_cluster, make_recommendation, make_user, make_workload

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
MI = 2**20


@pytest.fixture
def operator(db):
    return make_user("olga", Role.OPERATOR)


@pytest.fixture
def workload(db):
    workload = make_workload(make_cluster(), "api", containers={"app": {}, "proxy": {}})
    make_recommendation(
        workload.containers.get(name="app"), cpu_millicores=350, memory_bytes=512 * MI
    )
    make_recommendation(
        workload.containers.get(name="proxy"), cpu_millicores=50, memory_bytes=64 * MI
    )
    return workload


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("margin_fraction", 15, "must be a fraction from 0 to 1 (0-100 %"),
        ("margin_fraction", 1.01, "must be a fraction from 0 to 1"),
        ("oom_bump_ratio", 5, "must be a factor from 1 to 3"),
    ],
)
def test_out_of_bounds_fractions_name_the_field_and_store_nothing(
    workload, operator, field, value, message
):
    with pytest.raises(InvalidInput) as caught:
        update_policy(
            workload_id=workload.pk,
            changes={"profile_overrides": {field: value}},
            actor=operator,
            now=NOW,
        )
    assert message in caught.value.fields[f"profile_overrides.{field}"][0]
    assert Policy.objects.get(workload=workload).profile_overrides == {}


def test_a_margin_of_100_percent_is_allowed_and_under_2x_saves(workload, operator):
    # 0.15 → 1.0 raises every target 1.74x: under 2x, saved without confirmation.
    update_policy(
        workload_id=workload.pk,
        changes={"profile_overrides": {"margin_fraction": 1.0}},
        actor=operator,
        now=NOW,
    )
    assert Policy.objects.get(workload=workload).profile_overrides == {
        "margin_fraction": 1.0
    }


def test_a_change_more_than_doubling_a_target_is_refused_naming_the_containers(
    workload, operator
):
    changes = {
        "container_policies": [
            {"containerName": "proxy", "minAllowed": {"cpu": "200m"}},
        ]
    }
    with pytest.raises(LargeIncreaseUnconfirmed) as caught:
        update_policy(workload_id=workload.pk, changes=changes, actor=operator, now=NOW)
    assert caught.value.code == "confirmation_required"
    assert caught.value.fields == {
        "confirm_large_increase": ["proxy cpu 50m → 200m (4.0×)"]
    }
    assert not AuditEvent.objects.exists()
    assert Policy.objects.get(workload=workload).container_policies == []

    policy = update_policy(
        workload_id=workload.pk,
        changes=changes,
        actor=operator,
        now=NOW,
        confirm_large_increase=True,
    )
    assert policy.container_policies[0]["minAllowed"] == {"cpu": "200m"}


def test_exactly_doubling_is_not_more_than_twice(workload, operator):
    for margin in (0.0, 1.0):  # 1.0x → 2.0x of the uncapped value
        update_policy(
            workload_id=workload.pk,
            changes={"profile_overrides": {"margin_fraction": margin}},
            actor=operator,
            now=NOW,
        )
    assert Policy.objects.get(workload=workload).profile_overrides == {
        "margin_fraction": 1.0
    }


def test_removing_a_max_allowed_that_capped_a_target_is_a_raise(workload, operator):
    Policy.objects.filter(workload=workload).update(
        container_policies=[
            {"containerName": "app", "mode": "Auto", "maxAllowed": {"cpu": "100m"}}
        ],
    )
    rec = workload.containers.get(name="app").latest_recommendation
    rec.target_cpu_millicores = 100  # capped; uncapped stays 350m
    rec.save()
    with pytest.raises(LargeIncreaseUnconfirmed) as caught:
        update_policy(
            workload_id=workload.pk,
            changes={"container_policies": []},
            actor=operator,
            now=NOW,
        )
    assert caught.value.fields["confirm_large_increase"] == [
        "app cpu 100m → 350m (3.5×)"
    ]


def test_containers_in_mode_off_are_not_counted(workload, operator):
    policy = update_policy(
        workload_id=workload.pk,
        changes={
            "container_policies": [
                {"containerName": "proxy", "mode": "Off", "minAllowed": {"cpu": "2"}}
            ]
        },
        actor=operator,
        now=NOW,
    )
    assert policy.container_policies[0]["mode"] == "Off"

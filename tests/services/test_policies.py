"""update_policy: errors name fields, canonical storage, audit, nothing lost."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.errors import InvalidInput, NotFound
from recommender.models import AuditEvent, Policy
from recommender.roles import Role
from recommender.services.policies import mode_consequence, update_policy
from tests.factories import make_cluster, make_user, make_workload

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
def operator(db):
    return make_user("olga", Role.OPERATOR)


@pytest.fixture
def workload(db):
    return make_workload(
        make_cluster(),
        "api",
        containers={"app": {"request_cpu_millicores": 500}, "proxy": {}},
    )


def test_mode_change_is_stored_and_audited_with_before_and_after(workload, operator):
    policy = update_policy(
        workload_id=workload.pk, changes={"mode": "Initial"}, actor=operator, now=NOW
    )

    assert policy.mode == "Initial"
    assert Policy.objects.get(workload=workload).updated_by == operator
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.actor_label) == (
        "policy.update",
        operator,
        "olga",
    )
    assert event.workload == workload
    assert event.before == {"mode": "Off"}
    assert event.after == {"mode": "Initial"}
    assert event.created_at == NOW
    assert "Off → Initial" in event.message


def test_container_policies_are_stored_in_canonical_upstream_shape(workload, operator):
    policy = update_policy(
        workload_id=workload.pk,
        changes={
            "container_policies": [
                {
                    "containerName": "app",
                    "minAllowed": {"cpu": "0.1", "memory": "134217728"},
                    "maxAllowed": {"cpu": 2, "memory": "2Gi"},
                    "controlledResources": ["memory", "cpu"],
                    "controlledValues": "RequestsOnly",
                },
                {
                    "containerName": "proxy",
                    "mode": "Off",
                    "controlledResources": ["cpu"],
                },
            ]
        },
        actor=operator,
        now=NOW,
    )

    assert policy.container_policies == [
        {
            "containerName": "app",
            "mode": "Auto",
            "minAllowed": {"cpu": "100m", "memory": "128Mi"},
            "maxAllowed": {"cpu": "2", "memory": "2Gi"},
            "controlledResources": ["cpu", "memory"],
            "controlledValues": "RequestsOnly",
        },
        {"containerName": "proxy", "mode": "Off", "controlledResources": ["cpu"]},
    ]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"mode": "Auto"}, "mode"),
        ({"profile": "fastest"}, "profile"),
        ({"min_replicas": 0}, "min_replicas"),
        ({"colour": "red"}, "colour"),
        ({"container_policies": "app"}, "container_policies"),
        (
            {"container_policies": [{"containerName": "nope"}]},
            "container_policies[0].containerName",
        ),
        (
            {
                "container_policies": [
                    {"containerName": "app", "minAllowed": {"cpu": "lots"}}
                ]
            },
            "container_policies[0].minAllowed.cpu",
        ),
        (
            {
                "container_policies": [
                    {"containerName": "app", "maxAllowed": {"gpu": "1"}}
                ]
            },
            "container_policies[0].maxAllowed.gpu",
        ),
        (
            {
                "container_policies": [
                    {
                        "containerName": "app",
                        "minAllowed": {"memory": "2Gi"},
                        "maxAllowed": {"memory": "1Gi"},
                    }
                ]
            },
            "container_policies[0].maxAllowed.memory",
        ),
        (
            {
                "container_policies": [
                    {"containerName": "*", "controlledValues": "Sometimes"}
                ]
            },
            "container_policies[0].controlledValues",
        ),
        (
            {
                "container_policies": [
                    {"containerName": "*", "controlledResources": ["gpu"]}
                ]
            },
            "container_policies[0].controlledResources",
        ),
        (
            # Upstream rejects RequestsAndLimits together with mode Off (engine
            # ContainerPolicy).
            {
                "container_policies": [
                    {
                        "containerName": "app",
                        "mode": "Off",
                        "controlledValues": "RequestsAndLimits",
                    }
                ]
            },
            "container_policies[0]",
        ),
        (
            {
                "container_policies": [
                    {"containerName": "app"},
                    {"containerName": "app"},
                ]
            },
            "container_policies[1].containerName",
        ),
    ],
)
def test_invalid_changes_name_the_field_and_change_nothing(
    workload, operator, changes, field
):
    with pytest.raises(InvalidInput) as caught:
        update_policy(
            workload_id=workload.pk,
            changes={"mode": "Recreate", **changes},
            actor=operator,
            now=NOW,
        )

    assert field in caught.value.fields
    assert caught.value.fields[field][0]
    policy = Policy.objects.get(workload=workload)
    assert (policy.mode, policy.container_policies) == ("Off", [])
    assert not AuditEvent.objects.exists()


def test_unchanged_values_write_no_audit_event(workload, operator):
    update_policy(
        workload_id=workload.pk, changes={"mode": "Off"}, actor=operator, now=NOW
    )

    assert not AuditEvent.objects.exists()


def test_unknown_workload_is_not_found(db, operator):
    with pytest.raises(NotFound, match="workload 999"):
        update_policy(workload_id=999, changes={"mode": "Off"}, actor=operator, now=NOW)


def test_every_mode_has_a_plain_consequence():
    for mode in Policy.Mode.values:
        assert mode_consequence(mode).endswith(".")
    assert "never writes" in mode_consequence("Off")
    # No updater or webhook yet: every other mode says it is not acted on.
    for mode in ("Initial", "Recreate", "InPlaceOrRecreate"):
        assert mode_consequence(mode).startswith(
            "Stored and shown, but not acted on yet"
        )


def test_profile_is_one_of_the_engines(workload, operator):
    policy = update_policy(
        workload_id=workload.pk,
        changes={"profile": "peak-memory"},
        actor=operator,
        now=NOW,
    )

    assert policy.profile == "peak-memory"


def test_an_operator_edit_makes_an_imported_policy_vpawebs_own(workload, operator):
    Policy.objects.filter(workload=workload).update(source=Policy.Source.VPA_OBJECT)
    policy = update_policy(
        workload_id=workload.pk,
        changes={"profile": "peak-memory"},
        actor=operator,
        now=NOW,
    )
    assert policy.source == Policy.Source.VPAWEB
    assert Policy.objects.get(workload=workload).source == Policy.Source.VPAWEB

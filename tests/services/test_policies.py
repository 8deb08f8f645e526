"""update_policy: errors name fields, canonical storage, audit, nothing lost."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.errors import InvalidInput, NotFound
from recommender.models import AuditEvent, Policy
from recommender.roles import Role
from recommender.services.policy.changes import mode_consequence, update_policy
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
    # The updater acts on Recreate and InPlaceOrRecreate; Initial is the webhook's.
    assert "admission webhook" in mode_consequence("Initial")
    assert "running pods are left as they are" in mode_consequence("Initial")
    assert "evicts running pods" in mode_consequence("Recreate")
    assert "Eviction API" in mode_consequence("Recreate")
    assert "resizes running pods in place" in mode_consequence("InPlaceOrRecreate")
    assert "falls back to eviction" in mode_consequence("InPlaceOrRecreate")


def test_profile_is_one_of_the_engines(workload, operator):
    policy = update_policy(
        workload_id=workload.pk,
        changes={"profile": "peak-memory"},
        actor=operator,
        now=NOW,
    )

    assert policy.profile == "peak-memory"


def test_profile_overrides_keep_only_differences_and_are_audited(workload, operator):
    policy = update_policy(
        workload_id=workload.pk,
        changes={
            "profile_overrides": {
                "cpu_target_percentile": 0.95,
                "memory_target_percentile": 0.9,  # the vpa profile's own value
                "margin_fraction": 0,  # JSON's one number type: stored as 0.0
                "memory_estimator": "peak",
            }
        },
        actor=operator,
        now=NOW,
    )

    expected = {
        "cpu_target_percentile": 0.95,
        "memory_estimator": "peak",
        "margin_fraction": 0.0,
    }
    assert policy.profile_overrides == expected
    assert Policy.objects.get(workload=workload).profile_overrides == expected
    assert isinstance(policy.profile_overrides["margin_fraction"], float)
    event = AuditEvent.objects.get()
    assert event.before == {"profile_overrides": {}}
    assert event.after == {"profile_overrides": expected}
    assert "cpu_target_percentile=0.95" in event.message

    # {} means "the profile as is": the overrides are cleared, and audited.
    update_policy(
        workload_id=workload.pk,
        changes={"profile_overrides": {}},
        actor=operator,
        now=NOW,
    )
    assert Policy.objects.get(workload=workload).profile_overrides == {}
    cleared = AuditEvent.objects.latest("pk")
    assert (cleared.before, cleared.after) == (
        {"profile_overrides": expected},
        {"profile_overrides": {}},
    )
    assert "profile overrides cleared" in cleared.message


def test_overrides_equal_to_the_profile_store_and_audit_nothing(workload, operator):
    policy = update_policy(
        workload_id=workload.pk,
        changes={"profile_overrides": {"cpu_target_percentile": 0.9}},
        actor=operator,
        now=NOW,
    )

    assert policy.profile_overrides == {}
    assert not AuditEvent.objects.exists()


STORED_OVERRIDES = {"cpu_target_percentile": 0.95}


@pytest.mark.parametrize(
    ("overrides", "fields"),
    [
        ([0.95], ["profile_overrides"]),
        ("cpu_target_percentile=0.95", ["profile_overrides"]),
        ({"cpu_target": 0.95}, ["profile_overrides.cpu_target"]),
        ({"name": "mine"}, ["profile_overrides.name"]),
        ({"cpu_target_percentile": 1.5}, ["profile_overrides.cpu_target_percentile"]),
        ({"cpu_lower_percentile": -0.1}, ["profile_overrides.cpu_lower_percentile"]),
        (
            {"memory_upper_percentile": "0.99"},
            ["profile_overrides.memory_upper_percentile"],
        ),
        (
            {"memory_target_percentile": True},
            ["profile_overrides.memory_target_percentile"],
        ),
        (
            {"memory_target_percentile": None},
            ["profile_overrides.memory_target_percentile"],
        ),
        ({"margin_fraction": -0.15}, ["profile_overrides.margin_fraction"]),
        ({"margin_fraction": float("inf")}, ["profile_overrides.margin_fraction"]),
        ({"memory_estimator": "max"}, ["profile_overrides.memory_estimator"]),
        ({"cpu_half_life_s": 0}, ["profile_overrides.cpu_half_life_s"]),
        ({"memory_half_life_s": -3600}, ["profile_overrides.memory_half_life_s"]),
        ({"memory_window_s": 0.0}, ["profile_overrides.memory_window_s"]),
        ({"memory_window_count": 0}, ["profile_overrides.memory_window_count"]),
        ({"memory_window_count": 2.5}, ["profile_overrides.memory_window_count"]),
        ({"pod_min_cpu_millicores": -1}, ["profile_overrides.pod_min_cpu_millicores"]),
        ({"oom_bump_ratio": 0.9}, ["profile_overrides.oom_bump_ratio"]),
        (
            # Every bad field is named, not only the first; the good one is not.
            {
                "cpu_target_percentile": 2,
                "margin_fraction": 0.2,
                "memory_estimator": 1,
            },
            [
                "profile_overrides.cpu_target_percentile",
                "profile_overrides.memory_estimator",
            ],
        ),
    ],
)
def test_bad_profile_overrides_name_the_field_and_store_nothing(
    workload, operator, overrides, fields
):
    Policy.objects.filter(workload=workload).update(profile_overrides=STORED_OVERRIDES)

    with pytest.raises(InvalidInput) as caught:
        update_policy(
            workload_id=workload.pk,
            changes={"mode": "Recreate", "profile_overrides": overrides},
            actor=operator,
            now=NOW,
        )

    assert sorted(caught.value.fields) == sorted(fields)
    assert all(caught.value.fields[field][0] for field in fields)
    policy = Policy.objects.get(workload=workload)
    assert (policy.mode, policy.profile_overrides) == ("Off", STORED_OVERRIDES)
    assert not AuditEvent.objects.exists()


def test_overrides_are_checked_against_the_profile_chosen_in_the_same_call(
    workload, operator
):
    # p95-cpu-p99-memory already targets CPU p95: only memory differs from it.
    policy = update_policy(
        workload_id=workload.pk,
        changes={
            "profile": "p95-cpu-p99-memory",
            "profile_overrides": {
                "cpu_target_percentile": 0.95,
                "memory_target_percentile": 0.95,
            },
        },
        actor=operator,
        now=NOW,
    )

    assert (policy.profile, policy.profile_overrides) == (
        "p95-cpu-p99-memory",
        {"memory_target_percentile": 0.95},
    )
    event = AuditEvent.objects.get()
    assert event.after == {
        "profile": "p95-cpu-p99-memory",
        "profile_overrides": {"memory_target_percentile": 0.95},
    }


def test_a_profile_change_keeps_overrides_that_still_differ(workload, operator):
    Policy.objects.filter(workload=workload).update(
        profile_overrides={"cpu_target_percentile": 0.95, "margin_fraction": 0.1}
    )

    policy = update_policy(
        workload_id=workload.pk,
        changes={"profile": "peak-memory"},
        actor=operator,
        now=NOW,
    )

    # peak-memory targets CPU p95 itself, so that override is now no difference.
    assert policy.profile_overrides == {"margin_fraction": 0.1}
    event = AuditEvent.objects.get()
    assert event.before == {
        "profile": "vpa",
        "profile_overrides": {"cpu_target_percentile": 0.95, "margin_fraction": 0.1},
    }
    assert event.after == {
        "profile": "peak-memory",
        "profile_overrides": {"margin_fraction": 0.1},
    }


def test_a_profile_change_refuses_stored_overrides_the_engine_rejects(
    workload, operator
):
    # Stored by hand (or by an older version): the profile change names it.
    Policy.objects.filter(workload=workload).update(
        profile_overrides={"cpu_target_percentile": 3}
    )

    with pytest.raises(InvalidInput) as caught:
        update_policy(
            workload_id=workload.pk,
            changes={"profile": "peak-memory"},
            actor=operator,
            now=NOW,
        )

    (message,) = caught.value.fields["profile_overrides.cpu_target_percentile"]
    assert "stored override" in message
    policy = Policy.objects.get(workload=workload)
    assert (policy.profile, policy.profile_overrides) == (
        "vpa",
        {"cpu_target_percentile": 3},
    )
    assert not AuditEvent.objects.exists()

    # Sending overrides with the profile change fixes both at once.
    policy = update_policy(
        workload_id=workload.pk,
        changes={"profile": "peak-memory", "profile_overrides": {}},
        actor=operator,
        now=NOW,
    )
    assert (policy.profile, policy.profile_overrides) == ("peak-memory", {})


def test_bad_overrides_create_no_policy_row(workload, operator):
    Policy.objects.filter(workload=workload).delete()

    with pytest.raises(InvalidInput):
        update_policy(
            workload_id=workload.pk,
            changes={"profile_overrides": {"margin_fraction": "a lot"}},
            actor=operator,
            now=NOW,
        )

    assert not Policy.objects.filter(workload=workload).exists()

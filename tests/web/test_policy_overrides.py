"""The policy editor's profile overrides: pre-filled with the effective values, saved
through update_policy (errors next to each field, nothing stored on error), and shown
on the workload page with what they change."""

from __future__ import annotations

import pytest
from django.utils import timezone

from recommender.models import AuditEvent, Policy
from recommender.services.policy.changes import update_policy
from tests.factories import make_recommendation
from tests.web.conftest import engine_explanation

pytestmark = pytest.mark.django_db

# The vpa profile's values of the editor's fields: an untouched form.
UNTOUCHED = {
    "ov-cpu_target_percentile": "0.9",
    "ov-cpu_lower_percentile": "0.5",
    "ov-cpu_upper_percentile": "0.95",
    "ov-memory_target_percentile": "0.9",
    "ov-memory_lower_percentile": "0.5",
    "ov-memory_upper_percentile": "0.95",
    "ov-margin_fraction": "15",  # percent in the editor
    "ov-memory_estimator": "percentile",
}


def policy_form(**fields: str) -> dict[str, str]:
    """The editor as a browser posts it for the one-container "checkout", Off mode."""
    form = {
        "mode": "Off",
        "profile": "vpa",
        "cp0-mode": "Auto",
        "cp0-controlled_cpu": "on",
        "cp0-controlled_memory": "on",
        "cp1-mode": "Auto",
        "cp1-controlled_cpu": "on",
        "cp1-controlled_memory": "on",
        **UNTOUCHED,
    }
    form.update({key.replace("__", "-"): value for key, value in fields.items()})
    return form


def post(client, workload, form):
    return client.post(f"/workloads/{workload.pk}/policy", form, HTTP_HX_REQUEST="true")


def test_the_editor_is_prefilled_with_the_profiles_values(operator_client, small_fleet):
    body = operator_client.get(f"/workloads/{small_fleet['over'].pk}/").content.decode()

    assert 'data-testid="profile-overrides-editor"' in body
    assert 'name="ov-cpu_target_percentile" value="0.9"' in body
    assert 'placeholder="0.9"' in body
    assert "profile vpa: 0.5" in body  # the profile's value, next to the field
    # The margin is shown in percent, with its bounds.
    assert 'name="ov-margin_fraction" value="15.0"' in body
    assert "profile vpa: 15 %; 0 to 100" in body


def test_saving_an_override_stores_only_the_difference_and_audits_it(
    operator_client, small_fleet
):
    workload = small_fleet["over"]

    response = post(
        operator_client,
        workload,
        policy_form(ov__cpu_target_percentile="0.95", ov__memory_estimator="peak"),
    )

    body = response.content.decode()
    assert 'data-testid="policy-saved"' in body, body
    expected = {"cpu_target_percentile": 0.95, "memory_estimator": "peak"}
    assert Policy.objects.get(workload=workload).profile_overrides == expected
    event = AuditEvent.objects.get()
    assert event.after == {"profile_overrides": expected}
    # The re-rendered editor shows the override as the field's value, and is open.
    assert 'name="ov-cpu_target_percentile" value="0.95"' in body
    assert "(2 in effect)" in body

    # An untouched form changes nothing more; emptied fields drop their override.
    post(
        operator_client,
        workload,
        policy_form(ov__cpu_target_percentile="0.95", ov__memory_estimator="peak"),
    )
    assert AuditEvent.objects.count() == 1
    post(operator_client, workload, policy_form(ov__cpu_target_percentile=""))
    assert Policy.objects.get(workload=workload).profile_overrides == {}
    assert AuditEvent.objects.count() == 2


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("ov-cpu_target_percentile", "1.5", "must be a number in [0, 1]"),
        ("ov-memory_upper_percentile", "-0.1", "must be a number in [0, 1]"),
        ("ov-margin_fraction", "-20", "greater than or equal to 0"),
        ("ov-margin_fraction", "1500", "less than or equal to 100"),
        ("ov-memory_lower_percentile", "lots", "Enter a number."),
        ("ov-memory_estimator", "median", "Select a valid choice."),
    ],
)
def test_a_bad_override_shows_next_to_its_field_and_stores_nothing(
    operator_client, small_fleet, field, value, message
):
    workload = small_fleet["over"]

    response = operator_client.post(
        f"/workloads/{workload.pk}/policy",
        {**policy_form(min_replicas="2"), field: value},
    )

    assert response.status_code == 422
    assert message in response.content.decode()
    assert list(response.context["form"].errors) == [field]
    policy = Policy.objects.get(workload=workload)
    assert (policy.profile_overrides, policy.min_replicas) == ({}, None)
    assert not AuditEvent.objects.exists()


def test_overrides_set_through_the_api_are_shown_and_kept(
    operator, operator_client, small_fleet
):
    workload = small_fleet["over"]
    update_policy(
        workload_id=workload.pk,
        changes={"profile_overrides": {"cpu_half_life_s": 43200}},
        actor=operator,
        now=timezone.now(),
    )

    page = operator_client.get(f"/workloads/{workload.pk}/policy").content.decode()
    assert "cpu_half_life_s=43200.0" in page
    post(operator_client, workload, policy_form(ov__margin_fraction="10"))

    assert Policy.objects.get(workload=workload).profile_overrides == {
        "cpu_half_life_s": 43200.0,
        "margin_fraction": 0.1,
    }


def test_fields_left_at_the_old_profiles_values_follow_a_new_profile(
    operator_client, small_fleet
):
    workload = small_fleet["over"]

    # The editor showed vpa's values; the operator picks another profile and
    # changes only the margin.
    post(
        operator_client,
        workload,
        policy_form(profile="p95-cpu-p99-memory", ov__margin_fraction="10"),
    )

    policy = Policy.objects.get(workload=workload)
    assert (policy.profile, policy.profile_overrides) == (
        "p95-cpu-p99-memory",
        {"margin_fraction": 0.1},
    )


def test_the_workload_page_says_which_overrides_are_in_effect(
    operator, viewer_client, small_fleet
):
    workload = small_fleet["over"]
    update_policy(
        workload_id=workload.pk,
        changes={
            "profile_overrides": {"cpu_target_percentile": 0.95, "margin_fraction": 0}
        },
        actor=operator,
        now=timezone.now(),
    )

    # The latest recommendation predates the overrides: the page says so.
    body = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()
    assert 'data-testid="profile-overrides"' in body
    assert "CPU target percentile p90 → p95" in body
    assert "Safety margin +15% → +0%" in body
    assert "with 2 overrides" in body
    assert 'data-testid="profile-stale-app"' in body

    # A recommendation computed with them lists them in its explanation.
    explanation = engine_explanation()
    explanation["profile_overrides"] = {
        "cpu_target_percentile": {"profile": 0.9, "override": 0.95},
        "margin_fraction": {"profile": 0.15, "override": 0.0},
    }
    make_recommendation(workload.containers.get(), explanation=explanation)
    body = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()
    assert "<dt>Profile overrides</dt>" in body
    assert 'data-testid="profile-stale-app"' not in body


def test_a_workload_without_overrides_shows_none(viewer_client, small_fleet):
    body = viewer_client.get(f"/workloads/{small_fleet['over'].pk}/").content.decode()

    assert 'data-testid="profile-overrides"' not in body
    assert "Profile overrides" not in body  # viewers see no editor either
    assert 'data-testid="profile-stale-app"' not in body


def test_a_margin_typed_in_percent_is_stored_as_a_fraction(
    operator_client, small_fleet
):
    workload = small_fleet["over"]

    post(operator_client, workload, policy_form(ov__margin_fraction="12.5"))

    assert Policy.objects.get(workload=workload).profile_overrides == {
        "margin_fraction": 0.125
    }
    page = operator_client.get(f"/workloads/{workload.pk}/policy").content.decode()
    assert 'name="ov-margin_fraction" value="12.5"' in page


def test_a_change_more_than_doubling_a_target_asks_first(operator_client, small_fleet):
    workload = small_fleet["over"]  # app: target 250m
    form = policy_form(cp1__min_cpu="1")

    asked = post(operator_client, workload, form).content.decode()

    assert 'data-testid="confirm-large-increase"' in asked
    assert "app cpu 250m → 1 (4.0×)" in asked
    assert Policy.objects.get(workload=workload).container_policies == []
    assert not AuditEvent.objects.exists()

    saved = post(operator_client, workload, {**form, "confirm_large_increase": "yes"})
    assert 'data-testid="policy-saved"' in saved.content.decode()
    entry = Policy.objects.get(workload=workload).container_policies[0]
    assert entry["minAllowed"] == {"cpu": "1"}

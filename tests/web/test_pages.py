"""Dashboard pages render what the services compute, for the right roles."""

from __future__ import annotations

import pytest

from recommender.models import AuditEvent, Policy, ResizeChange

pytestmark = pytest.mark.django_db


def test_overview_shows_fleet_totals_risks_and_empty_runs(viewer_client, small_fleet):
    response = viewer_client.get("/")

    assert response.status_code == 200
    body = response.content.decode()
    assert 'data-testid="fleet-cpu"' in body
    assert "payments" in body  # under-provisioned: at risk
    assert "No usage samples yet" in body  # why batch has no recommendation
    assert "No refresh has run yet" in body


def test_overview_fragment_for_htmx(viewer_client, small_fleet):
    response = viewer_client.get("/", HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert (
        body.lstrip().startswith('<div id="overview-live"')
        or 'id="overview-live"' in body[:400]
    )
    assert "<html" not in body


def test_workloads_list_filters_by_status(viewer_client, small_fleet):
    response = viewer_client.get("/workloads/?status=under")

    body = response.content.decode()
    assert "pay/payments" in body
    assert "default/checkout" not in body


def test_workload_page_shows_numbers_explanation_and_patch(viewer_client, small_fleet):
    response = viewer_client.get(f"/workloads/{small_fleet['over'].pk}/")

    body = response.content.decode()
    assert response.status_code == 200
    assert "kubectl --namespace default patch deployment checkout" in body
    assert "Confidence" in body
    assert "4,000" in body  # sample count in words
    assert "Save policy" not in body  # viewers can't edit


def test_workload_page_without_recommendation_says_why(viewer_client, small_fleet):
    response = viewer_client.get(f"/workloads/{small_fleet['nodata'].pk}/")

    body = response.content.decode()
    assert "No recommendation yet." in body
    assert "Nothing to apply yet." in body


def test_policy_change_needs_confirmation_to_leave_off(operator_client, small_fleet):
    workload = small_fleet["over"]
    url = f"/workloads/{workload.pk}/policy"
    form = {
        "mode": "Recreate",
        "profile": "vpa",
        "cp0-mode": "Auto",
        "cp0-controlled_cpu": "on",
        "cp0-controlled_memory": "on",
        "cp1-mode": "Auto",
        "cp1-controlled_cpu": "on",
        "cp1-controlled_memory": "on",
    }

    first = operator_client.post(url, form, HTTP_HX_REQUEST="true")

    assert "evicted" in first.content.decode()
    assert Policy.objects.get(workload=workload).mode == "Off"
    second = operator_client.post(
        url, {**form, "confirm_mode": "Recreate"}, HTTP_HX_REQUEST="true"
    )
    assert 'data-testid="policy-saved"' in second.content.decode()
    assert Policy.objects.get(workload=workload).mode == "Recreate"
    assert AuditEvent.objects.get().action == "policy.update"


def test_policy_errors_show_next_to_the_field(operator_client, small_fleet):
    workload = small_fleet["over"]
    form = {
        "mode": "Off",
        "profile": "vpa",
        "cp0-mode": "Auto",
        "cp0-controlled_cpu": "on",
        "cp0-controlled_memory": "on",
        "cp1-mode": "Auto",
        "cp1-min_cpu": "lots",
        "cp1-controlled_cpu": "on",
        "cp1-controlled_memory": "on",
    }

    response = operator_client.post(f"/workloads/{workload.pk}/policy", form)

    assert response.status_code == 422
    assert "&#x27;lots&#x27; is not a valid quantity" in response.content.decode()
    assert response.context["form"].errors["cp1-min_cpu"]
    assert Policy.objects.get(workload=workload).container_policies == []


def test_viewer_cannot_edit_policies_or_approve(viewer_client, small_fleet):
    workload = small_fleet["over"]
    change = ResizeChange.objects.create(workload=workload, pod="p")

    assert (
        viewer_client.post(
            f"/workloads/{workload.pk}/policy", {"mode": "Initial"}
        ).status_code
        == 403
    )
    assert viewer_client.post(f"/changes/{change.pk}/approve").status_code == 403
    change.refresh_from_db()
    assert change.status == "proposed"


def test_approve_from_the_changes_page(operator_client, small_fleet):
    workload = small_fleet["over"]
    Policy.objects.filter(workload=workload).update(mode="Recreate")
    change = ResizeChange.objects.create(
        workload=workload,
        pod="checkout-1",
        resources_before={"app": {"requests": {"cpu": 1000}}},
        resources_after={"app": {"requests": {"cpu": 250}}},
    )

    page = operator_client.get("/changes/")
    response = operator_client.post(
        f"/changes/{change.pk}/approve", HTTP_HX_REQUEST="true"
    )

    assert "Approve" in page.content.decode()
    assert 'data-testid="change-status">approved' in response.content.decode()
    assert AuditEvent.objects.get().action == "change.approve"


def test_changes_empty_state_explains_itself(viewer_client, db):
    body = viewer_client.get("/changes/").content.decode()

    assert "No resize changes yet." in body
    assert "Off mode" in body


def test_audit_log_filters_by_action(operator, operator_client, small_fleet):
    AuditEvent.objects.create(action="policy.update", actor_label="olga", message="m1")
    AuditEvent.objects.create(action="change.approve", actor_label="olga", message="m2")

    body = operator_client.get("/audit/?action=change.approve").content.decode()

    assert "m2" in body
    assert "m1" not in body


def test_admin_sets_a_role_and_it_is_audited(admin_client_, viewer):
    response = admin_client_.post(
        "/users/", {"form": "role", "user_id": viewer.pk, "role": "operator"}
    )

    assert response.status_code == 302
    assert viewer.groups.get().name == "operator"
    event = AuditEvent.objects.get()
    assert (event.before, event.after) == ({"role": "viewer"}, {"role": "operator"})


def test_operator_cannot_manage_users(operator_client):
    assert operator_client.get("/users/").status_code == 403

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


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("status=nodata", "status"),
        ("sort=cost", "sort"),
        ("kind=Pod", "kind"),
        ("mode=Inplace", "mode"),
        ("at_risk=yes", "at_risk"),
        ("wasteful=1", "wasteful"),
        ("missing_requests=maybe", "missing_requests"),
        ("sort=-savings", "sort"),
    ],
)
def test_workloads_list_refuses_unknown_filter_values(
    viewer_client, small_fleet, query, name
):
    response = viewer_client.get(f"/workloads/?{query}")

    assert response.status_code == 400
    body = response.content.decode()
    assert 'data-testid="filter-errors"' in body
    value = query.split("=", 1)[1]
    assert f"{name}: &#x27;{value}&#x27; is not a {name}; choose one of" in body
    # htmx swaps only 2xx answers: the same message, in a 200.
    partial = viewer_client.get(f"/workloads/?{query}", HTTP_HX_REQUEST="true")
    assert partial.status_code == 200
    assert 'data-testid="filter-errors"' in partial.content.decode()


def test_workloads_list_known_values_show_no_error(viewer_client, small_fleet):
    response = viewer_client.get("/workloads/?status=no-data&sort=savings&mode=Off")

    assert response.status_code == 200
    assert 'data-testid="filter-errors"' not in response.content.decode()


def test_workload_page_shows_numbers_explanation_and_patch(viewer_client, small_fleet):
    response = viewer_client.get(f"/workloads/{small_fleet['over'].pk}/")

    body = response.content.decode()
    assert response.status_code == 200
    assert "kubectl --namespace default patch deployment checkout" in body
    assert "CPU confidence" in body
    assert "p90 of the decayed usage" in body
    assert "1,500" in body  # samples: one a minute for 25 h
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

    assert "evicts running pods" in first.content.decode()
    # Manual approval is the default: the confirmation says changes wait for it.
    assert "Approval manual: each change waits" in first.content.decode()
    assert Policy.objects.get(workload=workload).mode == "Off"
    second = operator_client.post(
        url, {**form, "confirm_mode": "Recreate"}, HTTP_HX_REQUEST="true"
    )
    assert 'data-testid="policy-saved"' in second.content.decode()
    assert Policy.objects.get(workload=workload).mode == "Recreate"
    assert AuditEvent.objects.get().action == "policy.update"
    # Leaving Recreate needs a confirmation too, as every change between modes does.
    third = operator_client.post(url, {**form, "mode": "Off"}, HTTP_HX_REQUEST="true")
    assert "from Recreate to Off" in third.content.decode()
    assert Policy.objects.get(workload=workload).mode == "Recreate"


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
    assert "mode is Recreate or InPlaceOrRecreate" in body
    assert "starts in Off" in body


def test_audit_log_filters_by_action(operator, operator_client, small_fleet):
    # Messages no random token (CSRF, nonce) can contain by chance.
    AuditEvent.objects.create(
        action="policy.update", actor_label="olga", message="raised the cpu floor"
    )
    AuditEvent.objects.create(
        action="change.approve", actor_label="olga", message="approved the resize"
    )

    body = operator_client.get("/audit/?action=change.approve").content.decode()

    assert "approved the resize" in body
    assert "raised the cpu floor" not in body


def test_admin_sets_a_role_and_it_is_audited(admin_client_, viewer):
    response = admin_client_.post(
        "/users/", {"form": "role", "user_id": viewer.pk, "role": "operator"}
    )

    assert response.status_code == 302
    assert viewer.groups.get().name == "operator"
    event = AuditEvent.objects.get()
    assert (event.before, event.after) == ({"role": "viewer"}, {"role": "operator"})


def test_admin_deactivates_a_user_who_then_cannot_log_in(admin_client_, viewer, client):
    response = admin_client_.post(
        "/users/", {"form": "active", "user_id": viewer.pk, "active": "false"}
    )

    assert response.status_code == 302
    viewer.refresh_from_db()
    assert not viewer.is_active
    login = client.post(
        "/login/", {"username": viewer.username, "password": "pw-for-tests-only"}
    )
    assert login.status_code == 200  # the form again, not a redirect
    assert "_auth_user_id" not in client.session
    assert "(inactive)" in admin_client_.get("/users/").content.decode()


def test_admin_sets_a_new_password_and_a_short_one_is_refused(admin_client_, viewer):
    admin_client_.post(
        "/users/", {"form": "password", "user_id": viewer.pk, "password": "short"}
    )
    viewer.refresh_from_db()
    assert viewer.check_password("pw-for-tests-only")

    response = admin_client_.post(
        "/users/",
        {"form": "password", "user_id": viewer.pk, "password": "brand-new-secret"},
    )
    assert response.status_code == 302
    viewer.refresh_from_db()
    assert viewer.check_password("brand-new-secret")


def test_operator_cannot_manage_users(operator_client):
    assert operator_client.get("/users/").status_code == 403


def test_charts_fragment_reads_engine_state_and_stored_usage(viewer_client, settings):
    import json
    import re

    import numpy as np
    from django.utils import timezone

    from recommender.cluster.simulated import build_fleet
    from recommender.engine.aggregation import AggregateSet, SampleBatch
    from recommender.engine.profiles import get_profile
    from recommender.models import Checkpoint, UsageHour
    from tests.factories import make_cluster, make_workload

    settings.SIMULATION_WORKLOADS = 6
    sim = next(
        w
        for w in build_fleet(settings.SIMULATION_SEED, 6).workloads
        if w.kind == "Deployment"
    )
    name = next(c.name for c in sim.containers if c.usage is not None)
    workload = make_workload(
        make_cluster("sim"),
        sim.name,
        namespace=sim.namespace,
        containers={
            name: {"request_cpu_millicores": 500, "request_memory_bytes": 512 * MI}
        },
    )
    # Engine state: one day of a steady 0.3 cores and 200 MB, checkpointed as refresh
    # does.
    now_s = timezone.now().timestamp()
    times = now_s - np.arange(1440)[::-1] * 60.0
    aggregates = AggregateSet.empty(get_profile("vpa"), 1)
    aggregates.add_samples(
        SampleBatch.from_grid(
            series_aggregate=np.array([0]),
            series_keys=["pod-a"],
            timestamp_s=times,
            cpu_cores=np.full((1, times.size), 0.3),
            memory_bytes=np.full((1, times.size), 2e8),
        )
    )
    Checkpoint.objects.create(
        container=workload.containers.get(),
        histogram_key="vpa",
        state=aggregates.to_checkpoints()[0],
        sample_count=1440,
    )

    # What the refresh stores of the same samples: an hour of them.
    UsageHour.objects.create(
        container=workload.containers.get(),
        ends_at=timezone.now().replace(minute=0, second=0, microsecond=0),
        cpu_max_cores=0.3,
        cpu_sum_cores=18.0,
        cpu_samples=60,
        memory_max_bytes=2e8,
        memory_sum_bytes=1.2e10,
        memory_samples=60,
    )

    response = viewer_client.get(
        f"/workloads/{workload.pk}/charts", HTTP_HX_REQUEST="true"
    )

    body = response.content.decode()
    data = json.loads(
        re.search(r'id="chart-data"[^>]*>(.*?)</script>', body, re.S).group(1)
    )
    cpu = data["distributions"][name]["cpu"]
    assert 0.29 < cpu["percentiles"]["p90"] < 0.33  # within one bucket of 0.3 cores
    assert sum(cpu["weight"]) > 0
    usage = data["usage"][name]
    assert len(usage["t"]) == 8 * 24  # hourly points over 8 days
    assert [v for v in usage["cpu_mean"] if v is not None] == [pytest.approx(0.3)]
    assert data["containers"][name]["request_cpu"] == 500


MI = 2**20


def test_changes_page_filters_and_bulk_approves_by_namespace(operator_client, db):
    from tests.factories import make_cluster, make_workload

    workload = make_workload(
        make_cluster("prod"), "api", namespace="shop", mode="Recreate"
    )
    change = ResizeChange.objects.create(
        workload=workload,
        pod="api-1",
        reason="CPU request 500m is above the upper bound",
        observed={"app": {"requests": {"cpu": 250}}},
        resources_after={"app": {"requests": {"cpu": 250}}},
        resources_before={"app": {"requests": {"cpu": 500}}},
    )
    body = operator_client.get("/changes/?namespace=shop&method=in-place").content
    assert b"CPU request 500m is above the upper bound" in body
    assert b'data-testid="change-observed">pod has: cpu 250m' in body
    assert (
        b"No changes match these filters"
        in operator_client.get("/changes/?namespace=elsewhere").content
    )
    # Bulk approval asks first (tests/web/test_changes_page.py), then approves.
    response = operator_client.post(
        "/changes/approve",
        {"cluster": "prod", "namespace": "shop", "confirm": "yes", "change": change.pk},
    )
    assert response.status_code == 302
    change.refresh_from_db()
    assert change.status == "approved"


def test_viewers_cannot_approve_in_bulk_or_stop_writes(
    viewer_client, operator_client, db
):
    assert viewer_client.post("/changes/approve", {"workload": "1"}).status_code == 403
    assert (
        operator_client.post("/updater/kill-switch", {"stopped": "1"}).status_code
        == 403
    )


def test_an_admin_stops_all_writes_and_pauses_a_cluster(admin_client_, db):
    admin_client = admin_client_
    from recommender.models import ActuationControl, Cluster

    cluster = Cluster.objects.create(name="prod", kind="simulated")
    admin_client.post("/updater/kill-switch", {"stopped": "1", "reason": "incident 42"})
    assert ActuationControl.objects.get().writes_stopped
    body = admin_client.get("/changes/").content.decode()
    assert "Every cluster write is stopped" in body and "incident 42" in body
    admin_client.post(f"/clusters/{cluster.pk}/pause", {"paused": "1"})
    cluster.refresh_from_db()
    assert cluster.updates_paused
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"updater.kill_switch", "updater.pause"} <= actions


def test_workloads_list_sorts_with_the_apis_vocabulary(viewer_client, small_fleet):
    """``ordering=`` takes the API's keys; the older ``sort=`` is its alias."""
    by_ordering = viewer_client.get("/workloads/?ordering=-savings_monthly")
    by_sort = viewer_client.get("/workloads/?sort=savings")
    assert by_ordering.status_code == by_sort.status_code == 200
    names = [w.name for w in by_ordering.context["page_obj"]]
    assert names == [w.name for w in by_sort.context["page_obj"]]
    savings = [w.savings for w in by_ordering.context["page_obj"]]
    assert savings == sorted(savings, reverse=True)
    assert 'value="-savings_monthly" selected' in by_sort.content.decode()
    # Keys the dashboard's menu does not offer work from the address bar too.
    by_name = viewer_client.get("/workloads/?ordering=-name")
    listed = [w.name for w in by_name.context["page_obj"]]
    assert listed == sorted(listed, reverse=True)
    refused = viewer_client.get("/workloads/?ordering=savings_montly")
    assert refused.status_code == 400
    assert "ordering: not a list of sort keys" in refused.content.decode()


def test_overview_coverage_says_what_it_counts(viewer_client, small_fleet):
    from recommender.models import Container

    workload = small_fleet["over"]
    Container.objects.create(
        workload=workload, name="migrate", kind=Container.Kind.INIT, position=9
    )
    body = viewer_client.get("/").content.decode()
    counted = Container.objects.exclude(kind=Container.Kind.INIT).count()
    assert f"of {counted} app and sidecar containers in" in body
    assert "(init containers are never sized and not counted)" in body


def test_an_admin_allows_writes_to_a_cluster_and_sees_its_write_paths(
    admin_client_, operator_client, db
):
    from recommender.models import Cluster

    cluster = Cluster.objects.create(name="prod", kind="kubernetes", context="x")
    assert (
        operator_client.post(
            f"/clusters/{cluster.pk}/actuation", {"allowed": "1"}
        ).status_code
        == 403
    )
    body = admin_client_.get("/changes/").content.decode()
    assert "not allowed</strong>: vpaweb only reads it" in body
    assert "Allow writes to prod" in body
    admin_client_.post(f"/clusters/{cluster.pk}/actuation", {"allowed": "1"})
    cluster.refresh_from_db()
    assert cluster.actuation_allowed
    Cluster.objects.filter(pk=cluster.pk).update(
        write_permissions={
            "checked_at": "2026-11-24T06:00:00+00:00",
            "error": "",
            "paths": {
                "resize": {"allowed": False, "reason": "patch pods/resize: denied"}
            },
        }
    )
    body = admin_client_.get("/changes/").content.decode()
    assert 'title="patch pods/resize: denied">missing' in body
    assert "Forbid writes to prod" in body
    assert AuditEvent.objects.filter(action="cluster.actuation").count() == 1

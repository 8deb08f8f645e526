"""Every model has a Django admin page that renders."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from tests.factories import make_cluster, make_workload


def test_every_model_of_the_app_is_registered():
    models = apps.get_app_config("recommender").get_models()
    assert [m.__name__ for m in models if not admin.site.is_registered(m)] == []


@pytest.mark.django_db
def test_admin_changelists_render_for_a_superuser(client, django_user_model):
    make_workload(make_cluster())
    superuser = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(superuser)
    for model in apps.get_app_config("recommender").get_models():
        meta = model._meta
        url = reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")
        assert client.get(url).status_code == 200, url


@pytest.mark.django_db
def test_the_admin_kill_switch_and_pause_go_through_the_audited_service(
    client, django_user_model
):
    from recommender.models import ActuationControl, AuditEvent, Cluster

    cluster = make_cluster()
    superuser = django_user_model.objects.create_superuser("root", password="pw")
    client.force_login(superuser)
    response = client.post(
        reverse("admin:recommender_actuationcontrol_add"),
        {"writes_stopped": "on", "reason": "incident 7"},
    )
    assert response.status_code == 302
    assert ActuationControl.objects.get().writes_stopped
    event = AuditEvent.objects.get(action="updater.kill_switch")
    assert event.actor_label == "root" and "incident 7" in event.message
    client.post(
        reverse("admin:recommender_cluster_changelist"),
        {"action": "pause_updates", "_selected_action": [cluster.pk]},
    )
    assert Cluster.objects.get(pk=cluster.pk).updates_paused
    assert AuditEvent.objects.filter(action="updater.pause").count() == 1


def test_the_cluster_form_checks_the_namespace_selector(db):
    from recommender.admin import ClusterForm

    base = {"name": "prod", "kind": "kubernetes", "context": "c", "is_enabled": True}
    base.update(vpa_objects_without_target="[]", created_at="2026-11-21 12:00:00")
    good = ClusterForm(data={**base, "namespace_selector": " vpaweb.io/enabled=true "})
    assert good.is_valid(), good.errors
    assert good.cleaned_data["namespace_selector"] == "vpaweb.io/enabled=true"

    bad = ClusterForm(data={**base, "namespace_selector": "team in (a"})
    assert not bad.is_valid()
    assert "team in (a" in bad.errors["namespace_selector"][0]


# Rows vpaweb writes itself: the refresh's history and read models, discovery's
# records, resize changes (their status moves only through ResizeChange.transition),
# the audit trail, the updater's lease, tokens (created through their audited service)
# and deliveries.
WRITTEN_BY_VPAWEB = [
    "Recommendation",
    "Checkpoint",
    "OomKill",
    "RefreshRun",
    "AdmissionCount",
    "ResizeChange",
    "AuditEvent",
    "NamespaceTotals",
    "NodePool",
    "WorkloadTotals",
    "WorkloadAmounts",
    "GroupTotals",
    "UsageHour",
    "AdmissionChange",
    "SavingsSnapshot",
    "NamespaceLimitRange",
    "WorkloadPod",
    "UpdaterLock",
    "ApiToken",
    "NotificationDelivery",
]


@pytest.mark.django_db
def test_rows_vpaweb_writes_itself_are_never_added_or_edited_in_the_admin(
    rf, django_user_model
):
    request = rf.get("/admin/")
    request.user = django_user_model.objects.create_superuser("root", password="pw")
    editable = []
    for name in WRITTEN_BY_VPAWEB:
        model_admin = admin.site._registry[apps.get_model("recommender", name)]
        if model_admin.has_add_permission(request) or model_admin.has_change_permission(
            request
        ):
            editable.append(name)
        assert model_admin.has_view_permission(request), name
    assert editable == []

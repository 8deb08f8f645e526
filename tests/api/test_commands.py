"""Commands with write access: policy updates, approving and rejecting resize changes,
static coefficients. Each is validated, audited, and loses nothing on bad input."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from recommender.models import (
    AuditEvent,
    Policy,
    ResizeChange,
    StaticCoefficient,
    Workload,
)

pytestmark = pytest.mark.django_db


def _patch(client: Client, workload: Workload, body: Any) -> Any:
    return client.patch(
        f"/api/v1/workloads/{workload.pk}/policy", body, content_type="application/json"
    )


def test_policy_update_is_validated_canonical_and_audited(
    write_client: Client, shop: Workload
) -> None:
    response = _patch(
        write_client,
        shop,
        {
            "mode": "Initial",
            "container_policies": [
                {
                    "containerName": "app",
                    "minAllowed": {"cpu": "0.1"},
                    "maxAllowed": {"memory": "2048Mi"},
                }
            ],
        },
    )
    assert response.status_code == 200
    entry = response.json()["container_policies"][0]
    assert entry["minAllowed"] == {"cpu": "100m"} and entry["maxAllowed"] == {
        "memory": "2Gi"
    }
    event = AuditEvent.objects.get(action="policy.update")
    assert event.after["mode"] == "Initial"


def test_policy_update_by_natural_key(write_client: Client, shop: Workload) -> None:
    response = write_client.patch(
        "/api/v1/clusters/prod/namespaces/shop/workloads/Deployment/web/policy",
        {"min_replicas": 2},
        content_type="application/json",
    )
    assert response.status_code == 200 and response.json()["min_replicas"] == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"mode": "Sometimes"}, "mode"),
        (
            {
                "container_policies": [
                    {"containerName": "app", "minAllowed": {"cpu": "12 cores"}}
                ]
            },
            "container_policies[0].minAllowed.cpu",
        ),
        (
            {
                "container_policies": [
                    {"containerName": "app", "maxAllowed": {"memory": "-1Gi"}}
                ]
            },
            "container_policies[0].maxAllowed.memory",
        ),
        (
            {"container_policies": [{"containerName": "nginx"}]},
            "container_policies[0].containerName",
        ),
        (
            {
                "container_policies": [
                    {
                        "containerName": "app",
                        "minAllowed": {"cpu": "2"},
                        "maxAllowed": {"cpu": "1"},
                    }
                ]
            },
            "container_policies[0].maxAllowed.cpu",
        ),
        ({"min_replicas": 0}, "min_replicas"),
        ({"profile": "no-such-profile"}, "profile"),
        ({"owner": "me"}, "owner"),
        ({"profile_overrides": None}, "profile_overrides"),
        ({"profile_overrides": [0.95]}, "profile_overrides"),
        ({"profile_overrides": {"cpu_p95": 1}}, "profile_overrides.cpu_p95"),
        (
            {"profile_overrides": {"cpu_target_percentile": 1.5}},
            "profile_overrides.cpu_target_percentile",
        ),
        (
            {"profile_overrides": {"memory_target_percentile": "p99"}},
            "profile_overrides.memory_target_percentile",
        ),
        (
            {"profile_overrides": {"margin_fraction": -1}},
            "profile_overrides.margin_fraction",
        ),
        (
            {"profile_overrides": {"memory_estimator": "mean"}},
            "profile_overrides.memory_estimator",
        ),
        (
            {"profile_overrides": {"memory_half_life_s": 0}},
            "profile_overrides.memory_half_life_s",
        ),
        (
            # A good profile with a bad override: neither is stored.
            {
                "profile": "peak-memory",
                "profile_overrides": {"memory_window_count": 0},
            },
            "profile_overrides.memory_window_count",
        ),
    ],
)
def test_bad_policy_input_names_the_field_and_changes_nothing(
    write_client: Client, shop: Workload, body: dict[str, Any], field: str
) -> None:
    response = _patch(write_client, shop, body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert field in error["fields"], error
    policy = Policy.objects.get(workload=shop)
    assert (
        policy.mode,
        policy.profile,
        policy.profile_overrides,
        policy.container_policies,
        policy.min_replicas,
    ) == ("Off", "vpa", {}, [], None)
    assert not AuditEvent.objects.filter(action="policy.update").exists()


def test_a_target_above_its_band_is_refused_naming_the_field_sent(
    write_client: Client, shop: Workload
) -> None:
    response = _patch(
        write_client, shop, {"profile_overrides": {"memory_target_percentile": 0.99}}
    )

    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert list(fields) == ["profile_overrides.memory_target_percentile"]
    assert (
        "memory_upper_percentile: must be at least"
        in fields["profile_overrides.memory_target_percentile"][0]
    )
    assert read_overrides(write_client, shop) == {}


def test_profile_overrides_are_stored_trimmed_and_audited(
    write_client: Client, shop: Workload
) -> None:
    response = _patch(
        write_client,
        shop,
        {
            "profile_overrides": {
                "cpu_target_percentile": 0.95,
                "memory_target_percentile": 0.99,
                "memory_upper_percentile": 0.99,
                "cpu_lower_percentile": 0.5,  # the vpa profile's own value
            }
        },
    )

    assert response.status_code == 200, response.content
    expected = {
        "cpu_target_percentile": 0.95,
        "memory_target_percentile": 0.99,
        "memory_upper_percentile": 0.99,
    }
    assert response.json()["profile_overrides"] == expected
    assert read_overrides(write_client, shop) == expected
    event = AuditEvent.objects.get(action="policy.update")
    assert event.actor_label == "token:ci-write"
    assert (event.before, event.after) == (
        {"profile_overrides": {}},
        {"profile_overrides": expected},
    )

    # Switching to the profile that has both values leaves no difference to store.
    response = _patch(write_client, shop, {"profile": "p95-cpu-p99-memory"})
    assert response.status_code == 200
    assert response.json()["profile_overrides"] == {}


def read_overrides(client: Client, workload: Workload) -> Any:
    response = client.get(f"/api/v1/workloads/{workload.pk}/policy")
    assert response.status_code == 200
    return response.json()["profile_overrides"]


def test_a_read_token_cannot_set_profile_overrides(
    read_client: Client, shop: Workload
) -> None:
    response = _patch(
        read_client, shop, {"profile_overrides": {"cpu_target_percentile": 0.95}}
    )

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert read_overrides(read_client, shop) == {}
    assert not AuditEvent.objects.filter(action="policy.update").exists()


def test_malformed_json_is_a_clear_400(write_client: Client, shop: Workload) -> None:
    response = write_client.patch(
        f"/api/v1/workloads/{shop.pk}/policy",
        "{mode: ",
        content_type="application/json",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "malformed" and "not valid JSON" in error["message"]


def _proposed(workload: Workload, mode: str = Policy.Mode.INITIAL) -> ResizeChange:
    Policy.objects.filter(workload=workload).update(mode=mode)
    return ResizeChange.objects.create(workload=workload, pod="web-1")


def test_approve_then_reject_and_conflicts(
    write_client: Client, shop: Workload
) -> None:
    change = _proposed(shop)
    approved = write_client.post(f"/api/v1/changes/{change.pk}/approve")
    assert approved.status_code == 200
    assert (
        approved.json()["status"] == "approved"
        and approved.json()["decided_by"] == "olga"
    )
    again = write_client.post(f"/api/v1/changes/{change.pk}/approve")
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    rejected = write_client.post(
        f"/api/v1/changes/{change.pk}/reject",
        {"reason": "peak season"},
        content_type="application/json",
    )
    assert rejected.status_code == 200 and rejected.json()["status"] == "rejected"
    decisions = AuditEvent.objects.filter(action__startswith="change.").order_by("id")
    actions = list(decisions.values_list("action", "actor_label"))
    assert actions == [
        ("change.approve", "token:ci-write"),
        ("change.reject", "token:ci-write"),
    ]
    assert "peak season" in AuditEvent.objects.get(action="change.reject").message


def test_approving_a_change_of_an_off_workload_is_a_conflict(
    write_client: Client, shop: Workload
) -> None:
    change = _proposed(shop, mode=Policy.Mode.OFF)
    response = write_client.post(f"/api/v1/changes/{change.pk}/approve")
    assert response.status_code == 409
    assert "Off mode" in response.json()["error"]["message"]
    change.refresh_from_db()
    assert change.status == ResizeChange.Status.PROPOSED


def test_unknown_change_is_404(write_client: Client, shop: Workload) -> None:
    response = write_client.post("/api/v1/changes/4242/approve")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "resize change 4242 does not exist"


def test_static_coefficients_set_list_and_remove(write_client: Client, db: Any) -> None:
    url = "/api/v1/static-coefficients"
    body = {"namespace": "", "cpu_factor": 0.7, "memory_factor": None}
    assert (
        write_client.post(url, body, content_type="application/json").status_code == 200
    )
    assert write_client.get(url).json() == [
        {
            "namespace": "",
            "cpu_factor": 0.7,
            "memory_factor": None,
            "updated_at": StaticCoefficient.objects.get()
            .updated_at.isoformat()
            .replace("+00:00", "Z"),
        }
    ]
    bad = write_client.post(
        url,
        {"namespace": "a", "cpu_factor": 0, "memory_factor": None},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "cpu_factor" in bad.json()["error"]["fields"]
    gone = write_client.post(
        url,
        {"namespace": "", "cpu_factor": None, "memory_factor": None},
        content_type="application/json",
    )
    assert gone.status_code == 204 and not StaticCoefficient.objects.exists()
    assert AuditEvent.objects.filter(action="coefficient.update").count() == 2


def test_read_token_cannot_set_coefficients(read_client: Client, db: Any) -> None:
    response = read_client.post(
        "/api/v1/static-coefficients",
        {"namespace": "", "cpu_factor": 0.5, "memory_factor": None},
        content_type="application/json",
    )
    assert response.status_code == 403 and not StaticCoefficient.objects.exists()

"""POST /workloads/{id}/adopt: a workload managed by a VPA object becomes vpaweb's, in
Off; its policy cannot be changed before; every refusal has the one error shape."""

from __future__ import annotations

import pytest
from django.test import Client

from recommender.models import AuditEvent, Policy, Workload

pytestmark = pytest.mark.django_db
KEY_URL = "/api/v1/clusters/prod/namespaces/shop/workloads/Deployment/web"


@pytest.fixture
def mirrored(shop: Workload) -> Workload:
    Policy.objects.filter(workload=shop).update(
        source=Policy.Source.VPA_OBJECT,
        mode=Policy.Mode.RECREATE,
        vpa_object="shop/web-vpa",
        vpa_object_mode=Policy.Mode.RECREATE,
    )
    return shop


def test_the_policy_says_who_manages_it_and_whether_vpaweb_may_act(
    read_client: Client, mirrored: Workload
) -> None:
    body = read_client.get(f"/api/v1/workloads/{mirrored.pk}/policy").json()

    assert {
        k: body[k] for k in ("source", "mode", "vpa_object", "vpa_object_mode")
    } == {
        "source": "vpa-object",
        "mode": "Recreate",
        "vpa_object": "shop/web-vpa",
        "vpa_object_mode": "Recreate",
    }
    assert (body["is_actionable"], body["has_vpa_conflict"]) == (False, False)


def test_a_mirrored_policy_cannot_be_patched(
    write_client: Client, mirrored: Workload
) -> None:
    response = write_client.patch(
        f"/api/v1/workloads/{mirrored.pk}/policy",
        {"mode": "Off"},
        content_type="application/json",
    )

    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "conflict"
    assert "managed by VerticalPodAutoscaler shop/web-vpa" in error["message"]
    assert error["fields"] == {
        "source": ["vpa-object: adopt the workload to change it"]
    }
    assert Policy.objects.get(workload=mirrored).mode == "Recreate"


def test_adopt_by_id_and_then_the_policy_is_vpawebs(
    write_client: Client, mirrored: Workload
) -> None:
    response = write_client.post(f"/api/v1/workloads/{mirrored.pk}/adopt")

    assert response.status_code == 200
    body = response.json()
    assert (body["source"], body["mode"], body["is_actionable"]) == (
        "vpaweb",
        "Off",
        False,
    )
    assert body["has_vpa_conflict"] is True  # the object is still in Recreate
    event = AuditEvent.objects.get(action="policy.adopt")
    assert event.actor_label.startswith("token:")
    patched = write_client.patch(
        f"/api/v1/workloads/{mirrored.pk}/policy",
        {"mode": "Initial"},
        content_type="application/json",
    )
    assert patched.status_code == 200 and patched.json()["is_actionable"] is True


def test_adopt_by_natural_key_then_again_is_a_conflict(
    write_client: Client, mirrored: Workload
) -> None:
    assert write_client.post(f"{KEY_URL}/adopt").status_code == 200

    again = write_client.post(f"{KEY_URL}/adopt")

    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"
    assert "already vpaweb's own" in again.json()["error"]["message"]
    assert AuditEvent.objects.filter(action="policy.adopt").count() == 1


def test_adopt_needs_write_access_and_an_existing_workload(
    read_client: Client, write_client: Client, mirrored: Workload
) -> None:
    refused = read_client.post(f"/api/v1/workloads/{mirrored.pk}/adopt")
    missing = write_client.post("/api/v1/workloads/987654/adopt")
    wrong_method = write_client.get(f"/api/v1/workloads/{mirrored.pk}/adopt")

    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "permission_denied"
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert wrong_method.status_code == 405
    assert Policy.objects.get(workload=mirrored).source == "vpa-object"

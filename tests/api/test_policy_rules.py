"""The policy rules API: a dry run previews and stores nothing, an edit turning
actuation on for several workloads needs confirm=true, and a workload's policy says
where each field comes from."""

from __future__ import annotations

import json

import pytest

from recommender.models import AuditEvent, Policy, PolicyRule
from tests.factories import make_cluster, make_workload

RULES = "/api/v1/policy-rules/"
RECREATE = {
    "name": "shop-recreate",
    "namespaces": ["shop"],
    "policy": {"mode": "Recreate"},
}


@pytest.fixture
def fleet(db):
    cluster = make_cluster("east")
    return [
        make_workload(cluster, "api", namespace="shop"),
        make_workload(cluster, "cart", namespace="shop"),
        make_workload(cluster, "agent", namespace="ops"),
    ]


def post(client, url, body):
    return client.post(url, json.dumps(body), content_type="application/json")


def test_a_dry_run_says_which_workloads_change_and_stores_nothing(write_client, fleet):
    response = post(write_client, RULES + "?dry_run=true", RECREATE)

    assert response.status_code == 200, response.json()
    preview = response.json()["preview"]
    assert (preview["applied"], preview["count"]) == (False, 2)
    assert preview["actuation_turned_on"] == 2
    assert preview["confirmation_required"] is True
    assert {w["workload"] for w in preview["workloads"]} == {
        "shop/Deployment/api",
        "shop/Deployment/cart",
    }
    assert preview["workloads"][0]["changes"]["mode"] == {
        "before": "Off",
        "after": "Recreate",
        "given_by": "namespace rule shop-recreate",
    }
    assert not PolicyRule.objects.exists()
    assert set(Policy.objects.values_list("mode", flat=True)) == {"Off"}


def test_turning_actuation_on_for_several_workloads_needs_confirmation(
    write_client, fleet
):
    refused = post(write_client, RULES, RECREATE)

    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "confirmation_required"
    assert not PolicyRule.objects.exists()

    created = post(write_client, RULES + "?confirm=true", RECREATE)

    assert created.status_code == 201, created.json()
    assert created.json()["preview"]["count"] == 2
    modes = dict(Policy.objects.values_list("workload__name", "mode"))
    assert modes == {"api": "Recreate", "cart": "Recreate", "agent": "Off"}
    assert AuditEvent.objects.filter(action="policy.update").count() == 2
    assert AuditEvent.objects.filter(action="policy_rule.save").count() == 1


def test_the_workloads_policy_names_the_rule_or_its_own_field(write_client, fleet):
    post(write_client, RULES + "?confirm=true", RECREATE)
    url = f"/api/v1/workloads/{fleet[0].pk}/policy"
    write_client.patch(
        url, json.dumps({"approval": "automatic"}), content_type="application/json"
    )

    body = write_client.get(url).json()

    assert body["provenance"]["mode"]["given_by"] == "namespace rule shop-recreate"
    assert body["provenance"]["approval"]["given_by"] == "this workload's policy"
    assert body["provenance"]["profile"]["given_by"] == "the default"
    assert body["own_fields"] == ["approval"]


def test_deleting_a_rule_gives_its_workloads_back_to_the_default(write_client, fleet):
    rule_id = post(write_client, RULES + "?confirm=true", RECREATE).json()["rule"]["id"]

    preview = write_client.delete(f"{RULES}{rule_id}/?dry_run=true").json()["preview"]
    assert preview["count"] == 2
    assert PolicyRule.objects.filter(pk=rule_id).exists()

    response = write_client.delete(f"{RULES}{rule_id}/")

    assert response.status_code == 200
    assert set(Policy.objects.values_list("mode", flat=True)) == {"Off"}


def test_a_bad_rule_names_its_field(write_client, fleet):
    response = post(
        write_client,
        RULES,
        {
            **RECREATE,
            "workload_selector": "team in (a",
            "policy": {"mode": "Sometimes"},
        },
    )

    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert set(fields) >= {"workload_selector", "mode"}


def test_a_reader_lists_rules_but_cannot_create_one(read_client, write_client, fleet):
    post(write_client, RULES + "?confirm=true", RECREATE)

    listed = read_client.get(RULES).json()

    assert [(r["name"], r["level"], r["workloads"]) for r in listed] == [
        ("shop-recreate", "namespace", 2)
    ]
    assert post(read_client, RULES, {**RECREATE, "name": "x"}).status_code == 403

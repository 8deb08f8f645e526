"""The policy rules page: viewers read the list, operators create, change and delete a
rule through a preview (the service's dry run) that names each workload it changes;
an edit turning actuation on for more than one workload needs its confirmation, and
every applied edit is audited as the API's is."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from recommender.models import AuditEvent, Policy, PolicyRule
from recommender.services.policy import rule_edits
from tests.factories import make_cluster, make_workload

SHOP_RECREATE = {
    "name": "shop-recreate",
    "priority": "0",
    "is_enabled": "on",
    "cluster": "",
    "namespaces": "shop",
    "namespace_selector": "",
    "workload_selector": "",
    "mode": "Recreate",
    "profile": "",
    "approval": "",
    "min_replicas": "",
    "more_policy": "",
}


@pytest.fixture
def fleet(db):
    cluster = make_cluster("east")
    return [
        make_workload(cluster, "api", namespace="shop"),
        make_workload(cluster, "cart", namespace="shop"),
        make_workload(cluster, "agent", namespace="ops"),
    ]


def _previewed(page: str) -> str:
    match = re.search(r'name="previewed" value="([0-9a-f]+)"', page)
    assert match, "the page has no preview"
    return match.group(1)


def _modes() -> dict[str, str]:
    return dict(Policy.objects.values_list("workload__name", "mode"))


def test_a_preview_names_each_workload_and_stores_nothing(operator_client, fleet):
    response = operator_client.post(
        "/policy-rules/new", {**SHOP_RECREATE, "step": "preview"}
    )

    assert response.status_code == 200
    page = response.content.decode()
    count = re.search(r'data-testid="rule-preview-count">(.*?)</p>', page).group(1)
    assert "2 workloads" in count and "<strong>2</strong> of them go from mode Off" in (
        count
    )
    assert "shop/Deployment/api" in page and "shop/Deployment/cart" in page
    assert "ops/Deployment/agent" not in page
    assert "namespace rule shop-recreate" in page
    assert 'data-testid="rule-confirm"' in page
    # The page's preview is the service's dry run (the API's, too).
    dry_run = rule_edits.save_rule(
        rule_id=None,
        data={
            "name": "shop-recreate",
            "namespaces": ["shop"],
            "policy": {"mode": "Recreate"},
        },
        actor=None,
        now=timezone.now(),
        dry_run=True,
    ).as_json()
    assert dry_run["count"] == 2
    assert not PolicyRule.objects.exists()
    assert set(_modes().values()) == {"Off"}
    assert not AuditEvent.objects.exists()


def test_turning_actuation_on_for_two_workloads_needs_the_confirmation(
    operator_client, operator, fleet
):
    first = operator_client.post(
        "/policy-rules/new", {**SHOP_RECREATE, "step": "preview"}
    )
    previewed = _previewed(first.content.decode())

    # "Apply" without the confirmation previews again and stores nothing.
    unconfirmed = operator_client.post(
        "/policy-rules/new", {**SHOP_RECREATE, "step": "apply", "previewed": previewed}
    )
    assert unconfirmed.status_code == 200
    assert 'data-testid="rule-confirm"' in unconfirmed.content.decode()
    assert not PolicyRule.objects.exists()

    confirmed = operator_client.post(
        "/policy-rules/new", {**SHOP_RECREATE, "confirm": "yes", "previewed": previewed}
    )

    assert confirmed.status_code == 302
    assert confirmed["Location"] == "/policy-rules/"
    rule = PolicyRule.objects.get()
    assert (rule.name, rule.namespaces, rule.policy_fields) == (
        "shop-recreate",
        ["shop"],
        {"mode": "Recreate"},
    )
    assert _modes() == {"api": "Recreate", "cart": "Recreate", "agent": "Off"}
    saved = AuditEvent.objects.get(action="policy_rule.save")
    assert saved.actor == operator
    updates = AuditEvent.objects.filter(action="policy.update")
    assert updates.count() == 2
    assert {e.actor_id for e in updates} == {operator.pk}


def test_apply_stores_only_the_rule_that_was_previewed(operator_client, fleet):
    first = operator_client.post(
        "/policy-rules/new", {**SHOP_RECREATE, "step": "preview"}
    )
    previewed = _previewed(first.content.decode())

    # Edited after its preview (namespace ops instead of shop): previewed again.
    response = operator_client.post(
        "/policy-rules/new",
        {
            **SHOP_RECREATE,
            "namespaces": "ops",
            "confirm": "yes",
            "previewed": previewed,
        },
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "ops/Deployment/agent" in page and "shop/Deployment/api" not in page
    assert not PolicyRule.objects.exists()


def test_one_workload_turned_on_needs_no_confirmation(operator_client, fleet):
    data = {
        **SHOP_RECREATE,
        "name": "agent-auto",
        "namespaces": "ops",
        "approval": "automatic",
    }
    first = operator_client.post("/policy-rules/new", {**data, "step": "preview"})
    page = first.content.decode()
    assert 'data-testid="rule-confirm"' not in page
    assert "Create it</button>" in page

    response = operator_client.post(
        "/policy-rules/new",
        {**data, "step": "apply", "previewed": _previewed(page)},
    )

    assert response.status_code == 302
    policy = Policy.objects.get(workload__name="agent")
    assert (policy.mode, policy.approval) == ("Recreate", "automatic")


def test_errors_appear_next_to_their_input_and_nothing_is_stored(
    operator_client, fleet
):
    response = operator_client.post(
        "/policy-rules/new",
        {
            **SHOP_RECREATE,
            "namespace_selector": "team in (payments",
            "more_policy": '{"hpa_coordination": "sometimes"}',
            "step": "preview",
        },
    )

    assert response.status_code == 422
    form = response.context["form"]
    assert form.errors["namespace_selector"]
    assert any("hpa_coordination" in e for e in form.errors["more_policy"])
    assert 'data-testid="rule-preview"' not in response.content.decode()

    not_json = operator_client.post(
        "/policy-rules/new",
        {**SHOP_RECREATE, "more_policy": "{mode", "step": "preview"},
    )
    assert not_json.status_code == 422
    assert "not JSON" in not_json.context["form"].errors["more_policy"][0]
    assert not PolicyRule.objects.exists()


def _create_shop_rule(operator_client) -> PolicyRule:
    first = operator_client.post(
        "/policy-rules/new", {**SHOP_RECREATE, "step": "preview"}
    )
    operator_client.post(
        "/policy-rules/new",
        {
            **SHOP_RECREATE,
            "confirm": "yes",
            "previewed": _previewed(first.content.decode()),
        },
    )
    return PolicyRule.objects.get()


def test_a_rule_is_changed_and_deleted_through_its_preview(operator_client, fleet):
    rule = _create_shop_rule(operator_client)

    form = operator_client.get(f"/policy-rules/{rule.pk}/")
    assert form.context["form"].initial["namespaces"] == "shop"
    assert form.context["form"].initial["mode"] == "Recreate"

    data = {**SHOP_RECREATE, "mode": "", "min_replicas": "3"}
    first = operator_client.post(
        f"/policy-rules/{rule.pk}/", {**data, "step": "preview"}
    )
    changed = operator_client.post(
        f"/policy-rules/{rule.pk}/",
        {**data, "step": "apply", "previewed": _previewed(first.content.decode())},
    )
    assert changed.status_code == 302
    rule.refresh_from_db()
    assert rule.policy_fields == {"min_replicas": 3}
    assert _modes()["api"] == "Off"

    preview = operator_client.post(f"/policy-rules/{rule.pk}/delete")
    assert preview.status_code == 200
    assert "shop/Deployment/api" in preview.content.decode()
    assert PolicyRule.objects.exists()
    deleted = operator_client.post(f"/policy-rules/{rule.pk}/delete", {"step": "apply"})
    assert deleted.status_code == 302
    assert not PolicyRule.objects.exists()
    assert AuditEvent.objects.filter(action="policy_rule.delete").count() == 1
    assert AuditEvent.objects.filter(action="policy_rule.save").count() == 2


def test_viewers_read_the_list_but_cannot_edit(viewer_client, operator_client, fleet):
    rule = _create_shop_rule(operator_client)

    page = viewer_client.get("/policy-rules/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "shop-recreate" in text and 'data-testid="rule-new"' not in text
    assert f'href="/policy-rules/{rule.pk}/"' not in text
    assert viewer_client.get("/policy-rules/new").status_code == 403
    assert viewer_client.get(f"/policy-rules/{rule.pk}/").status_code == 403
    refused = viewer_client.post(
        "/policy-rules/new", {**SHOP_RECREATE, "name": "other", "confirm": "yes"}
    )
    assert refused.status_code == 403
    assert (
        viewer_client.post(
            f"/policy-rules/{rule.pk}/delete", {"step": "apply"}
        ).status_code
        == 403
    )
    assert PolicyRule.objects.count() == 1

    listed = operator_client.get("/policy-rules/").content.decode()
    assert 'data-testid="rule-new"' in listed
    row = re.search(r'data-testid="rule-row">(.*?)</tr>', listed, re.S).group(1)
    assert "namespace" in row and '<td class="num">2</td>' in row


def test_the_list_costs_the_same_queries_for_one_rule_or_fifteen(viewer_client, fleet):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert viewer_client.get("/policy-rules/").status_code == 200
        return len(captured)

    cluster = fleet[0].cluster
    PolicyRule.objects.create(name="r0", cluster=cluster, policy_fields={"mode": "Off"})
    one = queries()
    for index in range(1, 15):
        PolicyRule.objects.create(
            name=f"r{index}", cluster=cluster, policy_fields={"mode": "Off"}
        )

    assert queries() == one

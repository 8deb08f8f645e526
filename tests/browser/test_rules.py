"""The Rules page in Chromium: an operator writes a namespace rule, reads its preview
(which workloads change, the confirmation for turning actuation on for several),
confirms it, and finds it in the list with its workloads."""

from __future__ import annotations

import re

import pytest

from recommender.models import AuditEvent, Policy, PolicyRule
from recommender.roles import Role
from tests.browser.conftest import screenshot, settle
from tests.factories import make_cluster, make_user, make_workload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-tests-only"


def test_an_operator_previews_confirms_and_lists_a_rule(page):
    cluster = make_cluster("east")
    for name in ("api", "cart", "search"):
        make_workload(cluster, name, namespace="shop")
    make_workload(cluster, "agent", namespace="ops")
    make_user("olga", Role.OPERATOR, password=PASSWORD)
    page.goto("/login/?next=/policy-rules/")
    page.fill("#id_username", "olga")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/policy-rules/$"))
    page.get_by_test_id("rules-empty").wait_for()

    page.get_by_test_id("rule-new").click()
    form = page.get_by_test_id("rule-form")
    form.locator("input[name=name]").fill("shop-recreate")
    form.locator("input[name=namespaces]").fill("shop")
    form.locator("input[name=kinds][value=Deployment]").check()
    form.locator("select[name=mode]").select_option("Recreate")
    page.get_by_test_id("rule-preview-button").click()

    count = page.get_by_test_id("rule-preview-count").inner_text()
    assert count.startswith("3 workloads would get a different policy"), count
    assert "3 of them go from mode Off" in count
    rows = page.get_by_test_id("rule-preview-row")
    assert rows.count() == 3
    assert "shop/Deployment/api" in page.get_by_test_id("rule-preview").inner_text()
    assert not PolicyRule.objects.exists()
    screenshot(page, "24-rule-preview")

    page.get_by_test_id("rule-confirm").get_by_test_id("rule-apply").click()
    page.wait_for_url(re.compile(r"/policy-rules/$"))
    settle(page)  # before this thread reads what the page wrote
    row = page.get_by_test_id("rule-row")
    assert row.count() == 1
    text = row.inner_text()
    assert "shop-recreate" in text and "namespace" in text and "mode: Recreate" in text
    assert dict(Policy.objects.values_list("workload__name", "mode")) == {
        "api": "Recreate",
        "cart": "Recreate",
        "search": "Recreate",
        "agent": "Off",
    }
    assert AuditEvent.objects.filter(action="policy_rule.save").count() == 1

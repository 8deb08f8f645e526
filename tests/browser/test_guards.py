"""In Chromium: a margin typo is refused and a large increase needs a confirmation; the
403 and 404 pages keep the navigation and say why."""

from __future__ import annotations

import re

import pytest

from recommender.models import AuditEvent, Policy
from recommender.roles import Role
from tests.browser.conftest import screenshot
from tests.factories import make_cluster, make_recommendation, make_user, make_workload
from tests.web.conftest import engine_explanation

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-for-tests-only"
MI = 1024 * 1024


def _log_in(page, username):
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))


def _checkout():
    workload = make_workload(
        make_cluster("prod"),
        "checkout",
        containers={
            "app": {"request_cpu_millicores": 1000, "request_memory_bytes": 1024 * MI}
        },
    )
    make_recommendation(
        workload.containers.get(),
        cpu_millicores=250,
        memory_bytes=300 * MI,
        explanation=engine_explanation(),
    )
    return workload


def test_a_margin_typo_is_refused_and_a_large_increase_is_confirmed(page):
    make_user("olga", Role.OPERATOR)
    workload = _checkout()
    _log_in(page, "olga")
    page.goto(f"/workloads/{workload.pk}/")
    form = page.locator("#policy-form")

    # "1500" meant 15 %: the percent field refuses it before anything is sent.
    form.get_by_test_id("profile-overrides-editor").locator("summary").click()
    margin = form.locator("input[name=ov-margin_fraction]")
    margin.fill("1500")
    form.locator("button:text('Save policy')").click()
    assert margin.evaluate("el => el.validity.rangeOverflow") is True
    assert not AuditEvent.objects.exists()
    assert (
        not Policy.objects.filter(workload=workload)
        .exclude(profile_overrides={})
        .exists()
    )

    # A CPU minimum of 2 cores raises the 250m target 8x: saved only once confirmed.
    margin.fill("15")
    row = form.locator("tbody tr").nth(1)
    row.locator("input[name$=min_cpu]").fill("2")
    form.locator("button:text('Save policy')").click()
    dialog = page.get_by_test_id("confirm-large-increase")
    dialog.wait_for()
    assert "more than 2" in dialog.inner_text()
    screenshot(page, "guards-confirm-large-increase")
    assert not AuditEvent.objects.exists()
    dialog.locator("button:text('Yes, save it')").click()
    page.get_by_test_id("policy-saved").wait_for()
    policy = Policy.objects.get(workload=workload)
    assert [p.get("minAllowed") for p in policy.container_policies] == [{"cpu": "2"}]
    assert AuditEvent.objects.filter(action="policy.update").count() == 1


def test_403_and_404_pages_keep_the_navigation_and_say_why(page):
    make_user("vera", Role.VIEWER)
    _log_in(page, "vera")

    response = page.goto("/users/")
    assert response.status == 403
    assert page.locator("h1").inner_text() == "Not allowed"
    assert "signed in as vera" in page.locator(".error-page").inner_text()
    assert page.locator("nav >> text=Workloads").is_visible()
    screenshot(page, "guards-403")

    response = page.goto("/workloads/987654/")
    assert response.status == 404
    assert page.locator("h1").inner_text() == "Not found"
    assert "/workloads/987654/" in page.locator(".error-page").inner_text()
    page.locator("nav >> text=Workloads").click()
    page.wait_for_url("**/workloads/")

    # Both answers were meant: they are not problems of the pages.
    meant = re.compile(r"HTTP 40[34]: |.*status of 40[34] ")
    page.problems.items = [i for i in page.problems.items if not meant.match(i)]

"""The updater's loop in a browser on the simulated cluster: an operator switches a
workload to InPlaceOrRecreate (with the confirmation), approves a proposed change, and
sees the pod's requests change; a viewer sees the changes but cannot approve."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from recommender.engine.quantity import humanize_cpu
from recommender.models import Cluster, Policy, ResizeChange, Workload
from recommender.roles import Role
from recommender.services.actuation.cycle import run_cycle
from recommender.services.refresh.cycle import refresh_cluster
from tests.browser.conftest import PageProblems, screenshot, settle
from tests.factories import make_cluster, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-tests-only"


def _candidate(cluster, now) -> Workload:
    """A replicated workload the updater would change (found, then put back to Off)."""
    for workload in Workload.objects.filter(
        cluster=cluster, kind__in=["Deployment", "StatefulSet"], replicas__gte=2
    ).order_by("name"):
        Policy.objects.filter(workload=workload).update(mode="InPlaceOrRecreate")
        report = run_cycle(cluster, now=now, holder="t")
        Policy.objects.filter(workload=workload).update(mode="Off")
        ResizeChange.objects.all().delete()
        if report.proposed:
            return workload
    pytest.fail("no simulated workload needs a change")


def _log_in(page, username):
    # Straight to the Changes page (the overview is another test's subject).
    page.goto("/login/?next=/changes/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/changes/$"))


def test_switch_approve_and_see_the_requests_change(
    page, browser, live_server, monkeypatch
):
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    # A day of simulated samples spans a minute less than 24 h: enough here.
    monkeypatch.setattr(settings, "MIN_HISTORY_HOURS", 12)
    now = timezone.now()
    cluster = make_cluster("sim", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=cluster.pk, now=now)
    workload = _candidate(cluster, now)
    make_user("olga", Role.OPERATOR, password=PASSWORD)
    make_user("victor", Role.VIEWER, password=PASSWORD)

    # The operator switches the workload to InPlaceOrRecreate: a confirmation first.
    _log_in(page, "olga")
    page.goto(f"/workloads/{workload.pk}/")
    page.select_option("#policy-form select[name=mode]", "InPlaceOrRecreate")
    page.locator("#policy-form button:text('Save policy')").click()
    consequence = page.get_by_test_id("mode-consequence").inner_text()
    assert "resizes running pods in place" in consequence
    approval = page.get_by_test_id("approval-consequence").inner_text()
    assert "waits on the Changes page" in approval
    screenshot(page, "20-updater-confirm")
    page.locator("#policy-form button[name=confirm_mode]").click()
    page.get_by_test_id("policy-saved").wait_for()
    assert Policy.objects.get(workload=workload).mode == "InPlaceOrRecreate"
    # The page's own requests (the refresh its save triggers) end before this thread
    # writes (settle: SQLite's shared in-memory database refuses a statement meeting
    # another thread's, and the page answered 503 once, under load).
    settle(page)

    # The updater's next cycle proposes; nothing is applied without an approval.
    later = now + timedelta(minutes=1)
    assert run_cycle(cluster, now=later, holder="t").proposed > 0
    page.goto(f"/changes/?namespace={workload.namespace}")
    # One row per workload; expanding it shows each pod's change as a sibling row.
    body = page.get_by_test_id("change-group-body").first
    group = body.get_by_test_id("change-group")
    assert "proposed" in group.get_by_test_id("change-group-status").inner_text()
    pods = group.get_by_test_id("change-group-pods")
    if pods.get_attribute("open") is None:
        pods.locator("summary").click()
    row = body.locator("tr:not(.change-group)").first
    row.wait_for()
    assert "proposed" in row.get_by_test_id("change-status").inner_text()
    change = ResizeChange.objects.get(pk=int(row.get_attribute("id").split("-")[1]))
    screenshot(page, "21-updater-proposed")
    row.locator("button:text('Approve')").click()
    page.locator(f"#change-{change.pk} [data-testid=change-status]").filter(
        has_text="approved"
    ).wait_for()
    settle(page)

    # Two cycles: the resize, then its verification on the next discovery.
    run_cycle(cluster, now=later + timedelta(minutes=1), holder="t")
    run_cycle(cluster, now=later + timedelta(minutes=2), holder="t")
    change.refresh_from_db()
    assert change.status == "applied"
    page.goto("/changes/?status=applied")
    page.get_by_test_id("change-group-pods").first.locator("summary").click()
    applied = page.locator(f"#change-{change.pk}")
    applied.wait_for()
    assert "verified" in applied.get_by_test_id("change-verified").inner_text()
    observed = applied.get_by_test_id("change-observed").first.inner_text()
    _, after = next(iter(change.resources_after.items()))
    assert f"pod has: cpu {humanize_cpu(after['requests']['cpu'])}" in observed
    screenshot(page, "22-updater-applied")

    # A viewer sees the changes, with no button to act on them.
    context = browser.new_context(base_url=live_server.url)
    viewer = context.new_page()
    problems = PageProblems()
    problems.watch(viewer)
    _log_in(viewer, "victor")
    viewer.goto("/changes/")
    assert viewer.get_by_test_id("change-group").count() >= 1
    assert viewer.locator("button:text('Approve')").count() == 0
    assert viewer.get_by_test_id("bulk-approve").count() == 0
    context.close()
    assert not problems.items, problems.items

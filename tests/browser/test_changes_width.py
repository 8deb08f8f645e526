"""The Changes page of a busy fleet in Chromium at 1280 px: 200 changes in 50 workload
groups with long reasons stay within the viewport, expanding a group shows its pods as
sibling rows (no table inside a cell), approved groups stay closed, and rejecting a
group from the page records one audited decision per change."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from recommender.models import AuditEvent, ResizeChange
from recommender.roles import Role
from tests.browser.conftest import screenshot, settle
from tests.factories import make_cluster, make_user, make_workload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-for-tests-only"
VIEWPORT_PX = 1280
REASON = (
    "memory request 512Mi is below the lower bound 742Mi of the recommendation for "
    "more than 12 hours, and the container was OOM-killed twice in the last day "
    "(quick OOM at 2026-11-20T07:58:12Z, kube-state-metrics "
    "kube_pod_container_status_last_terminated_reason)"
)


def _fleet() -> None:
    """50 workloads of 4 pods each: 40 groups proposed, 10 approved."""
    cluster = make_cluster("prod-eu-west-1")
    now = timezone.now()
    for index in range(50):
        name = f"checkout-service-with-a-long-name-{index:02d}"
        workload = make_workload(
            cluster, name, namespace="payments-platform", mode="Recreate", replicas=4
        )
        status = "approved" if index % 5 == 0 else "proposed"
        for pod in range(4):
            ResizeChange.objects.create(
                workload=workload,
                pod=f"{name}-7d9f8c6b5-x2k4{pod}",
                method="evict",
                status=status,
                decided_at=now if status == "approved" else None,
                created_at=now - timedelta(minutes=index * 4 + pod),
                reason=REASON,
                resources_before={
                    "app": {"requests": {"cpu": 500, "memory": 512 * 2**20}}
                },
                resources_after={
                    "app": {"requests": {"cpu": 250, "memory": 742 * 2**20}}
                },
            )


def _scroll_width(page) -> int:
    return page.evaluate("document.scrollingElement.scrollWidth")


def test_200_changes_in_50_groups_fit_1280_px_and_a_group_rejects_per_change(page):
    _fleet()
    make_user("olga", Role.OPERATOR, password=PASSWORD)
    page.set_viewport_size({"width": VIEWPORT_PX, "height": 900})
    page.goto("/login/?next=/changes/")
    page.fill("#id_username", "olga")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/changes/$"))

    groups = page.get_by_test_id("change-group")
    assert groups.count() == 50
    assert _scroll_width(page) <= VIEWPORT_PX
    # Groups with approved changes (and groups of several pods) start closed.
    assert page.locator("details[data-testid=change-group-pods][open]").count() == 0
    assert page.locator("tr.change-group td table").count() == 0

    # A Reason cell wraps at spaces: it is several words wide, not one word a line.
    reason = groups.first.locator("td").nth(5)  # Reason
    width = reason.evaluate("cell => cell.getBoundingClientRect().width")
    assert width >= 150, width

    # Expanding groups (an approved one too) adds sibling rows, never a nested table.
    bodies = page.get_by_test_id("change-group-body")
    for index in (0, 5):
        body = bodies.nth(index)
        body.get_by_test_id("change-group-pods").locator("summary").click()
        pods = body.locator("tr:not(.change-group)")
        assert pods.count() == 4
        pods.first.wait_for()
        assert all(pods.nth(i).is_visible() for i in range(4))
    status = bodies.nth(5).get_by_test_id("change-group-status").inner_text()
    assert "approved" in status
    assert page.locator("tr.change-group td table").count() == 0
    assert page.locator("td table").count() == 0
    assert _scroll_width(page) <= VIEWPORT_PX
    screenshot(page, "23-changes-50-groups")

    # One reject of a proposed group: one decision and one audit event per change.
    body = bodies.nth(1)
    ids = [
        int(pk)
        for pk in body.locator(
            "[data-testid=group-reject] input[name=change]"
        ).evaluate_all("inputs => inputs.map(i => i.value)")
    ]
    assert len(ids) == 4
    form = body.get_by_test_id("group-reject")
    form.locator("input[name=reason]").fill("after the sale")
    form.locator("select[name=snooze]").select_option("7d")
    form.locator("button[type=submit]").click()
    page.get_by_text("Rejected 4 change(s).").wait_for()
    settle(page)
    assert set(
        ResizeChange.objects.filter(pk__in=ids).values_list("status", "snooze")
    ) == {("rejected", "7d")}
    events = AuditEvent.objects.filter(action="change.reject")
    assert sorted(int(e.object_id) for e in events) == sorted(ids)
    assert {e.after["reason"] for e in events} == {"after the sale"}

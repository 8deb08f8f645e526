"""An operator's day in a real browser: log in, overview, filter, a workload and its
charts, a policy change, the audit log, an approval. Screenshots of every page are
saved.
"""

from __future__ import annotations

import os
import re
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from recommender.models import (
    ApiToken,
    AuditEvent,
    Cluster,
    Container,
    Policy,
    RefreshRun,
    ResizeChange,
    Workload,
)
from recommender.roles import Role
from recommender.services.refresh.cycle import refresh_cluster
from tests.browser.conftest import screenshot
from tests.factories import make_cluster, make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
# Tests never change tracked files unless asked: set this to refresh the README's
# pictures.
UPDATE_DOC_SCREENSHOTS = os.environ.get("VPAWEB_UPDATE_DOC_SCREENSHOTS") == "1"
PASSWORD = "pw-for-tests-only"
FLEET_SIZE = 12
# Records every layout shift so the test can check the page does not jump while loading.
CLS_SCRIPT = """
window.__cls = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (!entry.hadRecentInput) window.__cls += entry.value;
  }
}).observe({type: "layout-shift", buffered: true});
"""


def _seed(now):
    """A simulated cluster refreshed by the real refresh service, and a change."""
    settings.SIMULATION_WORKLOADS = FLEET_SIZE
    cluster = make_cluster("sim", kind=Cluster.Kind.SIMULATED)
    # Four daily refreshes: the first back-fills 8 days, the others move the
    # recommendations.
    for days_ago in (3, 2, 1, 0):
        run = refresh_cluster(cluster_id=cluster.pk, now=now - timedelta(days=days_ago))
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    # The workload the test opens: a Deployment container with recent OOM kills.
    container = (
        Container.objects.filter(
            workload__kind="Deployment", latest_recommendation__isnull=False
        )
        .exclude(kind="init")
        .annotate(kills=Count("oom_kills"))
        .filter(kills__gt=0)
        .select_related("workload")
        .order_by("-kills", "workload__name", "position")
        .first()
    )
    assert container is not None, "the simulated fleet has no OOM-killed Deployment"
    workload = container.workload
    # A proposed change of another workload whose mode is not Off (the updater comes
    # later).
    other = Workload.objects.exclude(pk=workload.pk).order_by("name").first()
    Policy.objects.filter(workload=other).update(mode=Policy.Mode.RECREATE)
    change = ResizeChange.objects.create(
        workload=other,
        pod=f"{other.name}-0",
        reason="requests 2.2x the target",
        resources_before={"app": {"requests": {"cpu": 1000, "memory": 2**30}}},
        resources_after={"app": {"requests": {"cpu": 450, "memory": 600 * 2**20}}},
    )
    RefreshRun.objects.create(
        cluster=cluster,
        status="failed",
        started_at=now - timedelta(minutes=4),
        finished_at=now - timedelta(minutes=4) + timedelta(seconds=1),
        error="Prometheus at http://prometheus:9090 timed out after 30 s",
    )
    return workload, container, change


def _log_in(page, username):
    page.goto("/")
    assert "/login/" in page.url
    screenshot(page, "01-login")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))


def test_operator_walks_through_the_dashboard(page, settings):
    now = timezone.now()
    make_user("olga", Role.OPERATOR)
    workload, container, change = _seed(now)
    page.add_init_script(CLS_SCRIPT)

    # Log in and land on the overview.
    _log_in(page, "olga")
    assert page.locator("h1").inner_text() == "Overview"
    assert "→" in page.get_by_test_id("fleet-cpu").inner_text()
    assert page.get_by_test_id("fleet-savings").inner_text().startswith(("$", "-$"))
    assert page.get_by_text("timed out after 30 s").is_visible()
    screenshot(page, "02-overview")
    if UPDATE_DOC_SCREENSHOTS:
        shutil.copy(screenshot(page, "02-overview"), DOCS_IMG / "overview.png")

    # The runs page: the real refreshes with their phase timings, the error in full.
    page.click("text=All runs →")
    page.wait_for_url("**/runs/")
    assert page.get_by_test_id("run-row").count() == 5
    assert (
        page.get_by_test_id("run-error").inner_text().endswith("timed out after 30 s")
    )
    refresh_row = page.get_by_test_id("run-row").nth(1)
    for label in ("discover", "ingest", "total", "samples"):
        assert label in refresh_row.inner_text(), f"{label} missing from a run row"
    screenshot(page, "02b-runs")

    # Filter the list: over-provisioned only, then search by name.
    page.click("nav >> text=Workloads")
    page.wait_for_url("**/workloads/")
    total = int(page.get_by_test_id("result-count").inner_text().split()[0])
    assert total == Workload.objects.count()
    page.select_option("select[name=status]", "over")
    page.wait_for_url(re.compile(r"status=over"))
    badges = page.locator("#workload-table tbody .badge.status-over")
    assert badges.count() >= 1
    assert page.locator("#workload-table tbody tr").count() == badges.count()
    page.select_option("select[name=status]", "")
    page.fill("#id_q", workload.name)
    page.wait_for_url(re.compile(r"q=" + re.escape(workload.name)))
    page.locator("#workload-table").get_by_text(
        f"{workload.namespace}/{workload.name}"
    ).wait_for()
    screenshot(page, "03-workloads-filtered")

    # Open the workload and read both charts.
    page.click(f"text={workload.namespace}/{workload.name}")
    page.wait_for_url(f"**/workloads/{workload.pk}/")
    page.wait_for_selector("body[data-charts-ready=true]")
    name = container.name
    dist = page.locator(f"#charts [data-chart=dist-cpu][data-container='{name}']")
    dist_text = dist.inner_text()
    for label in ("p50", "p90", "p95", "request", "target"):
        assert label in dist_text, f"{label} missing from the CPU distribution chart"
    assert (
        dist.locator(".bars .point").count() > 0
    )  # bars drawn from the engine's histogram
    usage = page.locator(f"#charts [data-chart=usage-memory][data-container='{name}']")
    usage_legend = usage.locator(".legend").text_content()
    for label in (
        "max over pods",
        "request",
        "target",
        "upper bound",
        "OOM kill",
    ):
        assert label in usage_legend, f"{label} missing from the memory usage chart"
    assert (
        page.locator(
            f"[data-chart=history-cpu][data-container='{name}'] .js-plotly-plot, "
            f"[data-chart=history-cpu][data-container='{name}'].js-plotly-plot"
        ).count()
        == 1
    )
    assert "kubectl --namespace" in page.get_by_test_id("kubectl-patch").inner_text()
    assert page.evaluate("window.__cls") < 0.1, (
        "the workload page shifted while loading"
    )
    screenshot(page, "04-workload")
    if UPDATE_DOC_SCREENSHOTS:
        shutil.copy(screenshot(page, "04-workload"), DOCS_IMG / "workload.png")

    # Change the policy: a bad quantity first (error next to the field), then a real
    # change.
    form = page.locator("#policy-form")
    row = form.locator("tbody tr").nth(1)
    row.locator("input[name$=min_cpu]").fill("lots")
    form.locator("button:text('Save policy')").click()
    page.locator("#policy-form .errorlist").get_by_text(
        "is not a valid quantity"
    ).wait_for()
    row = page.locator("#policy-form tbody tr").nth(1)
    row.locator("input[name$=min_cpu]").fill("100m")
    page.select_option("#policy-form select[name=mode]", "Initial")
    page.locator("#policy-form button:text('Save policy')").click()
    consequence = page.get_by_test_id("mode-consequence")
    assert "admission webhook" in consequence.inner_text()
    assert "New pods get the recommended requests" in consequence.inner_text()
    screenshot(page, "05-policy-confirm")
    page.locator("#policy-form button[name=confirm_mode]").click()
    page.get_by_test_id("policy-saved").wait_for()
    assert Policy.objects.get(workload=workload).mode == "Initial"
    screenshot(page, "06-policy-saved")

    # The change is in the audit log.
    page.click("nav >> text=Audit log")
    page.select_option("select[name=action]", "policy.update")
    page.wait_for_url(re.compile(r"action=policy.update"))
    audit_row = page.get_by_test_id("audit-row").first
    assert "olga" in audit_row.inner_text()
    assert "Off → Initial" in audit_row.inner_text()
    assert "100m" in audit_row.inner_text()
    screenshot(page, "07-audit")

    # Approve the proposed change.
    page.click("nav >> text=Changes")
    row = page.locator(f"#change-{change.pk}")
    row.locator("button:text('Approve')").click()
    page.locator(f"#change-{change.pk} [data-testid=change-status]").get_by_text(
        "approved"
    ).wait_for()
    change.refresh_from_db()
    assert (change.status, change.decided_by.username) == ("approved", "olga")
    assert AuditEvent.objects.filter(action="change.approve").count() == 1
    screenshot(page, "08-changes")


def test_overview_updates_itself_while_a_refresh_runs(page, settings):
    make_user("vera", Role.VIEWER)
    run = RefreshRun.objects.create(
        cluster=make_cluster("prod"),
        kind=RefreshRun.Kind.BACKFILL,
        shard="shop",
        status=RefreshRun.Status.RUNNING,
        progress=0.4,
    )

    _log_in(page, "vera")
    assert page.locator("#overview-live[data-refreshing=true]").count() == 1
    bar = page.get_by_test_id("run-progress")
    assert bar.get_attribute("value") == "0.400"
    assert bar.get_attribute("aria-label") == "backfill of shop: 40% done"
    assert "namespace shop" in page.get_by_test_id("run-kind").inner_text()
    screenshot(page, "09-overview-progress")

    # The panel polls every 5 s while a refresh runs (and the tab is visible): the bar
    # moves as the back-fill commits days, then the finished run replaces it.
    RefreshRun.objects.filter(pk=run.pk).update(progress=0.75)
    page.wait_for_selector("[data-testid=run-progress][value='0.750']", timeout=12000)
    assert page.get_by_test_id("run-progress-text").inner_text() == "75%"
    run.status, run.finished_at = RefreshRun.Status.SUCCEEDED, timezone.now()
    run.save(update_fields=["status", "finished_at"])
    page.wait_for_selector("#overview-live[data-refreshing=false]", timeout=12000)
    assert page.locator(".badge.run-succeeded").count() == 1
    assert page.get_by_test_id("run-progress").count() == 0

    # The runs page, from the overview's link, filtered to back-fills.
    page.click("text=All runs →")
    page.wait_for_url("**/runs/")
    page.select_option("select[name=kind]", "backfill")
    page.wait_for_url(re.compile(r"kind=backfill"))
    assert page.get_by_test_id("run-row").count() == 1
    screenshot(page, "10-runs")


def test_viewer_sees_no_edit_controls(page):
    make_user("vera", Role.VIEWER)
    workload, _, change = _seed(timezone.now())

    _log_in(page, "vera")
    page.goto(f"/workloads/{workload.pk}/")
    page.wait_for_selector("body[data-charts-ready=true]")
    assert page.locator("#policy-form").count() == 0
    page.goto("/changes/")
    assert page.locator(f"#change-{change.pk} button").count() == 0


def test_operator_creates_uses_and_revokes_a_token(page, live_server):
    import requests

    make_user("olga", Role.OPERATOR)
    _log_in(page, "olga")
    page.click("nav >> text=Tokens")
    page.wait_for_url("**/tokens/")

    # No name: the service's error shows next to the field and nothing is created.
    page.select_option("#token-form select[name=scope]", "write")
    page.click("#token-form button[type=submit]")
    page.locator("#token-form .errorlist").get_by_text("needs a name").wait_for()
    assert not ApiToken.objects.exists()

    page.fill("#token-form input[name=name]", "ci-deploy")
    page.click("#token-form button[type=submit]")
    key = page.get_by_test_id("new-token-key").inner_text().strip()
    assert key.startswith("vpaweb_")
    curl = page.get_by_test_id("new-token-curl").inner_text()
    assert f"{live_server.url}/api/v1/rightsize" in curl
    page.locator("[data-copy='#new-token-key']").click()
    page.locator("[data-copy='#new-token-key']").get_by_text(
        re.compile("Copied|Press Ctrl\\+C")
    ).wait_for()
    screenshot(page, "11-token-created")

    # The key from the page right-sizes a manifest once...
    manifest = (
        "apiVersion: apps/v1\nkind: Deployment\n"
        "metadata: {name: web, namespace: shop}\n"
        "spec:\n  template:\n    spec:\n      containers:\n      - name: app\n"
        "        resources: {requests: {cpu: '1'}}\n"
    )
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/yaml"}
    answer = requests.post(
        f"{live_server.url}/api/v1/rightsize",
        data=manifest,
        headers=headers,
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["summary"]["documents"] == 1

    # ... is listed as used (after a reload; never the key again) and revoked.
    page.reload()
    row = page.get_by_test_id("token-row").filter(has_text="ci-deploy")
    assert "never" not in row.inner_text()
    assert key not in page.content()
    page.once("dialog", lambda dialog: dialog.accept())
    row.locator("button:text('Revoke')").click()
    row.get_by_test_id("token-state").get_by_text("revoked").wait_for()
    screenshot(page, "12-token-revoked")
    refused = requests.post(
        f"{live_server.url}/api/v1/rightsize",
        data=manifest,
        headers=headers,
        timeout=30,
    )
    assert refused.status_code == 401
    assert (
        AuditEvent.objects.filter(
            action__in=["token.create", "token.revoke"], actor_label="olga"
        ).count()
        == 2
    )


def test_operator_overrides_a_percentile_for_one_workload(page):
    make_user("olga", Role.OPERATOR)
    workload, _, _ = _seed(timezone.now())

    _log_in(page, "olga")
    page.goto(f"/workloads/{workload.pk}/")
    page.wait_for_selector("body[data-charts-ready=true]")
    assert page.get_by_test_id("profile-overrides").count() == 0
    editor = page.get_by_test_id("profile-overrides-editor")
    editor.locator("summary").click()
    target = editor.locator("input[name=ov-cpu_target_percentile]")
    assert target.input_value() == "0.9"
    # Out of range first: the engine's message next to the field, nothing stored.
    target.fill("1.5")
    page.locator("#policy-form button:text('Save policy')").click()
    page.get_by_test_id("profile-overrides-editor").locator(".errorlist").get_by_text(
        "must be a number in [0, 1]"
    ).wait_for()
    assert Policy.objects.get(workload=workload).profile_overrides == {}
    page.locator("input[name=ov-cpu_target_percentile]").fill("0.95")
    page.locator("#policy-form button:text('Save policy')").click()
    page.get_by_test_id("policy-saved").wait_for()
    assert Policy.objects.get(workload=workload).profile_overrides == {
        "cpu_target_percentile": 0.95
    }
    screenshot(page, "11-profile-override-saved")

    page.reload()
    panel = page.get_by_test_id("profile-overrides")
    assert "CPU target percentile p90 → p95" in panel.inner_text()

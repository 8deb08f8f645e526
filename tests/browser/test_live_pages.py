"""Pages that stay live and whole: the workload list and the workload page re-read
themselves (keeping the filters and an open form), the Mode card follows a saved mode,
the snippets have Copy buttons, and the API docs load nothing from outside."""

from __future__ import annotations

import re
import time
from urllib.parse import urlsplit

import pytest
from django.db import OperationalError
from django.utils import timezone

from recommender.models import ResizeChange, Workload
from recommender.roles import Role
from tests.browser.conftest import screenshot, settle
from tests.browser.test_dashboard import _log_in, _seed
from tests.factories import make_cluster, make_user, make_workload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_mode_card_follows_a_saved_mode_and_the_snippet_copies(page):
    make_user("olga", Role.OPERATOR)
    workload, _, _ = _seed(timezone.now())
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])

    _log_in(page, "olga")
    page.goto(f"/workloads/{workload.pk}/")
    page.wait_for_selector("body[data-charts-ready=true]")
    assert page.get_by_test_id("mode").inner_text() == "Off"

    page.select_option("#policy-form select[name=mode]", "Initial")
    page.locator("#policy-form button:text('Save policy')").click()
    page.locator("#policy-form button[name=confirm_mode]").click()
    page.get_by_test_id("policy-saved").wait_for()
    # No reload: the live part of the page is re-read after the save.
    page.get_by_test_id("mode").filter(has_text=re.compile(r"^Initial$")).wait_for()
    assert "(mode Initial)" in page.get_by_test_id("webhook-summary").inner_text()
    # The usage charts stay as drawn; the history charts are drawn again.
    assert page.locator("#charts .js-plotly-plot").count() > 0
    assert page.locator("[data-chart^=history-].js-plotly-plot").count() > 0

    for name in ("kubectl-patch", "resources-yaml"):
        page.get_by_test_id(f"copy-{name}").click()
        page.get_by_test_id(f"copy-{name}").filter(has_text="Copied").wait_for()
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied == page.get_by_test_id(name).inner_text()
        assert copied.strip()
    screenshot(page, "live-01-mode-saved")


def test_workload_list_and_page_refresh_themselves(page, settings):
    settings.REFRESH_INTERVAL_S = 1  # the pages poll every refresh interval
    make_user("vera", Role.VIEWER)
    cluster = make_cluster("prod")
    for i in range(30):
        make_workload(cluster, f"api-{i:02d}", namespace="shop")
    make_workload(cluster, "batch", namespace="jobs")

    _log_in(page, "vera")
    page.goto("/workloads/")
    page.select_option("select[name=namespace]", "shop")
    page.wait_for_url(re.compile(r"namespace=shop"))
    page.fill("#id_q", "api-")
    page.wait_for_url(re.compile(r"q=api-"))
    filtered_url = page.url
    page.get_by_test_id("result-count").filter(has_text=re.compile(r"^30 ")).wait_for()
    page.evaluate("window.scrollTo(0, 400)")
    scrolled = page.evaluate("window.scrollY")
    assert scrolled > 0

    # New data arrives: the list shows it by itself, with its filters, sort and page.
    make_workload(cluster, "api-zz", namespace="shop")
    make_workload(cluster, "api-yy", namespace="jobs")
    page.get_by_test_id("result-count").filter(has_text=re.compile(r"^31 ")).wait_for()
    rows = page.locator("#workload-table tbody tr")
    assert rows.last.inner_text().startswith("shop/api-zz")
    assert "api-yy" not in page.locator("#workload-table").inner_text()
    assert page.url == filtered_url
    assert page.locator("select[name=namespace]").input_value() == "shop"
    assert page.locator("#id_q").input_value() == "api-"
    assert page.evaluate("window.scrollY") == scrolled

    # The workload page too, while the policy being edited stays as typed.
    workload = Workload.objects.get(name="batch")
    page.goto(f"/workloads/{workload.pk}/")
    settle(page)
    # The in-memory SQLite test database is shared with the live server's thread, which
    # polls every second: a write that meets its read is refused at once ("database
    # table is locked", no busy wait in shared-cache mode), so it is tried again.
    for _ in range(50):
        try:
            Workload.objects.filter(pk=workload.pk).update(replicas=7)
            break
        except OperationalError:
            time.sleep(0.1)
    page.locator("#workload-live .stat .value", has_text=re.compile(r"^7$")).wait_for()


def test_a_form_being_filled_in_survives_the_refresh(page, settings):
    settings.REFRESH_INTERVAL_S = 1
    make_user("olga", Role.OPERATOR)
    workload = make_workload(make_cluster("prod"), "api", namespace="shop")
    change = ResizeChange.objects.create(
        workload=workload,
        pod="api-0",
        reason="requests 2x the target",
        resources_before={"app": {"requests": {"cpu": 1000, "memory": 2**30}}},
        resources_after={"app": {"requests": {"cpu": 450, "memory": 600 * 2**20}}},
    )

    _log_in(page, "olga")
    page.goto(f"/workloads/{workload.pk}/")
    # The policy form is outside the live part of the page.
    page.fill("#policy-form input[name=min_replicas]", "4")
    Workload.objects.filter(pk=workload.pk).update(replicas=9)
    replicas = page.locator("#workload-live .stat .value")
    replicas.filter(has_text=re.compile(r"^9$")).wait_for()
    assert page.locator("#policy-form input[name=min_replicas]").input_value() == "4"

    # A rejection reason being typed inside the live part holds the refresh back...
    reason = page.locator(f"#change-{change.pk} input[name=reason]")
    reason.fill("wait for the sale")
    Workload.objects.filter(pk=workload.pk).update(replicas=5)
    page.wait_for_timeout(3000)  # three polling intervals
    assert reason.input_value() == "wait for the sale"
    assert replicas.filter(has_text=re.compile(r"^5$")).count() == 0
    # ...until the field is left as it was.
    reason.fill("")
    page.locator("h1").click()
    replicas.filter(has_text=re.compile(r"^5$")).wait_for()


@pytest.mark.parametrize(
    ("path", "ready", "font"),
    [
        ("/api/v1/docs/", ".swagger-ui .info .title", "sans-serif"),
        ("/api/v1/redoc/", "[data-testid=redoc] h1", "system-ui"),  # not Montserrat
    ],
)
def test_api_docs_load_nothing_from_outside(page, live_server, path, ready, font):
    make_user("vera", Role.VIEWER)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))

    _log_in(page, "vera")
    assert page.locator("nav >> text=API docs").get_attribute("href") == "/api/v1/docs/"
    page.goto(path)
    page.wait_for_selector(ready)
    assert "vpaweb API" in page.locator(ready).inner_text()
    shown = page.locator(ready).evaluate("(node) => getComputedStyle(node).fontFamily")
    assert shown.startswith(font), shown
    settle(page)

    local = urlsplit(live_server.url).netloc
    outside = [
        url
        for url in requested
        if urlsplit(url).scheme not in ("data", "blob")
        and urlsplit(url).netloc != local
    ]
    assert not outside, f"requests left the machine: {outside}"
    assert any(re.search(r"/static/.*(redoc|swagger)", url) for url in requested)
    screenshot(page, f"live-docs-{path.strip('/').replace('/', '-')}")

"""`manage.py scan --output html` opens in Chromium with no console error, no request
and no script, every cell escaped (the page is a file on disk: no server)."""

from __future__ import annotations

import pytest

from recommender.management.commands.scan import CSV_FIELDS, render_html
from tests.browser.conftest import PageProblems

pytestmark = pytest.mark.browser
HOSTILE = '<script>alert("x")</script>'


def row(container: str, *, within: bool) -> dict:
    quantities = {"cpu": "250m", "memory": "300Mi"}
    return {
        "namespace": "shop",
        "kind": "Deployment",
        "workload": "web",
        "containerName": container,
        "requests": {"cpu": "500m", "memory": "512Mi"},
        "target": quantities,
        "lowerBound": quantities,
        "upperBound": quantities,
        "uncappedTarget": quantities,
        "savings_monthly": 12.5,
        "at_risk": False,
        "within_tolerance": within,
    }


def test_the_html_report_opens_without_problems(browser, tmp_path):
    options = {"context": "prod", "cpu_tolerance": 20.0, "memory_tolerance": 20.0}
    report = tmp_path / "scan.html"
    report.write_text(
        render_html([row("app", within=False), row(HOSTILE, within=True)], options)
    )
    page = browser.new_page()
    problems = PageProblems()
    problems.watch(page)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report.as_uri())
    assert page.title() == "vpaweb scan of prod"
    assert page.locator("script").count() == 0
    headers = page.locator("thead th").all_inner_texts()
    assert headers == CSV_FIELDS
    cells = page.locator("tbody tr").nth(1).locator("td").all_inner_texts()
    assert cells[3] == HOSTILE  # shown as text
    assert page.locator("td.outside").all_inner_texts() == ["False"]
    assert "2 containers, 1 outside the tolerance" in page.inner_text("p")
    page.close()
    assert requests == [report.as_uri()]
    assert not problems.items, problems.items

"""The browser harness itself: ``settle`` waits for requests a page sends after it
loaded, which Playwright's "networkidle" load state does not (the SQLite runs of the
browser tests depend on it, tests/browser/conftest.py)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import close_page, open_page, settle

pytestmark = pytest.mark.browser

# A request 100 ms after the call, and a second one 100 ms after the first has ended:
# each starts while settle is waiting out its quiet time (400 ms: a slow machine's
# late timer has 300 ms to spare).
TWO_LATE_REQUESTS = """() => setTimeout(
  () => fetch("/healthz?first").then(
    () => setTimeout(() => fetch("/healthz?second"), 100)), 100)"""


def test_settle_returns_after_the_requests_sent_after_load(page):
    page.goto("/login/")
    page.wait_for_load_state("networkidle")
    ended: list[str] = []
    page.on("requestfinished", lambda request: ended.append(request.url))

    page.evaluate(TWO_LATE_REQUESTS)
    settle(page)

    assert [url.rsplit("?", 1)[1] for url in ended] == ["first", "second"]
    assert not page.in_flight.pending


def test_a_page_is_closed_only_once_the_requests_it_sent_late_have_ended(
    browser, live_server
):
    """The page fixture's teardown: the test database is flushed right after it, so
    no request of the page may still be served then."""
    page = open_page(browser, live_server.url)
    page.goto("/login/")
    page.wait_for_load_state("networkidle")
    ended: list[str] = []
    page.on("requestfinished", lambda request: ended.append(request.url))

    page.evaluate(TWO_LATE_REQUESTS)
    close_page(page)

    assert [url.rsplit("?", 1)[1] for url in ended] == ["first", "second"]
    assert not page.problems.items

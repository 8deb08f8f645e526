"""Headless Chromium (Debian's package) driven by Playwright against pytest-django's
live_server.

The session installs Chromium with apt-get when /usr/bin/chromium is missing, so CI
needs no extra step; when that fails the tests skip (or fail under CI=true) through
service_missing. Every page fails the test on a console error, an uncaught exception or
a failed request.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import apt
from tests.conftest import service_missing

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags Chromium dials out, which this closed network
# refuses.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# to seed
# data are ordinary synchronous calls, so Django's async guard must not refuse them.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def install_chromium() -> bool:
    """Debian's chromium, installed once when it is missing: whether it is there (the
    browser tests and the pages bench)."""
    return apt.install(["chromium"], CHROMIUM.exists, recommends=True)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """One headless Chromium for the session."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        service_missing("playwright (requirements-dev.txt)")
    if not install_chromium():
        service_missing("Chromium (/usr/bin/chromium; apt-get install chromium failed)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
        )
        yield chromium
        chromium.close()


class PageProblems:
    """Console errors, page exceptions and failed requests seen by one page."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def watch(self, page: object) -> None:
        page.on(
            "console",
            lambda m: m.type == "error" and self.items.append(f"console: {m.text}"),
        )
        page.on("pageerror", lambda e: self.items.append(f"page error: {e}"))
        page.on("requestfailed", self._request_failed)
        page.on(
            "response",
            lambda r: (
                r.status >= 400 and self.items.append(f"HTTP {r.status}: {r.url}")
            ),
        )

    def _request_failed(self, request: object) -> None:
        # Leaving a page cancels its pending htmx requests (a live page re-reading
        # itself): Chromium reports them as aborted, which is no problem of the page.
        cancelled = request.failure == "net::ERR_ABORTED" and request.resource_type in (
            "xhr",
            "fetch",
        )
        if not cancelled:
            self.items.append(
                f"request failed: {request.method} {request.url} {request.failure}"
            )


class InFlight:
    """The requests one page has sent whose response has not yet ended."""

    def __init__(self) -> None:
        self.pending: set[object] = set()

    def watch(self, page: object) -> None:
        # Lambdas: Playwright cannot wrap a builtin method as a handler.
        page.on("request", lambda request: self.pending.add(request))
        page.on("requestfinished", lambda request: self.pending.discard(request))
        page.on("requestfailed", lambda request: self.pending.discard(request))


def settle(page: object, *, quiet_ms: int = 400, timeout_ms: int = 15000) -> None:
    """Return once ``page`` has had no request in flight for ``quiet_ms``.

    Call it before the test's own thread reads or writes the database while the page is
    open. On SQLite the test database is one in-memory database in shared-cache mode,
    where a statement meeting another thread's open one fails at once ("database table
    is locked", no busy wait) and the page answers 503. Playwright's
    ``wait_for_load_state("networkidle")`` is no guard: it returns at once once the page
    has loaded, even while a request the page sent later (an htmx refresh triggered by a
    save) is still being served. The quiet time covers a request sent just after the
    last one ended."""
    in_flight = page.in_flight
    quiet = waited = 0
    while quiet < quiet_ms:
        if waited >= timeout_ms:
            urls = sorted(request.url for request in in_flight.pending)
            raise AssertionError(f"still in flight after {timeout_ms} ms: {urls}")
        page.wait_for_timeout(50)
        waited += 50
        quiet = 0 if in_flight.pending else quiet + 50


@pytest.fixture
def page(browser, live_server):
    """A fresh browser page; the test fails if the page saw any problem."""
    page = open_page(browser, live_server.url)
    yield page
    close_page(page)
    assert not page.problems.items, "the browser saw problems:\n" + "\n".join(
        page.problems.items
    )


def open_page(browser: object, base_url: str) -> object:
    """A page in a browser context of its own, watched for problems
    (``page.problems``) and for the requests it has in flight (``page.in_flight``)."""
    context = browser.new_context(
        viewport={"width": 1360, "height": 900}, base_url=base_url
    )
    page = context.new_page()
    page.set_default_timeout(15000)
    page.problems = PageProblems()
    page.problems.watch(page)
    page.in_flight = InFlight()
    page.in_flight.watch(page)
    return page


def close_page(page: object) -> None:
    """Close ``page``'s browser context once it has no request in flight (``settle``):
    the test database is flushed next, and a request still being served held SQLite's
    shared in-memory tables ("database table is locked": the flush failed)."""
    try:
        settle(page)
    finally:
        page.context.close()


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot under test-artifacts/screenshots/.

    The capture gets a minute rather than the page's 15 s: ReDoc's page is many
    screens tall, and on a loaded 2-core machine capturing it took over 15 s."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True, timeout=60_000)
    return path

"""The main pages in headless Chromium: server time and the browser's navigation timing.

    DATABASE_URL=postgres://.../scratch BENCH_PAGES_WORKLOADS=12000 \
        python -m benchmarks pages        (or: make bench BENCH=pages)"""
# Seeds a throw-away database as the dashboard bench does (bench_dashboard._seed:
# BENCH_PAGES_WORKLOADS workloads, default 12,000, of one to three containers, about two
# a workload; 50,000 workloads make about 100,000 containers), stores the totals as a
# refresh would (services/dashboard/namespace_totals.store per cluster), serves the site
# from a live server thread (the browser tests' harness: Django's LiveServerThread with
# its static files handler) and drives Chromium (tests/browser/conftest.py's binary and
# flags; installed first, as those tests do, before the seed), logged in as a viewer,
# over the overview, the list, the rollups, a workload page (first and second visit;
# its charts from the checkpoints and usage hours the seed stores for it), the
# changes, the runs and the what-if page. Imports the views first as gunicorn's
# preload does (BENCH_PAGES_PRELOAD=0: not). Per page,
# the median of BENCH_REPEAT visits (default 3, after one warm-up; the workload page's
# first visit is the one visit): the server time of the document (the handler's own
# ``Server-Timing``), the browser's time to first byte, DOMContentLoaded and load, and
# the slowest fragment the page then fetched (htmx) with its server time. Target: every
# page <= 300 ms of server time at 100,000 containers. Use a scratch database: the
# seeded rows stay. BENCH_PAGES_REUSE=1 measures a database this bench (or
# bench_dashboard) seeded before, as it is: seeding 100,000 containers takes minutes.

from __future__ import annotations

import os
import statistics
import time
from typing import Any

TARGET_MS = 300.0
# What the page reports once it has settled (no request for 500 ms).
TIMINGS_JS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const server = (entry) => {
    const app = (entry.serverTiming || []).find((t) => t.name === "app");
    return app ? app.duration : null;
  };
  return {
    server: server(nav),
    ttfb: nav.responseStart - nav.requestStart,
    dom: nav.domContentLoadedEventEnd - nav.startTime,
    load: nav.loadEventEnd - nav.startTime,
    fragments: performance.getEntriesByType("resource")
      .filter((e) => ["xmlhttprequest", "fetch"].includes(e.initiatorType))
      .map((e) => ({url: e.name, server: server(e),
                    total: e.responseEnd - e.startTime})),
  };
}"""


def _handler() -> Any:
    """The live server's handler, adding ``Server-Timing: app;dur=<ms>``: the time
    from the request to the start of the response (Django's whole stack)."""
    from django.test.testcases import _StaticFilesHandler

    class Timed(_StaticFilesHandler):  # type: ignore[misc]
        def __call__(self, environ: Any, start_response: Any) -> Any:
            started = time.perf_counter()

            def timed(status: str, headers: list[Any], *args: Any) -> Any:
                ms = (time.perf_counter() - started) * 1000
                headers = [*headers, ("Server-Timing", f"app;dur={ms:.1f}")]
                return start_response(status, headers, *args)

            return super().__call__(environ, timed)

    return Timed


def _visit(page: Any, url: str) -> dict[str, Any]:
    response = page.goto(url, wait_until="networkidle")
    if response is None or response.status != 200:
        raise SystemExit(f"GET {url}: {response and response.status}")
    found: dict[str, Any] = page.evaluate(TIMINGS_JS)
    return found


def _row(label: str, visits: list[dict[str, Any]]) -> str:
    def median(key: str) -> float:
        values = [v[key] for v in visits if v[key] is not None]
        return statistics.median(values) if values else float("nan")

    fragments = [f for v in visits for f in v["fragments"] if f["server"] is not None]
    slowest = max(fragments, key=lambda f: f["server"], default=None)
    fragment = (
        f"{slowest['server']:7.1f} {slowest['url'].split('/', 3)[-1][:28]}"
        if slowest
        else f"{'-':>7}"
    )
    server = median("server")
    verdict = "ok" if server <= TARGET_MS else "SLOW"
    return (
        f"{label:26} {server:8.1f} {median('ttfb'):8.1f} {median('dom'):8.1f} "
        f"{median('load'):8.1f}  {verdict:4}  {fragment}"
    )


def main() -> None:
    """Seed, store the totals, serve, and print each page's timings."""
    from benchmarks.bench_dashboard import _seed, _setup_django

    count = int(os.environ.get("BENCH_PAGES_WORKLOADS", "12000"))
    repeat = int(os.environ.get("BENCH_REPEAT", "3"))
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's loop
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1")
    _setup_django()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.testcases import LiveServerThread
    from django.utils import timezone
    from playwright.sync_api import sync_playwright

    from recommender.models import Cluster, Container, Workload
    from recommender.roles import Role, grant_role
    from recommender.services.readmodels import namespace_totals
    from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, install_chromium

    # Before the seed's minutes, not after them: the browser tests' Chromium,
    # installed the same way on a machine that has none.
    if not install_chromium():
        raise SystemExit(
            f"pages: needs Chromium at {CHROMIUM}, and apt-get install chromium failed"
        )
    reuse = os.environ.get("BENCH_PAGES_REUSE") == "1" and Workload.objects.exists()
    started = time.perf_counter()
    if reuse:
        # The seed's detail workload: its first one with three containers.
        detail_id = Workload.objects.order_by("pk").values_list("pk", flat=True)[2]
        count = Workload.objects.count()
    else:
        detail_id = _seed(count)
    seeded_s = time.perf_counter() - started
    started = time.perf_counter()
    for cluster in Cluster.objects.all():
        namespace_totals.store(cluster=cluster, now=timezone.now())
    stored_s = time.perf_counter() - started
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    user, _ = get_user_model().objects.get_or_create(username="bench-viewer")
    grant_role(user, Role.VIEWER)
    client = Client()
    client.force_login(user)
    session = client.cookies["sessionid"].value
    print(
        f"database: {connection.vendor}; {count:,} workloads, "
        f"{Container.objects.count():,} containers; "
        f"{'reused' if reuse else 'seeded'} in {seeded_s:.1f} s, "
        f"totals stored in {stored_s:.1f} s; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    plain_static = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {
            "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        },
    }
    pages = [
        ("overview", "/"),
        ("workloads list", "/workloads/"),
        ("rollups by team label", "/rollups/?by=label&key=team"),
        ("changes", "/changes/"),
        ("runs", "/runs/"),
        ("what-if", f"/workloads/{detail_id}/what-if"),
    ]
    with override_settings(STORAGES=plain_static, WHITENOISE_USE_FINDERS=True):
        if os.environ.get("BENCH_PAGES_PRELOAD", "1") != "0":
            # What gunicorn's master does before it forks the workers (preload_app
            # and when_ready, vpaweb/gunicorn_conf.py): every URLconf and view
            # imported, so the first visit measures the page, not Python's imports
            # (about 1.7 s, profiled). BENCH_PAGES_PRELOAD=0 measures a cold process.
            from vpaweb.gunicorn_conf import when_ready

            when_ready(None)
        server = LiveServerThread("127.0.0.1", _handler(), port=0)
        server.daemon = True
        server.start()
        server.is_ready.wait()
        if server.error:
            raise server.error
        base = f"http://127.0.0.1:{server.port}"
        try:
            with sync_playwright() as playwright:
                chromium = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
                )
                context = chromium.new_context(
                    viewport={"width": 1360, "height": 900}, base_url=base
                )
                context.add_cookies(
                    [{"name": "sessionid", "value": session, "url": base}]
                )
                page = context.new_page()
                page.set_default_timeout(120_000)
                print(
                    f"{'page':26} {'server':>8} {'ttfb':>8} {'DOM':>8} {'load':>8}"
                    f"  {'':4}  slowest fragment (server ms, path); ms, "
                    f"target {TARGET_MS:.0f} ms server"
                )
                workload = f"/workloads/{detail_id}/"
                first = _visit(page, workload)
                print(_row("workload page (first)", [first]), flush=True)
                second = _visit(page, workload)
                print(_row("workload page (second)", [second]), flush=True)
                for label, path in pages:
                    _visit(page, path)  # warm-up
                    visits = [_visit(page, path) for _ in range(repeat)]
                    print(_row(label, visits), flush=True)
                chromium.close()
        finally:
            server.terminate()
    print(
        "load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "\nnote: the seeded rows stay in the DATABASE_URL database: use a scratch one",
    )


if __name__ == "__main__":
    main()

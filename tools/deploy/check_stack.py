"""Checks a running compose stack from outside, as a user would (make test-deploy).

Usage: check_stack.py BASE_URL ADMIN_PASSWORD METRICS_TOKEN WORKLOADS

Waits (bounded) until the worker has finished a refresh of the simulated cluster, then
checks: /healthz and /readyz; the dashboard (logged in as the demo admin) lists the
simulated fleet; every workload the API lists has containers and recommendations; the
refresh runs were made by the worker (bootstrap ran with --no-refresh, so nothing else
computes them); /metrics refuses a request without the token and answers in Prometheus'
text format with it. Prints what it saw; exits non-zero naming the first failed check.
"""

from __future__ import annotations

import re
import sys
import time

import requests

TIMEOUT_S = 30


def fail(message: str) -> None:
    print(f"FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def login(base: str, password: str) -> requests.Session:
    session = requests.Session()
    page = session.get(f"{base}/login/", timeout=TIMEOUT_S)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    if page.status_code != 200 or token is None:
        fail(f"/login/ answered {page.status_code} without a CSRF token")
    done = session.post(
        f"{base}/login/",
        data={
            "username": "admin",
            "password": password,
            "csrfmiddlewaretoken": token.group(1),  # type: ignore[union-attr]
        },
        headers={"Referer": f"{base}/login/"},
        timeout=TIMEOUT_S,
        allow_redirects=False,
    )
    if done.status_code != 302:
        fail(f"login as admin answered {done.status_code}, expected a redirect")
    return session


def wait_for_refresh(session: requests.Session, base: str, deadline_s: float) -> dict:
    """The first succeeded refresh run of the simulated cluster (polls the API)."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        answer = session.get(f"{base}/api/v1/runs/?limit=50", timeout=TIMEOUT_S)
        if answer.status_code != 200:
            fail(f"/api/v1/runs/ answered {answer.status_code}: {answer.text[:300]}")
        runs = answer.json()["results"]
        last = runs
        done = [
            r for r in runs if r["kind"] == "refresh" and r["status"] == "succeeded"
        ]
        failed = [r for r in runs if r["status"] == "failed"]
        if failed:
            fail(f"a run failed: {failed[0]}")
        if done:
            return done[-1]
        time.sleep(3)
    fail(f"no refresh run succeeded within {deadline_s:.0f}s; runs: {last}")
    raise AssertionError  # unreachable


def main() -> None:
    base, password, metrics_token, workloads_arg = sys.argv[1:5]
    expected_workloads = int(workloads_arg)

    for path in ("/healthz", "/readyz"):
        answer = requests.get(f"{base}{path}", timeout=TIMEOUT_S)
        if answer.status_code != 200 or answer.json()["status"] != "ok":
            fail(f"{path} answered {answer.status_code}: {answer.text[:300]}")
        print(f"{path}: {answer.json()}")

    session = login(base, password)
    run = wait_for_refresh(session, base, deadline_s=300)
    print(
        f"refresh run {run['id']} by the worker: {run['status']}, "
        f"counts {run.get('counts')}"
    )

    # With a broker, the first refresh leaves a new cluster's namespaces to one task
    # each (its counts' first_contact_shards), which discovers and stores them: wait
    # for every workload and its recommendations.
    deadline = time.monotonic() + 120
    while True:
        answer = session.get(f"{base}/api/v1/workloads/?limit=1000", timeout=TIMEOUT_S)
        if answer.status_code != 200:
            fail(f"/api/v1/workloads/ answered {answer.status_code}")
        body = answer.json()
        workloads = body["results"]
        if body["count"] > expected_workloads:
            fail(f"{body['count']} workloads listed, expected {expected_workloads}")
        # Init containers never get one (as upstream VPA); regular and sidecar ones do.
        containers = [
            c for w in workloads for c in w["containers"] if c["kind"] != "init"
        ]
        missing = [c for c in containers if c["recommendation"] is None]
        # The simulated fleet has history for every workload, so each container has
        # its recommendation once the first contact is done.
        listed = body["count"] == len(workloads) == expected_workloads
        if listed and containers and not missing:
            break
        if time.monotonic() > deadline:
            fail(
                f"120 s after the first refresh: {body['count']} of "
                f"{expected_workloads} workloads listed, {len(missing)} of "
                f"{len(containers)} containers without a recommendation"
            )
        time.sleep(3)
    sample = containers[0]["recommendation"]
    if not sample["target"].get("cpu") or not sample["target"].get("memory"):
        fail(f"a recommendation without targets: {sample}")
    print(
        f"API: {len(workloads)} workloads, {len(containers)} containers, all with "
        f"recommendations (e.g. target {sample['target']})"
    )

    page = session.get(f"{base}/workloads/", timeout=TIMEOUT_S)
    name = workloads[0]["name"]
    if page.status_code != 200 or name not in page.text:
        fail(f"/workloads/ answered {page.status_code} without workload {name!r}")
    overview = session.get(f"{base}/", timeout=TIMEOUT_S)
    if overview.status_code != 200 or "simulated" not in overview.text:
        fail(f"/ answered {overview.status_code} without the simulated cluster")
    static = re.search(r'src="(/static/vendor/plotly[^"]*\.js)"', overview.text)
    page = session.get(f"{base}/workloads/{workloads[0]['id']}/", timeout=TIMEOUT_S)
    static = static or re.search(r'src="(/static/vendor/plotly[^"]*\.js)"', page.text)
    if static is None:
        fail("no page loads plotly.js from /static/vendor/")
    asset = requests.get(
        f"{base}{static.group(1)}",
        headers={"Accept-Encoding": "gzip"},
        timeout=TIMEOUT_S,
        stream=True,  # the body as sent: compressed
    )
    sent = asset.raw.read()
    # plotly's basic bundle: 1.2 MB, about 0.4 MB gzip (a stub or error page is less).
    if asset.status_code != 200 or len(sent) < 300_000:
        fail(f"{static.group(1)} answered {asset.status_code} ({len(sent)} bytes)")
    # Collected under a hashed name with a gzip copy: compressed, cached for good.
    if asset.headers.get("Content-Encoding") != "gzip" or "immutable" not in (
        asset.headers.get("Cache-Control", "")
    ):
        fail(f"{static.group(1)} not compressed and immutable: {dict(asset.headers)}")
    print(
        f"dashboard: /, /workloads/ and {static.group(1)} served "
        f"({len(sent)} bytes gzip, {asset.headers['Cache-Control']})"
    )

    refused = requests.get(f"{base}/metrics", timeout=TIMEOUT_S)
    if refused.status_code != 401:
        fail(f"/metrics without the token answered {refused.status_code}, not 401")
    answer = requests.get(
        f"{base}/metrics",
        headers={"Authorization": f"Bearer {metrics_token}"},
        timeout=TIMEOUT_S,
    )
    if answer.status_code != 200 or not answer.headers["Content-Type"].startswith(
        "text/plain; version=0.0.4"
    ):
        fail(f"/metrics answered {answer.status_code} {answer.headers}")
    finished = re.search(
        r"^vpaweb_refresh_last_finished_timestamp_seconds"
        r'\{kind="refresh",outcome="succeeded"\} (\S+)$',
        answer.text,
        re.M,
    )
    if finished is None or float(finished.group(1)) < time.time() - 3600:
        fail("/metrics has no recent succeeded refresh run:\n" + answer.text[-2000:])
    without = re.search(
        r'^vpaweb_containers_without_recommendation\{cluster="simulated"\} (\S+)$',
        answer.text,
        re.M,
    )
    if without is None or float(without.group(1)) != 0:
        fail("/metrics does not say 0 containers without recommendation")
    print(f"/metrics: {len(answer.text.splitlines())} lines, last refresh finished")
    print("stack check passed")


if __name__ == "__main__":
    main()

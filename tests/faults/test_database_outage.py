"""PostgreSQL stopped under the production web server (gunicorn, DEBUG off): every page
and API call that needs the database answers 503 with ``Retry-After`` (the API in its
error shape, pages with a plain "database unavailable" page), never a 500; the process
stays live; the first requests after the database's return answer 200 again."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.utils import timezone

from benchmarks.bench_slowloris import production_server
from recommender.roles import Role
from recommender.services.access.tokens import create_token
from tests.factories import make_user
from tests.faults.conftest import poll

pytestmark = pytest.mark.faults

RIGHTSIZE_BODY = (
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n"
    "spec:\n  template:\n    spec:\n      containers:\n      - name: app\n"
    '        resources: {requests: {cpu: "1"}}\n'
)


@contextmanager
def web_on_the_test_database(**env: str) -> Iterator[int]:
    """The production server on pytest-django's test database, its static files
    collected as a deployment's are, with ``env`` on top; yields its port."""
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
    saved = {name: os.environ.get(name) for name in ("DATABASE_URL", "REDIS_URL")}
    os.environ.update(DATABASE_URL=url, REDIS_URL=settings.REDIS_URL)
    try:
        with tempfile.TemporaryDirectory() as static:
            subprocess.run(
                [sys.executable, "manage.py", "collectstatic", "--no-input", "-v0"],
                cwd=Path(settings.BASE_DIR),
                env={**os.environ, "VPAWEB_STATIC_ROOT": static},
                check=True,
                timeout=120,
            )
            with production_server(
                **{
                    "WEB_CONCURRENCY": "1",
                    "GUNICORN_THREADS": "4",
                    "VPAWEB_STATIC_ROOT": static,
                    **env,
                }
            ) as port:
                yield port
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def request(
    port: int, method: str, path: str, *, headers: dict[str, str], body: str = ""
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body.encode(), headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_a_database_outage_is_a_503_with_retry_after(own_postgres, own_redis):
    viewer = make_user("vera", Role.VIEWER)
    _, key = create_token(
        name="outage", scope="read", created_by=viewer, now=timezone.now()
    )
    browser = Client()
    browser.force_login(viewer)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    bearer = {"Authorization": f"Bearer {key}"}

    with web_on_the_test_database() as port:
        _, login_headers, _ = request(port, "GET", "/login/", headers={})
        csrf = login_headers["Set-Cookie"].split("csrftoken=")[1].split(";")[0]
        probes = {
            "dashboard": ("GET", "/", {"Cookie": cookie}, ""),
            "login": (
                "POST",
                "/login/",
                {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Cookie": f"csrftoken={csrf}",
                    "X-CSRFToken": csrf,
                },
                "username=vera&password=wrong",
            ),
            "api list": ("GET", "/api/v1/workloads/", bearer, ""),
            "rightsize": (
                "POST",
                "/api/v1/rightsize",
                {**bearer, "Content-Type": "application/yaml"},
                RIGHTSIZE_BODY,
            ),
        }
        for name, (method, path, headers, body) in probes.items():
            status = request(port, method, path, headers=headers, body=body)[0]
            assert status in (200, 302, 403), (name, status)
        own_postgres.stop()
        try:
            for name, (method, path, headers, body) in probes.items():
                status, answer_headers, content = request(
                    port, method, path, headers=headers, body=body
                )
                assert status == 503, (name, status, content[:300])
                assert int(answer_headers["Retry-After"]) > 0, name
                if path.startswith("/api/"):
                    error = json.loads(content)["error"]
                    assert error["code"] == "database_unavailable", error
                    assert error["fields"] == {}
                else:
                    assert b"Database unavailable" in content, content[:300]
            assert request(port, "GET", "/healthz", headers={})[0] == 200
            assert request(port, "GET", "/readyz", headers={})[0] == 503
        finally:
            own_postgres.start()
            connection.close()
        # The broken connections are replaced: the next requests answer as before.
        poll(
            lambda: (
                request(port, "GET", "/api/v1/workloads/", headers=bearer)[0] == 200
            ),
            what="the API to answer after the database's return",
            timeout_s=30,
        )
        assert request(port, "GET", "/", headers={"Cookie": cookie})[0] == 200

"""Production settings: `check --deploy` is clean with the README's environment, every
HTTPS switch comes from the environment, CSP, login throttling, one-line 403 logs, the
request deadline's JSON answer and the gunicorn configuration."""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import Client, override_settings

from recommender.roles import Role
from tests.factories import make_user
from vpaweb.env import env_header_pair

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- production-environment -->\n```sh\n(.*?)```", re.S)


def production_environment(secret_file: Path) -> dict[str, str]:
    """The README's production environment, line by line (comments dropped)."""
    block = BLOCK.search((ROOT / "README.md").read_text())
    assert block, "README.md has no production-environment block"
    env: dict[str, str] = {}
    for line in block.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, value = line.split("=", 1)
            env[name] = value
    env["SECRET_KEY_FILE"] = str(secret_file)
    return env


def test_check_deploy_is_clean_with_the_documented_environment(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret"
    secret.write_text(secrets.token_urlsafe(50))
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SECURE_", "SESSION_", "CSRF_", "DJANGO_"))
        and key not in ("SECRET_KEY", "DEBUG", "DATABASE_URL", "REDIS_URL")
    }
    env.update(production_environment(secret))
    env["VPAWEB_VAR_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout
    # And without the switches, the same check does warn: the test can fail.
    for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE"):
        env.pop(name)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "security.W008" in result.stderr + result.stdout


def test_proxy_ssl_header_is_read_as_a_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", "HTTP_X_FORWARDED_PROTO, https")
    assert env_header_pair("SECURE_PROXY_SSL_HEADER") == (
        "HTTP_X_FORWARDED_PROTO",
        "https",
    )
    monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", "")
    assert env_header_pair("SECURE_PROXY_SSL_HEADER") is None
    for bad in ("X-Forwarded-Proto,https", "HTTP_X_FORWARDED_PROTO", "a,b,c"):
        monkeypatch.setenv("SECURE_PROXY_SSL_HEADER", bad)
        with pytest.raises(ImproperlyConfigured, match="SECURE_PROXY_SSL_HEADER"):
            env_header_pair("SECURE_PROXY_SSL_HEADER")


@pytest.mark.django_db
def test_every_page_gets_a_csp_without_inline_script(client: Client) -> None:
    user = make_user("viewer1", None)
    client.force_login(user)
    for path in ("/login/", "/", "/api/v1/docs/", "/api/v1/clusters/"):
        response = client.get(path)
        policy = response["Content-Security-Policy"]
        assert (
            "script-src 'self'" in policy
            and "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
        )
    # The dashboard's own templates carry no inline script or event handler.
    for template in (ROOT / "templates").rglob("*.html"):
        text = template.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", text), template
        assert not re.search(r"\son[a-z]+=", text), template


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=3)
def test_login_is_throttled_per_account_and_an_admin_can_unlock() -> None:
    make_user("alice", None, password="right-password-1")
    client = Client(REMOTE_ADDR="10.0.0.1")
    for _ in range(2):
        response = client.post("/login/", {"username": "alice", "password": "wrong"})
        assert response.status_code == 200  # the form again, "didn't match"
    response = client.post("/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 429  # the third failure locks
    response = client.post(
        "/login/", {"username": "alice", "password": "right-password-1"}
    )
    assert response.status_code == 429
    assert b"Too many failed logins" in response.content
    assert b"axes_reset_username" in response.content
    # From another address, the account is still locked.
    other = Client(REMOTE_ADDR="10.0.0.2")
    response = other.post(
        "/login/", {"username": "alice", "password": "right-password-1"}
    )
    assert response.status_code == 429
    call_command("axes_reset_username", "alice")
    response = other.post(
        "/login/", {"username": "alice", "password": "right-password-1"}
    )
    assert response.status_code == 302


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=3)
def test_login_is_throttled_per_address_across_accounts() -> None:
    make_user("bob", None, password="right-password-2")
    client = Client(REMOTE_ADDR="10.0.0.9")
    for name in ("x1", "x2", "x3"):
        client.post("/login/", {"username": name, "password": "wrong"})
    response = client.post(
        "/login/", {"username": "bob", "password": "right-password-2"}
    )
    assert response.status_code == 429
    assert AccessAttempt.objects.filter(ip_address="10.0.0.9").exists()
    # Bob himself is not locked: from elsewhere he gets in.
    response = Client(REMOTE_ADDR="10.0.0.10").post(
        "/login/", {"username": "bob", "password": "right-password-2"}
    )
    assert response.status_code == 302


@pytest.mark.django_db
@override_settings(TRUSTED_PROXY_COUNT=1, AXES_FAILURE_LIMIT=2)
def test_behind_a_proxy_the_forwarded_address_is_throttled() -> None:
    def attempt(forwarded: str, name: str) -> int:
        client = Client(REMOTE_ADDR="10.1.1.1", HTTP_X_FORWARDED_FOR=forwarded)
        return client.post("/login/", {"username": name, "password": "w"}).status_code

    assert attempt("1.2.3.4, 192.0.2.1", "n1") == 200
    # The client's own claim (left) is ignored: the same client, locked.
    assert attempt("5.6.7.8, 192.0.2.1", "n2") == 429
    # Another client behind the same proxy is not.
    assert attempt("192.0.2.2", "n3") == 200
    assert AccessAttempt.objects.filter(ip_address="10.1.1.1").count() == 0


@pytest.mark.django_db
def test_a_403_is_logged_as_one_line(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    client.force_login(make_user("nobody", None))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = client.get("/users/")
    assert response.status_code == 403
    records = [r for r in caplog.records if r.name == "django.request"]
    assert records and all(r.exc_info is None and r.exc_text is None for r in records)


@pytest.mark.django_db
@override_settings(REQUEST_DEADLINE_S=0.05)
def test_an_api_request_past_the_deadline_gets_the_json_error(
    monkeypatch: pytest.MonkeyPatch, client: Client
) -> None:
    from recommender.api import views

    client.force_login(make_user("viewer2", Role.VIEWER))

    def slow(**kwargs: Any) -> Any:
        time.sleep(2)
        raise AssertionError("the deadline did not interrupt the request")

    monkeypatch.setattr(views, "query_recommendation", slow)
    response = client.post(
        "/api/v1/recommendation-query",
        {"spec": {"pod": {"spec": {"containers": [{"name": "a"}]}}}},
        content_type="application/json",
    )
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "timeout"
    assert "VPAWEB_REQUEST_DEADLINE_S" in error["message"]
    assert error["fields"] == {}


def test_gunicorn_configuration_reads_only_the_environment() -> None:
    code = (
        "import runpy, json; c = runpy.run_path('vpaweb/gunicorn_conf.py'); "
        "import os; print(json.dumps([c['bind'], c['workers'], c['timeout'], "
        "os.environ['VPAWEB_REQUEST_DEADLINE_S']]))"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "GUNICORN_BIND": "127.0.0.1:9999",
        "WEB_CONCURRENCY": "3",
        "GUNICORN_TIMEOUT": "20",
    }
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == '["127.0.0.1:9999", 3, 20, "15"]'
    env["VPAWEB_REQUEST_DEADLINE_S"] = "25"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "must be below GUNICORN_TIMEOUT=20" in result.stderr


@pytest.mark.django_db(transaction=True)
@override_settings(REQUEST_DEADLINE_S=0.5)  # past the middlewares on a busy machine
def test_the_deadline_also_holds_in_a_request_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gunicorn's threaded worker serves requests outside the main thread."""
    import threading

    from recommender.api import views

    user = make_user("viewer3", Role.VIEWER)

    def slow(**kwargs: Any) -> Any:
        for _ in range(500):  # Python bytecode: where the deadline can land
            time.sleep(0.01)
        raise AssertionError("the deadline did not interrupt the request")

    monkeypatch.setattr(views, "query_recommendation", slow)
    answers: list[Any] = []

    def request() -> None:
        client = Client()
        client.force_login(user)
        answers.append(
            client.post(
                "/api/v1/recommendation-query",
                {"spec": {"pod": {"spec": {"containers": [{"name": "a"}]}}}},
                content_type="application/json",
            )
        )

    thread = threading.Thread(target=request)
    thread.start()
    thread.join(timeout=10)
    (response,) = answers
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "timeout"


def test_the_master_compiles_the_templates_and_the_reverse_map_before_forking() -> None:
    # As gunicorn's master does (when_ready), in a fresh process with DEBUG off: the
    # cached loader then holds every project template, and {% url %} finds its map
    # built.
    code = (
        "import runpy, django, json; django.setup(); "
        "c = runpy.run_path('vpaweb/gunicorn_conf.py'); c['when_ready'](None); "
        "from django.template import engines; from django.urls import get_resolver; "
        "loader = engines['django'].engine.template_loaders[0]; "
        "print(json.dumps([type(loader).__name__, len(loader.get_template_cache), "
        "get_resolver()._populated, len(c['compile_templates']())]))"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "vpaweb.settings",
        "SECRET_KEY": "test-only-key",
        "DEBUG": "false",
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answer = done.stdout.strip().splitlines()[-1]
    loader, cached, populated, templates = json.loads(answer)
    assert loader == "Loader" and populated
    assert templates >= 30 and cached >= templates

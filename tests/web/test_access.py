"""Nothing but the login page and the health checks answers anonymous users.

Walks the whole URLconf (dashboard, API, admin, anything added later), fills each
pattern's arguments, and asks anonymously with GET and POST.
"""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from recommender.web.access import require_role

# Reachable without login, on purpose. Logging out shows no data ("you are logged out").
PUBLIC = {"login", "logout", "healthz", "readyz", "admin:login", "admin:logout"}
_ARG = {
    "int": "1",
    "slug": "x",
    "str": "x",
    "path": "x",
    "uuid": "00000000-0000-0000-0000-000000000000",
}


def _walk(patterns, prefix="", namespace=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            ns = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern), ns)
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), f"{namespace}{entry.name or ''}", entry


def _concrete(route: str) -> str:
    """A path for a route: converters filled, regex anchors and groups simplified."""
    route = re.sub(
        r"<(?:(\w+):)?\w+>", lambda m: _ARG.get(m.group(1) or "str", "x"), route
    )
    route = route.replace("^", "").replace("$", "").replace("\\Z", "").replace("\\", "")
    route = re.sub(r"\(\?P<\w+>[^)]*\)", "1", route)
    route = re.sub(r"\([^)]*\)", "", route)
    return "/" + route.lstrip("/")


ROUTES = sorted(
    {(r, n) for r, n, _ in _walk(get_resolver().url_patterns) if n not in PUBLIC}
)


def _is_login_redirect(response) -> bool:
    return response.status_code in (301, 302) and "login" in response.headers.get(
        "Location", ""
    )


@pytest.mark.parametrize(("route", "name"), ROUTES)
def test_no_page_answers_anonymous_users(client, db, route, name):
    path = _concrete(route)

    for method in (client.get, client.post):
        response = method(path)
        assert response.status_code in (301, 302, 401, 403, 404, 405) and (
            response.status_code not in (301, 302)
            or _is_login_redirect(response)
            or response.headers.get("Location", "").startswith(path.rstrip("/"))
        ), (
            f"{method.__name__.upper()} {path} ({name}) answered "
            f"{response.status_code} anonymously"
        )


def test_public_pages_are_exactly_login_and_health(client, db):
    assert client.get("/login/").status_code == 200
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_every_dashboard_view_declares_its_role():
    missing = []
    for route, _name, pattern in _walk(get_resolver().url_patterns):
        module = getattr(pattern.callback, "__module__", "")
        if module == "recommender.web.views" and not hasattr(
            pattern.callback, "required_role"
        ):
            missing.append(route)
    assert not missing, f"dashboard views without require_role: {missing}"
    assert require_role  # the decorator the views must use


def test_users_without_a_role_see_nothing(client, outsider, small_fleet):
    client.force_login(outsider)

    for path in (
        "/",
        "/workloads/",
        f"/workloads/{small_fleet['over'].pk}/",
        "/changes/",
        "/audit/",
    ):
        assert client.get(path).status_code == 403, path


def test_uptime_monitors_may_send_head(client, db):
    assert client.head("/healthz").status_code == 200
    assert client.head("/readyz").status_code == 200
    assert client.post("/healthz").status_code == 405


def test_a_refused_page_says_why_and_keeps_the_navigation(viewer_client, small_fleet):
    response = viewer_client.get(f"/workloads/{small_fleet['over'].pk}/policy")

    assert response.status_code == 403
    page = response.content.decode()
    assert "this page needs the operator role" in page.lower()
    assert 'aria-label="Main"' in page
    assert "vera" in page


def test_a_missing_page_says_what_was_missing_and_keeps_the_navigation(viewer_client):
    response = viewer_client.get("/workloads/999999/")

    assert response.status_code == 404
    page = response.content.decode()
    assert "Not found" in page
    assert 'aria-label="Main"' in page
    assert "/api/v1/docs/" in page


def test_the_policy_editor_opened_directly_is_a_whole_page(
    operator_client, small_fleet
):
    url = f"/workloads/{small_fleet['over'].pk}/policy"

    page = operator_client.get(url).content.decode()
    fragment = operator_client.get(url, headers={"HX-Request": "true"}).content.decode()

    assert "<html" in page and 'aria-label="Main"' in page
    assert "<html" not in fragment

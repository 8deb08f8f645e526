"""A refused database connection is a 503 with Retry-After: the API in its error shape,
pages with a plain "database unavailable" page. The connection is pointed at a closed
port (PostgreSQL; the SQLite test database lives in memory and cannot be taken away);
tests/faults/test_database_outage.py stops a real server under gunicorn."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from recommender.roles import Role
from recommender.services.access.tokens import create_token
from tests.factories import make_user


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends


@pytest.fixture
def database_away(transactional_db: Any) -> Iterator[Callable[[], None]]:
    """A function that points the connection at a closed port; put back after."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: the SQLite test database is in memory")
    saved = {name: connection.settings_dict[name] for name in ("HOST", "PORT")}

    def away() -> None:
        connection.close()
        connection.settings_dict.update(HOST="127.0.0.1", PORT=closed_port())

    yield away
    connection.close()
    connection.settings_dict.update(saved)


def test_the_api_and_the_pages_answer_503_with_retry_after(database_away):
    viewer = make_user("vera", Role.VIEWER)
    _, key = create_token(name="k", scope="read", created_by=viewer, now=timezone.now())
    browser = Client()
    browser.force_login(viewer)
    token = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert token.get("/api/v1/workloads/").status_code == 200

    database_away()
    api = token.get("/api/v1/workloads/")
    page = browser.get("/")

    assert api.status_code == 503
    assert api.json()["error"]["code"] == "database_unavailable"
    assert int(api["Retry-After"]) > 0
    assert page.status_code == 503
    assert b"Database unavailable" in page.content
    assert int(page["Retry-After"]) > 0

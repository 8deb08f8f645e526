"""The schema, Swagger UI and ReDoc need a role, like every other API read: a signed-in
user or a token whose owner has no role gets 403."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from recommender.roles import Role
from recommender.services.access.tokens import create_token
from tests.api.conftest import token_client
from tests.factories import make_user

PAGES = ["/api/v1/schema/", "/api/v1/docs/", "/api/v1/redoc/"]


@pytest.mark.parametrize("path", PAGES)
def test_no_role_is_a_403_and_a_viewer_reads_it(db: Any, path: str) -> None:
    nobody, viewer = Client(), Client()
    nobody.force_login(make_user("norole", None))
    viewer.force_login(make_user("vera", Role.VIEWER))
    assert nobody.get(path).status_code == 403
    assert viewer.get(path).status_code == 200


@pytest.mark.parametrize("path", PAGES)
def test_a_token_of_an_owner_without_a_role_is_a_403(db: Any, path: str) -> None:
    owner = make_user("former", None)
    _, key = create_token(
        name="old", scope="read", created_by=owner, now=timezone.now()
    )
    assert token_client(key).get(path).status_code == 403
    _, ownerless = create_token(
        name="ci", scope="read", created_by=None, now=timezone.now()
    )
    assert token_client(ownerless).get(path).status_code == 200

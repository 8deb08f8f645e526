"""Two admins create the same user name at the same moment, on PostgreSQL: the second
gets the validation error, not a database error (a 500 on the page).

Deterministic as test_approval_locks: the test inserts the name in an open transaction,
starts create_user in a thread (its check sees no committed row, its insert waits on the
unique index), waits until PostgreSQL reports that thread blocked on a lock, commits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from recommender.errors import InvalidInput
from recommender.models import AuditEvent
from recommender.services.access import accounts
from tests.conftest import service_missing
from tests.services.test_approval_locks import WAIT_S, Side, wait_until_blocked

pytestmark = pytest.mark.integration

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def test_the_loser_of_a_real_race_gets_a_validation_error(transactional_db: Any):
    if connection.vendor != "postgresql":
        service_missing("PostgreSQL (DATABASE_URL): concurrent inserts")
    side = Side(
        lambda: accounts.create_user(
            username="bob", password="long-enough", role="viewer", actor=None, now=NOW
        )
    )
    with transaction.atomic():
        get_user_model().objects.create_user(username="bob", password="first-one!")
        side.start()
        wait_until_blocked(side)  # past its check, waiting on the unique index
    side.join(WAIT_S)

    assert not side.is_alive()
    assert isinstance(side.error, InvalidInput), side.error
    assert side.error.fields == {"username": ["a user named 'bob' already exists"]}
    assert get_user_model().objects.filter(username="bob").count() == 1
    assert not AuditEvent.objects.filter(action="user.create").exists()

"""Timestamps read back from the database are the instants stored, in Django's time
zone; on PostgreSQL through vpaweb/pg_timestamps.py's loader, whose fallback (what
``fromisoformat`` cannot read) answers as Django's own loader."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import DataError, connection, transaction

from recommender.models import RefreshRun
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db

STORED = [
    datetime(2026, 11, 21, 12, 1, tzinfo=UTC),
    datetime(2026, 11, 21, 12, 1, 0, 500000, tzinfo=UTC),
    datetime(2026, 11, 21, 12, 1, 0, 120000, tzinfo=UTC),
    datetime(2026, 11, 21, 12, 1, 59, 123456, tzinfo=UTC),
    datetime(2026, 3, 29, 1, 30, 7, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


def test_stored_timestamps_read_back_as_the_same_instants_in_utc() -> None:
    cluster = make_cluster("prod")
    runs = RefreshRun.objects.bulk_create(
        RefreshRun(cluster=cluster, started_at=at) for at in STORED
    )

    read = list(
        RefreshRun.objects.filter(pk__in=[r.pk for r in runs])
        .order_by("pk")
        .values_list("started_at", flat=True)
    )

    assert read == STORED
    assert all(at.tzinfo == UTC for at in read)
    assert [at.utcoffset() for at in read] == [timedelta(0)] * len(STORED)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's loader")
def test_the_postgresql_loader_is_installed_and_falls_back_to_djangos() -> None:
    from psycopg.postgres import types
    from psycopg.pq import Format

    connection.ensure_connection()
    loader = connection.connection.adapters.get_loader(
        types["timestamptz"].oid, Format.TEXT
    )
    assert loader.__name__ == "FastIsoTimestamptzLoader"
    assert loader.timezone == connection.timezone
    with connection.cursor() as cursor:
        # A value with a seconds offset (a zone's local mean time) and one before
        # year 1: the first read by fromisoformat, the second by Django's loader.
        cursor.execute("SET LOCAL TIME ZONE 'Europe/Amsterdam'")
        cursor.execute("SELECT '1900-01-01 00:00:00+00'::timestamptz")
        assert cursor.fetchone()[0] == datetime(1900, 1, 1, tzinfo=UTC)
        cursor.execute("SET LOCAL TIME ZONE 'UTC'")
        with transaction.atomic(), pytest.raises(DataError, match="BC"):
            cursor.execute("SELECT '0044-03-15 12:00:00+00 BC'::timestamptz")
            cursor.fetchone()
        with transaction.atomic(), pytest.raises(DataError, match="infinity"):
            cursor.execute("SELECT 'infinity'::timestamptz")
            cursor.fetchone()

"""The suite's flush between transactional tests (tests/fast_flush.py) empties every
table, rows that refer to each other included, and deletes instead of truncating
unless sequences are reset."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.color import no_style
from django.core.management.sql import sql_flush
from django.db import connection
from django.utils import timezone

from recommender.models import ResizeChange
from tests.factories import make_cluster, make_recommendation, make_user, make_workload


@pytest.mark.django_db(transaction=True)
def test_a_flush_empties_every_table_whatever_refers_to_what() -> None:
    workload = make_workload(make_cluster())
    container = workload.containers.get()
    # A cycle: the container names its latest recommendation, which names it.
    make_recommendation(container)
    ResizeChange.objects.create(workload=workload, pod="web-1")
    make_user("ann", None)

    call_command("flush", verbosity=0, interactive=False, inhibit_post_migrate=True)

    left = {
        model._meta.db_table: model.objects.count()
        for model in apps.get_models()
        if model._meta.managed and not model._meta.proxy
    }
    assert not {table: rows for table, rows in left.items() if rows}


@pytest.mark.django_db
def test_a_flush_deletes_unless_it_resets_sequences() -> None:
    tables = connection.introspection.django_table_names(only_existing=True)

    statements = sql_flush(no_style(), connection, reset_sequences=False)

    assert len(statements) >= len(tables)
    assert all(statement.startswith("DELETE FROM") for statement in statements)
    if connection.vendor == "postgresql":
        (reset,) = sql_flush(no_style(), connection, reset_sequences=True)
        assert reset.startswith("TRUNCATE") and "RESTART IDENTITY" in reset


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's vacuum")
@pytest.mark.django_db(transaction=True)
def test_tables_that_gathered_dead_rows_are_vacuumed() -> None:
    """The rows a flush deletes stay dead on a server without autovacuum;
    ``vacuum_dead_tables`` vacuums the tables holding more than it is told, and no
    other."""
    from recommender.models import AdmissionCount
    from tests.fast_flush import vacuum_dead_tables

    def dead_rows(table: str) -> int:
        with connection.cursor() as cursor:
            # This backend's counts are published at its next transaction's end.
            cursor.execute("SELECT pg_stat_force_next_flush()")
            cursor.execute(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = %s",
                [table],
            )
            return int(cursor.fetchone()[0])

    minute = timezone.now()
    AdmissionCount.objects.bulk_create(
        AdmissionCount(cluster_name="c", minute=minute, outcome=f"o{i}", count=1)
        for i in range(60)
    )
    AdmissionCount.objects.all().delete()
    table = AdmissionCount._meta.db_table
    assert dead_rows(table) >= 60

    vacuumed = vacuum_dead_tables(connection, 50)

    assert table in vacuumed
    assert all(dead_rows(name) <= 50 for name in vacuumed)
    assert dead_rows(table) == 0

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

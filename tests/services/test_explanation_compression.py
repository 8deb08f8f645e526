"""Migration 0034: on PostgreSQL new explanations are compressed with lz4 (the
default pglz took about a third longer to insert them); migrating back restores
the server's default. Elsewhere the migration does nothing."""

from __future__ import annotations

import importlib
import logging

import pytest
from django.db import connection, transaction

BEFORE = "0033_recommendation_container_index"
AFTER = "0034_explanation_lz4"


def _compression() -> str:
    """The column's compression method: 'l' lz4, '' the server's default."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attcompression FROM pg_attribute"
            " WHERE attrelid = 'recommender_recommendation'::regclass"
            " AND attname = 'explanation'"
        )
        (method,) = cursor.fetchone()
    return method


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's TOAST")
@pytest.mark.django_db(transaction=True)
def test_explanations_are_compressed_with_lz4_and_back(migrate_to):
    assert _compression() == "l"
    migrate_to(BEFORE)
    assert _compression() == ""
    migrate_to(AFTER)
    assert _compression() == "l"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's TOAST")
@pytest.mark.django_db(transaction=True)
def test_a_server_that_cannot_compress_so_leaves_the_column_and_goes_on(caplog):
    """The server's refusal (a feature it does not support: what one built without
    lz4 answers; here an integer column, which has nothing to compress) is logged,
    and the migration's transaction goes on."""
    migration = importlib.import_module(f"recommender.migrations.{AFTER}")
    forward = migration._compression("lz4", column="target_cpu_millicores")
    with (
        caplog.at_level(logging.WARNING),
        transaction.atomic(),
        connection.schema_editor() as editor,
    ):
        forward(None, editor)
        assert _compression() == "l"  # the transaction still answers
    assert "does not support compression" in caplog.text

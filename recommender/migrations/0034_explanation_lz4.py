"""Recommendation explanations compressed with lz4 on PostgreSQL.

Each explanation (about 2.7 KB of JSON) passes PostgreSQL's TOAST threshold, so every
new recommendation row's explanation is compressed. pglz, the default, took about a
third longer to insert 5,000 of them than lz4 (0.77-1.00 s against 0.57-0.72 s,
one statement, load 1.1; about the same size on disk). Rows already stored keep
pglz. A server built without lz4 keeps pglz for the new rows too: the migration
says so and goes on.
"""

import logging

from django.db import NotSupportedError, migrations, transaction

logger = logging.getLogger(__name__)

_TABLE, _COLUMN = "recommender_recommendation", "explanation"


def _compression(method, column=_COLUMN):
    def forward(apps, schema_editor):
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return
        q = schema_editor.quote_name
        try:
            with transaction.atomic(using=connection.alias):
                schema_editor.execute(
                    f"ALTER TABLE {q(_TABLE)} ALTER COLUMN {q(column)}"
                    f" SET COMPRESSION {method}"
                )
        except NotSupportedError as exc:
            logger.warning("explanations stay compressed with pglz: %s", exc)

    return forward


class Migration(migrations.Migration):
    dependencies = [
        ("recommender", "0033_recommendation_container_index"),
    ]

    operations = [
        migrations.RunPython(_compression("lz4"), _compression("default")),
    ]

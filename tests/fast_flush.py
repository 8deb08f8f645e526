"""On PostgreSQL, transactional tests are emptied by DELETE, not TRUNCATE.

Django flushes every table after a transactional test; on PostgreSQL that is one
TRUNCATE of about 40 tables, which gives each table and index new files: about 1 s a
test on this 2-core machine, against a few milliseconds for DELETEs of the few rows a
test leaves. The DELETEs run in the flush's transaction, where Django's deferred
foreign keys are checked at the commit, once every table is empty. A flush asked to
reset sequences (``django_db(reset_sequences=True)``) still truncates.

Those DELETEs and the rolled-back rows of every other test stay behind as dead rows,
and a server with autovacuum off (this machine's, CI's) keeps them for good:
``vacuum_dead_tables`` vacuums the tables that gathered many, between modules."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def delete_statements(
    style: Any, tables: list[str], quote: Callable[[str], str]
) -> list[str]:
    """One DELETE per table, its name quoted by ``quote``."""
    return [
        f"{style.SQL_KEYWORD('DELETE')} {style.SQL_KEYWORD('FROM')} "
        f"{style.SQL_FIELD(quote(table))};"
        for table in tables
    ]


@contextmanager
def flush_by_delete() -> Iterator[None]:
    """While open, a PostgreSQL flush without a sequence reset deletes the rows."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(
        self: DatabaseOperations,
        style: Any,
        tables: list[str],
        *,
        reset_sequences: bool = False,
        allow_cascade: bool = False,
    ) -> list[str]:
        if reset_sequences or not tables:
            return truncate(
                self,
                style,
                tables,
                reset_sequences=reset_sequences,
                allow_cascade=allow_cascade,
            )
        return delete_statements(style, tables, self.quote_name)

    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign]
    try:
        yield
    finally:
        DatabaseOperations.sql_flush = truncate  # type: ignore[method-assign]


# Dead rows a table may gather before it is vacuumed between modules: by the end of
# a PostgreSQL run, scans walked thousands of dead pages (a list test took 96 s in the
# suite and 0.7 s alone).
VACUUM_DEAD_ROWS = 5_000


def vacuum_dead_tables(connection: Any, dead_rows: int = VACUUM_DEAD_ROWS) -> list[str]:
    """VACUUM each table of ``connection``'s database (PostgreSQL, outside any
    transaction) with more than ``dead_rows`` dead rows, as autovacuum would;
    returns their names."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_stat_user_tables WHERE n_dead_tup > %s",
            [dead_rows],
        )
        tables = [name for (name,) in cursor.fetchall()]
        for table in tables:
            cursor.execute(f"VACUUM {connection.ops.quote_name(table)}")
    return tables

"""On PostgreSQL, transactional tests are emptied by DELETE, not TRUNCATE.

Django flushes every table after a transactional test; on PostgreSQL that is one
TRUNCATE of about 40 tables, which gives each table and index new files: about 1 s a
test on this 2-core machine, against a few milliseconds for DELETEs of the few rows a
test leaves. The DELETEs run in the flush's transaction, where Django's deferred
foreign keys are checked at the commit, once every table is empty. A flush asked to
reset sequences (``django_db(reset_sequences=True)``) still truncates."""

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

"""Compare-and-swap of many rows in one statement.

The cycle's compare-and-swap is a filtered ``update()`` whose row count says whether
this writer won (``Checkpoint.version``, ``Container.latest_recommendation``). Done a
row at a time that is one statement per container and cycle; here one ``UPDATE ...
FROM (VALUES ...) ... RETURNING`` carries up to ``CAS_BATCH`` rows, each with the
value it expects, and returns the primary keys of the rows that matched: the rows this
writer won, exactly as the row counts of the single updates would have said.
PostgreSQL and SQLite (3.35+) both run it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, time
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Field, JSONField, Model

# Rows per statement: 7 parameters a row stays under SQLite's 32,766 and PostgreSQL's
# 65,535 bound parameters, and a statement of checkpoints stays a few megabytes.
# Narrower rows may go more to a statement (the ``batch`` of the functions below),
# always within the backend's parameter limit (``_rows_per_statement``).
CAS_BATCH = 2000


def _rows_per_statement(batch: int | None, parameters_per_row: int) -> int:
    """``batch`` rows (CAS_BATCH by default), fewer when they would pass the
    backend's limit of bound parameters (SQLite 32,766; PostgreSQL 65,535, which
    binds nothing on the server unless ``server_side_binding`` is set: Django's
    default sends the values in the statement's text, with no such limit)."""
    if connection.vendor == "postgresql":
        options = connection.settings_dict.get("OPTIONS") or {}
        if not options.get("server_side_binding"):
            return max(1, batch or CAS_BATCH)
        limit = 65_000
    else:
        limit = 30_000
    return max(1, min(batch or CAS_BATCH, limit // parameters_per_row))


def compare_and_swap(
    model: type[Model],
    *,
    expect: str,
    rows: Sequence[tuple[int, Any, Mapping[str, Any]]],
    increment: str | None = None,
    batch: int | None = None,
) -> set[int]:
    """Set the fields of each ``(pk, expected, values)`` row whose column ``expect``
    still holds ``expected`` (None matches NULL); ``increment`` (a column) goes up by
    one on each row written; ``batch`` rows a statement (CAS_BATCH by default).
    Returns the primary keys written."""
    if not rows:
        return set()
    names = list(rows[0][2])
    for _, _, values in rows:
        if list(values) != names:
            raise ValueError("rows: every row must set the same fields, in one order")
    meta = model._meta
    table = connection.ops.quote_name(meta.db_table)
    pk = meta.pk
    assert pk is not None
    expect_field = _concrete(model, expect)
    fields = [_concrete(model, name) for name in names]
    columns = [pk, expect_field, *fields]
    is_postgres = connection.vendor == "postgresql"

    def placeholder(field: Any) -> str:
        if not is_postgres:
            return "%s"
        # VALUES parameters have no type of their own in PostgreSQL: name it.
        return f"CAST(%s AS {field.db_type(connection)})"

    row_sql = "(" + ", ".join(placeholder(f) for f in columns) + ")"
    aliases = ["v_pk", "v_expect"] + [f"v_{i}" for i in range(len(fields))]
    sets = [
        f"{connection.ops.quote_name(f.column)} = v.{alias}"
        for f, alias in zip(fields, aliases[2:], strict=True)
    ]
    if increment is not None:
        column = connection.ops.quote_name(_concrete(model, increment).column)
        sets.append(f"{column} = t.{column} + 1")
    same = "IS NOT DISTINCT FROM" if is_postgres else "IS"
    expect_column = connection.ops.quote_name(expect_field.column)
    pk_column = connection.ops.quote_name(pk.column)
    written: set[int] = set()
    batch = _rows_per_statement(batch, len(columns))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), batch):
            chunk = rows[start : start + batch]
            params: list[Any] = []
            for key, expected, values in chunk:
                params.append(pk.get_db_prep_value(key, connection))
                params.append(expect_field.get_db_prep_save(expected, connection))
                params += [
                    f.get_db_prep_save(values[f.name], connection) for f in fields
                ]
            sql = (
                f"WITH v ({', '.join(aliases)}) AS (VALUES "
                + ", ".join([row_sql] * len(chunk))
                + f") UPDATE {table} AS t SET {', '.join(sets)} FROM v"
                f" WHERE t.{pk_column} = v.v_pk AND t.{expect_column} {same} v.v_expect"
                f" RETURNING {pk_column}"
            )
            cursor.execute(sql, params)
            written.update(int(r[0]) for r in cursor.fetchall())
    return written


def insert_returning_pks(
    objs: Sequence[Model], *, fields: Sequence[str], batch: int | None = None
) -> None:
    """INSERT the unsaved ``objs`` (one model), ``batch`` rows a statement
    (``CAS_BATCH`` by default), and set each one's primary key from ``RETURNING``.

    ``bulk_create`` does the same, but on PostgreSQL it sends each column as one array
    (``UNNEST``), which psycopg quotes element by element with a regular expression:
    for the recommendations' explanation documents that cost half a second per
    1,000 rows (docs/refresh.md, "Measured"). On PostgreSQL the rows go as one JSON
    document a statement (``jsonb_to_recordset``: half the time of a parameter per
    value, measured with 8,000 recommendations); on SQLite each value is a parameter
    of its own, as in ``compare_and_swap``. Both return the rows in the order they
    were given (as ``bulk_create`` relies on too).
    """
    if not objs:
        return
    model = type(objs[0])
    meta = model._meta
    pk = meta.pk
    assert pk is not None
    columns = [_concrete(model, name) for name in fields]
    is_postgres = connection.vendor == "postgresql"
    batch = _rows_per_statement(batch, 1 if is_postgres else len(columns))
    quoted = [connection.ops.quote_name(f.column) for f in columns]
    head = (
        f"INSERT INTO {connection.ops.quote_name(meta.db_table)} ({', '.join(quoted)})"
    )
    tail = f" RETURNING {connection.ops.quote_name(pk.column)}"
    if is_postgres:
        typed = ", ".join(
            f"{name} {f.db_type(connection)}"
            for name, f in zip(quoted, columns, strict=True)
        )
        # One function scan and nothing to reorder it: rows go in, and come back,
        # in the document's order (as ``bulk_create`` relies on for its UNNEST).
        head += (
            f" SELECT {', '.join(quoted)}"
            f" FROM jsonb_to_recordset(%s::jsonb) AS v({typed})"
        )
    else:
        row_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
    with connection.cursor() as cursor:
        for start in range(0, len(objs), batch):
            chunk = objs[start : start + batch]
            if is_postgres:
                cursor.execute(head + tail, [_json_rows(chunk, columns)])
            else:
                params: list[Any] = []
                for obj in chunk:
                    params += [
                        f.get_db_prep_save(f.pre_save(obj, add=True), connection)
                        for f in columns
                    ]
                cursor.execute(
                    f"{head} VALUES {', '.join([row_sql] * len(chunk))}{tail}", params
                )
            for obj, (key,) in zip(chunk, cursor.fetchall(), strict=True):
                obj.pk = key
                obj._state.adding = False


# Values JSON carries as the column reads them, without the field's preparation.
_PLAIN = frozenset({int, str, bool, float})


def _json_rows(objs: Sequence[Model], columns: Sequence[Field[Any, Any]]) -> str:
    """``objs`` as one JSON array of objects keyed by column: a JSON column's value as
    JSON itself, dates and times in ISO 8601, the rest as the column prepares it. A
    value JSON cannot carry (bytes, a decimal, a non-finite float) raises, naming it:
    its caller's models have none."""
    # The wrapper itself, not the thread-local proxy ``connection``: each field reads
    # it a few times a value.
    db = connections[DEFAULT_DB_ALIAS]
    out = []
    for obj in objs:
        row: dict[str, Any] = {}
        for f in columns:
            value = f.pre_save(obj, add=True)
            if isinstance(f, JSONField):
                if f.encoder is not None and value is not None:
                    # As the field's own encoder would write it.
                    value = json.loads(json.dumps(value, cls=f.encoder))
            elif value is not None and type(value) not in _PLAIN:
                value = f.get_db_prep_save(value, db)
                if isinstance(value, date | time):  # datetimes too
                    value = value.isoformat()
            row[f.column] = value
        out.append(row)
    return json.dumps(out, allow_nan=False)


def _concrete(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.concrete:
        raise ValueError(f"{model.__name__}.{name}: not a column")
    return field

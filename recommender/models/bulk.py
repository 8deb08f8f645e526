"""Statements that write many rows at once, on PostgreSQL and SQLite (3.35+) alike.

- ``compare_and_swap``: filtered updates in one ``UPDATE ... FROM (VALUES ...)``; the
  keys returned are the rows this writer won; ``update_many``: no condition.
- ``insert_returning_pks``, ``insert_new``, ``add_usage_hours``: new rows in one
  statement (their keys back; a conflicting row skipped; hours added by an upsert).
- ``insert_pointed``, ``replace_rows``: new rows with the compare-and-swap of a pointer
  to each, or a read model's stale rows deleted and new ones written (one statement
  on PostgreSQL); ``insert_changes``: ``ResizeChange`` rows, an approved one only while
  its workload is among ``approvable`` (Off wins)."""
# PostgreSQL and SQLite (3.35+) both run them. On PostgreSQL the inserts and
# ``add_usage_hours`` send their rows as one JSON document a statement, bound on the
# server (``document_cursor``).

from __future__ import annotations

import contextlib
import functools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime, time
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
from django.core.exceptions import EmptyResultSet
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.utils import CursorWrapper
from django.db.models import DateField, Field, JSONField, Model, QuerySet
from django.db.models.sql.subqueries import DeleteQuery

from recommender.engine.usage_hours import HourlyUsage
from recommender.models.actuation import OPEN_RESIZE_STATUSES, ResizeChange
from recommender.models.fleet import Workload
from recommender.models.recommendation import UsageHour

# Rows per statement: 7 parameters a row stays under SQLite's 32,766 and PostgreSQL's
# 65,535 bound parameters, and a statement of checkpoints stays a few megabytes.
# Narrower rows may go more to a statement (the ``batch`` of the functions below),
# always within the backend's parameter limit (``rows_per_statement``).
CAS_BATCH = 2000
# Rows fetched at a time where the refresh streams a whole shard's rows (a server-side
# cursor on PostgreSQL) instead of reading them whole: 100,000 containers' rows were
# in memory at once as tuples, beside the maps built from them.
STREAM_ROWS = 2000


def rows_per_statement(batch: int | None, parameters_per_row: int) -> int:
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
    batch = rows_per_statement(batch, len(columns))
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


def update_many(
    model: type[Model],
    *,
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    batch: int | None = None,
) -> int:
    """Set the fields of each ``(pk, values)`` row, ``batch`` rows a statement
    (``compare_and_swap`` with nothing to compare: Django's ``bulk_update`` builds a
    ``CASE`` of every row for every field, seconds for thousands of rows). Returns
    the rows written."""
    pk = model._meta.pk
    assert pk is not None
    return len(
        compare_and_swap(
            model,
            expect=pk.name,
            rows=[(key, key, values) for key, values in rows],
            batch=batch,
        )
    )


def insert_returning_pks(
    objs: Sequence[Model], *, fields: Sequence[str], batch: int | None = None
) -> None:
    """INSERT the unsaved ``objs`` (one model), ``batch`` rows a statement
    (``CAS_BATCH`` by default), and set each one's primary key from ``RETURNING``.

    ``bulk_create`` does the same, but on PostgreSQL it sends each column as one array
    (``UNNEST``), which psycopg quotes element by element with a regular expression:
    for the recommendations' explanation documents that cost half a second per
    1,000 rows (docs/refresh.md, "How the cycle scales"). On PostgreSQL the rows go
    as one JSON document a statement (``jsonb_to_recordset``: half the time of a
    parameter per value, measured with 8,000 recommendations); on SQLite each value is
    a parameter of its own, as in ``compare_and_swap``. Both return the rows in the
    order they were given (as ``bulk_create`` relies on too).
    """
    if not objs:
        return
    model = type(objs[0])
    meta = model._meta
    pk = meta.pk
    assert pk is not None
    columns = [_concrete(model, name) for name in fields]
    is_postgres = connection.vendor == "postgresql"
    batch = rows_per_statement(batch, 1 if is_postgres else len(columns))
    tail = f" RETURNING {connection.ops.quote_name(pk.column)}"
    if is_postgres:
        head = _insert_from_json(meta.db_table, columns)
    else:
        quoted = [connection.ops.quote_name(f.column) for f in columns]
        head = (
            f"INSERT INTO {connection.ops.quote_name(meta.db_table)}"
            f" ({', '.join(quoted)})"
        )
        row_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
    with document_cursor() as cursor:
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


def insert_pointed(
    objs: Sequence[Model],
    *,
    fields: Sequence[str],
    owner: str,
    pointer: str,
    expected: Mapping[int, Any],
) -> set[int]:
    """Store each unsaved object of ``objs`` (one model, one per ``owner`` row: its
    foreign key) whose owner's column ``pointer`` still holds ``expected[owner key]``
    (None matches NULL), and point that owner at it. An object whose owner another
    writer moved meanwhile is not stored, and stays unsaved. Returns the owner keys
    pointed at their new row; each stored object gets its primary key.

    On PostgreSQL one statement whatever the number of rows: the owners' compare-and-
    swap sets each pointer to a key drawn from the model's sequence, and the insert
    takes the rows it returns (the pointer's foreign key is checked at commit, as
    Django's are deferred). Elsewhere ``insert_returning_pks``, ``compare_and_swap``
    and a delete of the rows lost."""
    if not objs:
        return set()
    model = type(objs[0])
    owner_field = _concrete(model, owner)
    owner_model = owner_field.related_model
    assert isinstance(owner_model, type) and issubclass(owner_model, Model)
    by_owner = {getattr(obj, owner_field.attname): obj for obj in objs}
    if len(by_owner) != len(objs):
        raise ValueError(f"objs: one {model.__name__} per {owner} at most")
    if connection.vendor != "postgresql":
        insert_returning_pks(objs, fields=fields, batch=len(objs))
        won = compare_and_swap(
            owner_model,
            expect=pointer,
            rows=[
                (key, expected[key], {pointer: obj.pk}) for key, obj in by_owner.items()
            ],
            batch=len(objs),
        )
        lost = [obj for key, obj in by_owner.items() if key not in won]
        for start in range(0, len(lost), CAS_BATCH):
            chunk = lost[start : start + CAS_BATCH]
            model._default_manager.filter(pk__in=[obj.pk for obj in chunk]).delete()
            for obj in chunk:
                obj.pk = None
                obj._state.adding = True
        return won
    q = connection.ops.quote_name
    meta, owner_meta = model._meta, owner_model._meta
    assert meta.pk is not None and owner_meta.pk is not None
    columns = [_concrete(model, name) for name in fields]
    names = ", ".join(q(f.column) for f in columns)
    typed = ", ".join(f"{q(f.column)} {f.db_type(connection)}" for f in columns)
    pointer_field = _concrete(owner_model, pointer)
    expect_type = pointer_field.db_type(connection)
    pointer_column = q(pointer_field.column)
    pk, owner_column = q(meta.pk.column), q(owner_field.column)
    sql = (
        f"WITH v AS (SELECT * FROM jsonb_to_recordset(%s::jsonb)"
        f" AS v({typed}, v_expect {expect_type})),"
        # Each won owner's new key, drawn in the update: nothing to join afterwards
        # (two WITH queries joined have no statistics to plan by).
        f" won AS (UPDATE {q(owner_meta.db_table)} AS t"
        f" SET {pointer_column} = nextval(pg_get_serial_sequence(%s, %s))"
        f" FROM v WHERE t.{q(owner_meta.pk.column)} = v.{owner_column}"
        f" AND t.{pointer_column} IS NOT DISTINCT FROM v.v_expect"
        f" RETURNING t.{pointer_column} AS v_key, v.*)"
        f" INSERT INTO {q(meta.db_table)} ({pk}, {names})"
        f" SELECT v_key, {names} FROM won RETURNING {pk}, {owner_column}"
    )
    extra = [{"v_expect": expected[key]} for key in by_owner]
    with document_cursor() as cursor:
        cursor.execute(
            sql,
            [
                _json_rows(list(by_owner.values()), columns, extra=extra),
                q(meta.db_table),
                meta.pk.column,
            ],
        )
        stored = cursor.fetchall()
    for key, owner_key in stored:
        obj = by_owner[owner_key]
        obj.pk = key
        obj._state.adding = False
    return {owner_key for _, owner_key in stored}


def insert_new(
    objs: Sequence[Model],
    *,
    fields: Sequence[str] | None = None,
    batch: int | None = None,
) -> None:
    """INSERT the unsaved ``objs`` (one model), ``batch`` rows a statement
    (``CAS_BATCH`` by default), skipping each that conflicts with a stored row (a
    unique key: another writer stored it first). ``fields``: every concrete column
    but the primary key by default. Keys are not read back.

    What ``bulk_create(ignore_conflicts=True)`` does; on PostgreSQL, as one JSON
    document a statement (``insert_returning_pks``): 7,800 discovered workloads took
    2.5 times less time so than in ``bulk_create``'s arrays (docs/refresh.md, "First
    contact in parallel"). Elsewhere it is ``bulk_create``.
    """
    if not objs:
        return
    model = type(objs[0])
    names = (
        [f.name for f in model._meta.concrete_fields if not f.primary_key]
        if fields is None
        else list(fields)
    )
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(
            objs, batch_size=batch or CAS_BATCH, ignore_conflicts=True
        )
        return
    columns = [_concrete(model, name) for name in names]
    sql = _insert_from_json(model._meta.db_table, columns) + " ON CONFLICT DO NOTHING"
    batch = rows_per_statement(batch, 1)
    with document_cursor() as cursor:
        for start in range(0, len(objs), batch):
            cursor.execute(sql, [_json_rows(objs[start : start + batch], columns)])


def replace_rows(
    stale: QuerySet[Any],
    objs: Sequence[Model],
    *,
    conflict: Sequence[str] = (),
    update: Sequence[str] = (),
) -> None:
    """Delete ``stale``'s rows and insert ``objs`` (unsaved, of its model: every
    concrete column but the primary key); with ``conflict`` (fields of a unique
    key), an object whose key is stored sets that row's ``update`` fields instead.
    The rows deleted must not be among those the insert meets (the caller's to
    ensure: a stored key is either stale or written over).

    On PostgreSQL one statement whatever the rows (the delete a ``WITH`` query of the
    insert, which reads the table as it was before it: a read model's rows replaced
    each cycle cost one statement, not two); elsewhere a delete and ``bulk_create``."""
    model = stale.model
    if connection.vendor != "postgresql":
        stale.delete()
        if objs:
            model._default_manager.bulk_create(
                objs,
                update_conflicts=bool(conflict),
                unique_fields=list(conflict) or None,
                update_fields=list(update) or None,
            )
        return
    query = stale.query.clone()
    query.__class__ = DeleteQuery
    try:
        delete_sql, params = query.get_compiler(connection=connection).as_sql()
    except EmptyResultSet:  # nothing can match (an empty ``__in``)
        delete_sql, params = "", ()
    if not objs:
        if delete_sql:
            with connection.cursor() as cursor:
                cursor.execute(delete_sql, params)
        return
    columns = [f for f in model._meta.concrete_fields if not f.primary_key]
    q = connection.ops.quote_name
    sql = _insert_from_json(model._meta.db_table, columns)
    if conflict:
        sets = ", ".join(
            f"{q(c)} = excluded.{q(c)}"
            for c in (_concrete(model, name).column for name in update)
        )
        keys = ", ".join(q(_concrete(model, name).column) for name in conflict)
        sql += f" ON CONFLICT ({keys}) DO " + (
            f"UPDATE SET {sets}" if sets else "NOTHING"
        )
    if delete_sql:
        sql = f"WITH gone AS ({delete_sql}) {sql}"
    with document_cursor() as cursor:
        cursor.execute(sql, [*params, _json_rows(objs, columns)])


@contextlib.contextmanager
def document_cursor() -> Iterator[CursorWrapper]:
    """A cursor for statements that carry one large JSON document (``_json_rows``).

    On PostgreSQL its parameters are bound on the server: the document travels beside
    the statement instead of quoted into its text, which the server would scan
    character by character (13,854 new recommendations, a 37 MB document: 1.12-1.19 s
    a statement against 1.54-1.58 s in the text, load 0.8). Never prepared (a
    connection pooler in transaction mode would lose the statement). On SQLite,
    Django's own cursor. Either way as Django's cursor: the connection's health check
    (CONN_HEALTH_CHECKS), execute wrappers (statement counts) and error translation
    apply."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            yield cursor
        return
    # What Django's connection.cursor() does before it wraps its own cursor.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        raw = _server_bound_class()(connection.connection)
    wrapper = (
        connection.make_debug_cursor(raw)
        if connection.queries_logged
        else connection.make_cursor(raw)
    )
    with wrapper as cursor:
        yield cursor


@functools.cache
def _server_bound_class() -> type[Any]:
    """psycopg's server-binding cursor, as Django makes it, never prepared (imported
    when first used: the module needs psycopg)."""
    # Defined only where psycopg 3 is installed: unknown to Django's type stubs.
    from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]
        ServerBindingCursor,
    )

    class ServerBound(ServerBindingCursor):  # type: ignore[misc]
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            return super().execute(query, params, **{**kwargs, "prepare": False})

    return ServerBound


def _insert_from_json(table: str, columns: Sequence[Field[Any, Any]]) -> str:
    """PostgreSQL's INSERT of ``columns`` from the one JSON document parameter
    ``_json_rows`` makes."""
    quoted = [connection.ops.quote_name(f.column) for f in columns]
    typed = ", ".join(
        f"{name} {f.db_type(connection)}"
        for name, f in zip(quoted, columns, strict=True)
    )
    # One function scan and nothing to reorder it: rows go in, and come back, in the
    # document's order (as ``bulk_create`` relies on for its UNNEST).
    return (
        f"INSERT INTO {connection.ops.quote_name(table)} ({', '.join(quoted)})"
        f" SELECT {', '.join(quoted)} FROM jsonb_to_recordset(%s::jsonb) AS v({typed})"
    )


# Values JSON carries as the column reads them, without the field's preparation.
_PLAIN = frozenset({int, str, bool, float})


def _json_rows(
    objs: Sequence[Model],
    columns: Sequence[Field[Any, Any]],
    *,
    extra: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """``objs`` as one JSON array of objects keyed by column: a JSON column's value as
    JSON itself, dates and times in ISO 8601, bytes in bytea's hex text, the rest as
    the column prepares it; ``extra``: more keys of each row, as they are.

    A non-finite float in a column raises, naming the column (JSON cannot carry it);
    inside a JSON column's value it is written as null (as the engine's explanations
    write one), and a NumPy number as the Python number it holds. Encoded by msgspec:
    13,854 rows shaped like new recommendations (36 MB) took 1.4 s to encode with
    ``json.dumps``, 0.17 s with msgspec (load 1.3)."""
    # The wrapper itself, not the thread-local proxy ``connection``: each field reads
    # it a few times a value.
    db = connections[DEFAULT_DB_ALIAS]
    plan = [
        (f, f.column, _reader(f), isinstance(f, JSONField), getattr(f, "encoder", None))
        for f in columns
    ]
    out = []
    for number, obj in enumerate(objs):
        row: dict[str, Any] = {} if extra is None else dict(extra[number])
        for f, column, read, is_json, encoder in plan:
            value = read(obj)
            if value is None or type(value) in _PLAIN:
                if type(value) is float and not math.isfinite(value):
                    raise ValueError(
                        f"{type(obj).__name__}.{f.name}: {value} cannot be sent as JSON"
                    )
            elif is_json:
                if encoder is not None:
                    # As the field's own encoder would write it.
                    value = json.loads(json.dumps(value, cls=encoder))
            elif isinstance(value, bytes | bytearray | memoryview):
                value = "\\x" + bytes(value).hex()  # bytea's hex input
            else:
                value = f.get_db_prep_save(value, db)
                if isinstance(value, date | time):  # datetimes too
                    value = value.isoformat()
            row[column] = value
        out.append(row)
    return _ENCODER.encode(out).decode()


def _reader(f: Field[Any, Any]) -> Callable[[Model], Any]:
    """How ``_json_rows`` reads ``f``'s value of an object being inserted: its
    attribute, or ``pre_save`` where that sets it (a date column's auto_now)."""
    if type(f).pre_save is Field.pre_save or (
        isinstance(f, DateField) and not (f.auto_now or f.auto_now_add)
    ):
        return attrgetter(f.attname)
    return lambda obj: f.pre_save(obj, add=True)


def _plain_value(value: Any) -> Any:
    """What msgspec leaves to its caller, as ``json.dumps`` writes it: a NumPy number
    as the Python number it holds, a subclass of str, int or float (a SafeString, a
    NumPy float) as its base type's value."""
    if isinstance(value, np.generic):
        return value.item()
    for base, plain in _BASES:
        if isinstance(value, base):
            return plain(value)  # not base(value): SafeString's __str__ is itself
    raise TypeError(f"{type(value).__name__} cannot be sent as JSON: {value!r}")


_BASES: tuple[tuple[type, Callable[[Any], Any]], ...] = (
    (str, str.__str__),
    (int, int.__int__),
    (float, float.__float__),
)
_ENCODER = msgspec.json.Encoder(enc_hook=_plain_value)


def _concrete(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.concrete:
        raise ValueError(f"{model.__name__}.{name}: not a column")
    return field


# --- Hourly usage, added in one statement -----------------------------------------

# Each column of UsageHour with the HourlyUsage field it adds (its peak kept, or
# its sum added).
_USAGE_COLUMNS = (
    ("cpu_max_cores", "cpu_max", "peak"),
    ("cpu_sum_cores", "cpu_sum", "sum"),
    ("cpu_samples", "cpu_count", "sum"),
    ("memory_max_bytes", "memory_max", "peak"),
    ("memory_sum_bytes", "memory_sum", "sum"),
    ("memory_samples", "memory_count", "sum"),
)


def add_usage_hours(usage: HourlyUsage) -> int:
    """Add ``usage`` (keys: container ids, one entry per container and hour) to the
    stored ``UsageHour`` rows, creating the missing ones: one statement whatever the
    number of entries (a JSON document of them). Returns the entries sent."""
    if not len(usage):
        return 0
    is_postgres = connection.vendor == "postgresql"
    hours: dict[float, Any] = {}
    for ends_s in np.unique(usage.ends_s).tolist():
        at = datetime.fromtimestamp(ends_s, tz=UTC)
        # As the column stores it, so the conflict target matches the stored text on
        # SQLite.
        hours[ends_s] = (
            at.isoformat()
            if is_postgres
            else connection.ops.adapt_datetimefield_value(at)
        )
    columns = [getattr(usage, field).tolist() for _, field, _ in _USAGE_COLUMNS]
    rows = [
        # JSON has no NaN: a peak without a sample is null (NaN != NaN).
        [key, hours[ends_s], *(None if v != v else v for v in values)]
        for key, ends_s, *values in zip(
            usage.key.tolist(), usage.ends_s.tolist(), *columns, strict=True
        )
    ]
    document = json.dumps(rows, separators=(",", ":"), allow_nan=False)
    ops = connection.ops
    table = ops.quote_name(UsageHour._meta.db_table)
    names = ["container_id", "ends_at", *(c for c, _, _ in _USAGE_COLUMNS)]
    types = [
        "bigint",
        "timestamp with time zone",
        *(
            _concrete(UsageHour, c).db_type(connection) or ""
            for c, _, _ in _USAGE_COLUMNS
        ),
    ]
    if is_postgres:
        selects = [f"(e.r ->> {i})::{t}" for i, t in enumerate(types)]
        source = "jsonb_array_elements(%s::jsonb) AS e(r)"
    else:
        selects = [f"json_extract(value, '$[{i}]')" for i in range(len(names))]
        source = "json_each(%s)"
    sets = []
    for column, _, how in _USAGE_COLUMNS:
        mine, theirs = f"{table}.{ops.quote_name(column)}", f"excluded.{column}"
        if how == "sum":
            sets.append(f"{column} = {mine} + {theirs}")
        else:
            # NULL is no sample: the other side's peak stands.
            sets.append(
                f"{column} = CASE WHEN {mine} IS NULL OR {theirs} > {mine} "
                f"THEN {theirs} ELSE {mine} END"
            )
    sql = (
        f"INSERT INTO {table} ({', '.join(ops.quote_name(n) for n in names)}) "
        f"SELECT {', '.join(selects)} FROM {source} WHERE true "
        "ON CONFLICT (container_id, ends_at) DO UPDATE SET " + ", ".join(sets)
    )
    with document_cursor() as cursor:
        cursor.execute(sql, [document])
    return len(rows)


# --- New resize changes in one statement ----------------------------------------


def _fields() -> list[Any]:
    return [f for f in ResizeChange._meta.concrete_fields if not f.primary_key]


def _json_default(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def insert_changes(
    rows: list[dict[str, Any]],
    *,
    cluster_id: int,
    approvable: QuerySet[Workload] | None = None,
) -> list[dict[str, Any]]:
    """Insert new changes (``rows``: field attnames to values; absent fields get their
    defaults) and return the inserted ones complete, each with its ``id``. An approved
    row is inserted only when its workload is in ``approvable`` (read by the insert
    statement itself; None: always)."""
    fields = _fields()
    defaults = {f.attname: f.get_default() for f in fields}
    complete = [{**defaults, **row} for row in rows]
    if not complete:
        return complete
    guard = _Guard.of(approvable, complete)
    if connection.vendor == "postgresql":
        _insert_postgresql(complete, fields, guard)
    else:
        _insert_executemany(complete, fields, guard, cluster_id=cluster_id)
    return [row for row in complete if "id" in row]


class _Guard:
    """The condition an approved row needs, as SQL over a row's status and workload
    id: ``<status> <> 'approved' OR <workload id> IN (<approvable's ids>)``."""

    def __init__(self, sql: str, params: tuple[Any, ...]) -> None:
        self.sql = sql
        self.params = params

    @classmethod
    def of(
        cls, approvable: QuerySet[Workload] | None, rows: list[dict[str, Any]]
    ) -> _Guard | None:
        approved = {
            r["workload_id"]
            for r in rows
            if r["status"] == ResizeChange.Status.APPROVED
        }
        if approvable is None or not approved:
            return None
        # Only the workloads some approved row names: a short list by primary key.
        query = approvable.filter(pk__in=approved).values("pk").order_by().query
        sql, params = query.sql_with_params()
        return cls(sql, tuple(params))

    def where(self, status: str, workload_id: str) -> str:
        """The condition, given SQL for a row's status and workload id."""
        return f"({status} <> %s OR {workload_id} IN ({self.sql}))"

    def values(self) -> list[Any]:
        """The condition's parameters when status and workload id are SQL."""
        return [ResizeChange.Status.APPROVED, *self.params]

    def row_values(self, status: str, workload_id: int) -> list[Any]:
        """The condition's parameters when they are one row's parameters too."""
        return [status, ResizeChange.Status.APPROVED, workload_id, *self.params]


def _insert_postgresql(
    rows: list[dict[str, Any]], fields: list[Any], guard: _Guard | None
) -> None:
    ops = connection.ops
    table = ops.quote_name(ResizeChange._meta.db_table)
    columns = ", ".join(ops.quote_name(f.column) for f in fields)
    selects = []
    for i, f in enumerate(fields):
        if f.get_internal_type() == "JSONField":
            selects.append(f"e.r -> {i}")  # the JSON value itself
        else:
            selects.append(f"(e.r ->> {i})::{f.db_type(connection)}")
    document = json.dumps(
        [[row[f.attname] for f in fields] for row in rows],
        default=_json_default,
        separators=(",", ":"),
    )
    where, params = "", [document]
    if guard is not None:
        at = {f.attname: i for i, f in enumerate(fields)}
        where = "WHERE " + guard.where(
            f"(e.r ->> {at['status']})", f"(e.r ->> {at['workload_id']})::bigint"
        )
        params += guard.values()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {', '.join(selects)} "
            f"FROM jsonb_array_elements(%s::jsonb) AS e(r) {where} "
            "RETURNING id, workload_id, pod",
            params,
        )
        ids = {(workload_id, pod): pk for pk, workload_id, pod in cursor.fetchall()}
    for row in rows:
        found = ids.get((row["workload_id"], row["pod"]))
        if found is not None:
            row["id"] = found


def _insert_executemany(
    rows: list[dict[str, Any]],
    fields: list[Any],
    guard: _Guard | None,
    *,
    cluster_id: int,
) -> None:
    ops = connection.ops
    json_fields = {f.attname for f in fields if f.get_internal_type() == "JSONField"}
    date_fields = {
        f.attname for f in fields if f.get_internal_type() == "DateTimeField"
    }
    adapted_dates: dict[datetime, Any] = {}
    values = []
    for row in rows:
        one = []
        for f in fields:
            value = row[f.attname]
            if f.attname in json_fields:
                value = ops.adapt_json_value(value, getattr(f, "encoder", None))
            elif f.attname in date_fields and value is not None:
                if value not in adapted_dates:  # mostly one ``now`` for every row
                    adapted_dates[value] = ops.adapt_datetimefield_value(value)
                value = adapted_dates[value]
            one.append(value)
        if guard is not None:
            one += guard.row_values(row["status"], row["workload_id"])
        values.append(one)
    table = ops.quote_name(ResizeChange._meta.db_table)
    columns = ", ".join(ops.quote_name(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    where = "" if guard is None else " WHERE " + guard.where("%s", "%s")
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} ({columns}) SELECT {marks}{where}", values
        )
    wanted = {(row["workload_id"], row["pod"]) for row in rows}
    ids = {
        (workload_id, pod): pk
        for pk, workload_id, pod in ResizeChange.objects.filter(
            workload__cluster_id=cluster_id,
            status__in=OPEN_RESIZE_STATUSES,
            created_at__in={row["created_at"] for row in rows},  # one ``now``
        ).values_list("pk", "workload_id", "pod")
        if (workload_id, pod) in wanted
    }
    for row in rows:
        found = ids.get((row["workload_id"], row["pod"]))
        if found is not None:
            row["id"] = found

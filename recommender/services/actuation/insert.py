"""Inserting thousands of new resize changes in one statement: ``insert_changes``.

The updater's first cycle over a large cluster proposes thousands of changes at once
(``make bench BENCH=updater``: 3,000 for 10,000 pods). ``bulk_create`` builds a model
instance per row and prepares every value through each field; here the rows stay plain
dicts (every concrete field of ``ResizeChange``, defaults filled in) and go to the
database as one statement:

- PostgreSQL: ``INSERT … SELECT … FROM jsonb_array_elements(%s) RETURNING id``: the
  rows travel as **one** JSON document (serialised by the C encoder; a parameter per
  value, or one array parameter per column, costs seconds in the client's Python
  dumpers for thousands of rows), each column cast from its JSON element in SQL;
- SQLite: one prepared statement run for every row (``executemany``), then one query
  reads the ids back by (workload, pod), unique among open changes.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from django.db import connection

from recommender.models import ResizeChange
from recommender.services.actuation import workflow


def _fields() -> list[Any]:
    return [f for f in ResizeChange._meta.concrete_fields if not f.primary_key]


def _json_default(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def insert_changes(
    rows: list[dict[str, Any]], *, cluster_id: int
) -> list[dict[str, Any]]:
    """Insert new changes (``rows``: field attnames to values; absent fields get their
    defaults) and return them complete, each with its ``id``."""
    fields = _fields()
    defaults = {f.attname: f.get_default() for f in fields}
    complete = [{**defaults, **row} for row in rows]
    if not complete:
        return complete
    if connection.vendor == "postgresql":
        _insert_postgresql(complete, fields)
    else:
        _insert_executemany(complete, fields, cluster_id=cluster_id)
    return complete


def _insert_postgresql(rows: list[dict[str, Any]], fields: list[Any]) -> None:
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
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {', '.join(selects)} "
            "FROM jsonb_array_elements(%s::jsonb) AS e(r) "
            "RETURNING id, workload_id, pod",
            [document],
        )
        ids = {(workload_id, pod): pk for pk, workload_id, pod in cursor.fetchall()}
    for row in rows:
        row["id"] = ids[(row["workload_id"], row["pod"])]


def _insert_executemany(
    rows: list[dict[str, Any]], fields: list[Any], *, cluster_id: int
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
        values.append(one)
    table = ops.quote_name(ResizeChange._meta.db_table)
    columns = ", ".join(ops.quote_name(f.column) for f in fields)
    marks = "(" + ", ".join(["%s"] * len(fields)) + ")"
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES {marks}", values)
    wanted = {(row["workload_id"], row["pod"]) for row in rows}
    ids = {
        (workload_id, pod): pk
        for pk, workload_id, pod in ResizeChange.objects.filter(
            workload__cluster_id=cluster_id,
            status__in=workflow.OPEN,
            created_at__in={row["created_at"] for row in rows},  # one ``now``
        ).values_list("pk", "workload_id", "pod")
        if (workload_id, pod) in wanted
    }
    for row in rows:
        row["id"] = ids[(row["workload_id"], row["pod"])]

"""Inserting thousands of new resize changes in one statement: ``insert_changes``."""
# The updater's first cycle over a large cluster proposes thousands of changes at once
# (``make bench BENCH=updater``: 3,000 for 10,000 pods). ``bulk_create`` builds a model
# instance per row and prepares every value through each field; here the rows stay plain
# dicts (every concrete field of ``ResizeChange``, defaults filled in) and go to the
# database as one statement:
#
# - PostgreSQL: ``INSERT … SELECT … FROM jsonb_array_elements(%s) RETURNING id``: the
#   rows travel as **one** JSON document (serialised by the C encoder; a parameter per
#   value, or one array parameter per column, costs seconds in the client's Python
#   dumpers for thousands of rows), each column cast from its JSON element in SQL;
# - SQLite: one prepared statement run for every row (``executemany``), then one query
#   reads the ids back by (workload, pod), unique among open changes.
#
# Off wins: an **approved** row (a policy's automatic approval) is inserted only when
# its workload is among ``approvable`` (the caller's acting predicate as a Workload
# query), and that condition is part of the insert statement itself, so a switch to Off
# committed after the updater read the policy, and before this statement, inserts no
# approved change (the rows the statement left out are not returned).

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from recommender.models import ResizeChange, Workload
from recommender.services.actuation import workflow


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
            status__in=workflow.OPEN,
            created_at__in={row["created_at"] for row in rows},  # one ``now``
        ).values_list("pk", "workload_id", "pod")
        if (workload_id, pod) in wanted
    }
    for row in rows:
        found = ids.get((row["workload_id"], row["pod"]))
        if found is not None:
            row["id"] = found

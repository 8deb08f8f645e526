"""Rows a bench writes with one INSERT … SELECT, every column the model has filled.

``insert_select`` names the columns a bench generates (SQL expressions over its FROM
clause) and fills every other column of the model from the field's default (its
``default``, ``auto_now`` time, NULL or the empty string): a column added to a model
later gets its default here instead of breaking the bench's INSERT."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, models
from django.utils import timezone


def default_of(field: models.Field[Any, Any]) -> Any:
    """What the model would store in ``field`` when nothing sets it (as a parameter)."""
    if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
        value: Any = timezone.now()
    elif field.has_default():
        value = field.get_default()
    elif field.null:
        value = None
    elif field.empty_strings_allowed:  # what Django stores in a text column unset
        value = ""
    else:
        raise ValueError(
            f"{field.model.__name__}.{field.name} has no default: the bench must "
            "give it"
        )
    return field.get_db_prep_save(value, connection)


def insert_select(
    model: type[models.Model],
    columns: Mapping[str, str],
    rest: str,
    params: Sequence[Any] = (),
) -> int:
    """``INSERT INTO <model's table> (…) SELECT <columns>, <defaults> <rest>``: the
    given column expressions (by column name; their ``%s`` take the first ``params``),
    every other concrete column but the primary key from ``default_of``, then
    ``rest`` (FROM, WHERE…; its ``%s`` take the remaining ``params``). Returns the
    rows inserted."""
    fields = [
        f
        for f in model._meta.concrete_fields
        if not f.primary_key and f.column not in columns
    ]
    unknown = set(columns) - {f.column for f in model._meta.concrete_fields}
    if unknown:
        raise ValueError(f"{model.__name__} has no column {sorted(unknown)}")
    given = list(columns.values())
    taken = sum(expression.replace("%%", "").count("%s") for expression in given)
    names = [*columns, *(f.column for f in fields)]
    expressions = [*given, *("%s" for _ in fields)]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} "
        f"({', '.join(quote(n) for n in names)}) "
        f"SELECT {', '.join(expressions)} {rest}"
    )
    values = [*params[:taken], *(default_of(f) for f in fields), *params[taken:]]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        return cursor.rowcount

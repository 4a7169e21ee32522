"""Statements built by the ORM but run by hand: for a service that writes several rows in one statement."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models.sql import InsertQuery


def insert_sql(obj: Any) -> tuple[str, list]:
    """The ORM's own ``INSERT`` of the unsaved ``obj`` (without its id), unrun: defaults, refs (``RefField``) and
    ``auto_now``/``auto_now_add`` are filled in on ``obj`` exactly as ``save`` would. Append ``RETURNING id`` to
    learn the id; set it on ``obj`` with ``saved``."""
    model = type(obj)
    fields = [f for f in model._meta.local_concrete_fields if not f.primary_key and not f.generated]
    query = InsertQuery(model)
    query.insert_values(fields, [obj])
    ((sql, params),) = query.get_compiler(connection=connection).as_sql()
    return sql, list(params)


def saved(obj: Any, pk: int) -> Any:
    """``obj`` as ``save`` leaves it once the statement that inserted it returned its id."""
    obj.pk = pk
    obj._state.adding, obj._state.db = False, connection.alias
    return obj

"""Statements built by the ORM but run by hand: for a service that writes several rows in one statement."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models.sql import InsertQuery

from .switch import enabled

#: Per model, the ORM's INSERT text of one row whose every value is a plain parameter (no expression, no field
#: placeholder of its own): the text does not change between rows, only the values do.
_PLAIN_INSERTS: dict[type, str] = {}


def insert_sql(obj: Any) -> tuple[str, list]:
    """The ORM's own ``INSERT`` of the unsaved ``obj`` (without its id), unrun: defaults, refs (``RefField``) and
    ``auto_now``/``auto_now_add`` are filled in on ``obj`` exactly as ``save`` would. Append ``RETURNING id`` to
    learn the id; set it on ``obj`` with ``saved``.

    The text is compiled once per model (the compiler was a twentieth of the storm's worker CPU: a hold and an
    offer a dispatch); the values go through the same ``pre_save`` and ``get_db_prep_save`` as the compiler's."""
    model = type(obj)
    fields = [f for f in model._meta.local_concrete_fields if not f.primary_key and not f.generated]
    text = _PLAIN_INSERTS.get(model) if enabled() else None
    if text is not None:
        values = [f.get_db_prep_save(f.pre_save(obj, add=True), connection=connection) for f in fields]
        if not any(hasattr(v, "resolve_expression") for v in values):
            return text, values
    query = InsertQuery(model)
    query.insert_values(fields, [obj])
    ((sql, params),) = query.get_compiler(connection=connection).as_sql()
    if sql.endswith(f"VALUES ({', '.join(['%s'] * len(fields))})") and len(params) == len(fields):
        _PLAIN_INSERTS[model] = sql  # every value a bare placeholder: no expression, no field placeholder
    return sql, list(params)


def saved(obj: Any, pk: int) -> Any:
    """``obj`` as ``save`` leaves it once the statement that inserted it returned its id."""
    obj.pk = pk
    obj._state.adding, obj._state.db = False, connection.alias
    return obj

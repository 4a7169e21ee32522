"""Keyset-paged clinic lists: the query every list endpoint accepts, its schema, and the page body."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from ..bounds import SEARCH_DAY_MESSAGE, is_searchable_day


class ListQuery(serializers.Serializer):
    """Query of a keyset-paged clinic list: ``status`` (one of the model's), ``date`` (a local day in the
    clinic's zone), ``after`` (the ``next`` ref of the previous page) and ``limit`` (1–200, default 50)."""

    status = serializers.CharField(required=False, max_length=12)
    date = serializers.DateField(required=False)
    after = serializers.CharField(required=False, max_length=40, default="")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)

    def validate_date(self, value):
        if not is_searchable_day(value):
            raise serializers.ValidationError(SEARCH_DAY_MESSAGE)
        return value

    def validate_status(self, value):
        choices = self.context["status_choices"]
        if value not in choices:
            raise serializers.ValidationError(f"One of {', '.join(choices)}.")
        return value


#: A date or date-time whose year is 1900–2999 (``common.bounds`` SEARCH_*): JSON Schema has no date range.
YEARS_1900_2999 = "^(19|2[0-9])[0-9]{2}-"


def list_parameters(status_choices) -> list[OpenApiParameter]:
    """The list query as the server enforces it (``ListQuery``), so a schema-valid query is accepted."""
    return [
        OpenApiParameter("status", str, enum=list(status_choices), description="only rows in this status"),
        OpenApiParameter(
            "date", {"type": "string", "format": "date", "pattern": YEARS_1900_2999},
            description="a local day in the clinic's zone, 1900-01-01 … 2999-12-31",
        ),
        OpenApiParameter("after", {"type": "string", "maxLength": 40},
                         description="the `next` ref of the previous page"),
        OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
                         description="1–200, default 50"),
    ]


def page_body(page, shape) -> dict:
    """A keyset page: ``{items, next}``; ``next`` is the ``after`` of the following page or null."""
    return {"items": [shape(row) for row in page.items], "next": page.next}

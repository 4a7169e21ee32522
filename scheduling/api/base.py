"""The secure-by-default base for clinic-scoped API views: auth, scope, role, errors, idempotency."""

from __future__ import annotations

from collections.abc import Callable

from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions, serializers
from rest_framework.permissions import SAFE_METHODS
from rest_framework.views import APIView

from common.api import field_errors, idempotent_response
from common.bounds import SEARCH_DAY_MESSAGE, is_searchable_day
from common.errors import ValidationFailed
from common.tokens import require_fresh_admin_token

from ..models import Role
from ..scoping import clinic_for_user


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


class ClinicAPIView(APIView):
    """Resolves ``self.clinic`` from the ``clinic`` URL kwarg before any handler runs.

    A clinic outside the caller's scope is a 404 exactly like a missing one; a clinic in scope
    with too low a role is a 403. Subclasses set ``required_role``.
    """

    required_role: Role = Role.STAFF

    def clinic_ref(self, request, kwargs) -> str | None:
        """Where the clinic ref comes from: the URL (the ops views take it from the query or the body)."""
        return kwargs.get("clinic")

    def role_for(self, request) -> Role:
        """The role this request needs (``required_role``, read from ``scoping.COMMAND_ROLES`` by commands)."""
        return self.required_role

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # A method the view has no handler for is a 405 before the role is looked up (PUT, PATCH, DELETE or
        # TRACE on a GET-only view used to reach ``role_for`` and fail there: a KeyError, a 500).
        method = request.method.lower()
        if method not in self.http_method_names or not hasattr(self, method):
            raise exceptions.MethodNotAllowed(request.method)
        role = self.role_for(request)
        # An ADMIN write is an ADMIN command: it needs the operate grant and a token young enough.
        command = role == Role.ADMIN and request.method not in SAFE_METHODS
        self.clinic = clinic_for_user(request.user, self.clinic_ref(request, kwargs), role=role, operate=command)
        if command:
            require_fresh_admin_token(request.auth)

    def get_serializer_context(self) -> dict:
        return {"clinic": self.clinic, "request": self.request, "view": self}

    def validated(self, serializer_class: type[serializers.Serializer]) -> dict:
        """Validate the body; failures are a typed VALIDATION_ERROR (stored like any other answer)."""
        serializer = serializer_class(data=self.request.data, context=self.get_serializer_context())
        if not serializer.is_valid():
            raise ValidationFailed("The request is not valid.", fields=field_errors(serializer.errors))
        return serializer.validated_data

    def list_query(self, status_choices) -> dict:
        """The validated ``ListQuery`` of a keyset-paged list (400 ``VALIDATION_ERROR`` otherwise)."""
        serializer = ListQuery(data=self.request.query_params, context={"status_choices": list(status_choices)})
        if not serializer.is_valid():
            raise ValidationFailed("The query is not valid.", fields=field_errors(serializer.errors))
        return serializer.validated_data

    def command(
        self, name: str, execute: Callable[[str | None], tuple[int, dict]], *, refusals_write_nothing: bool = False
    ):
        """Run a (I) command: stored per (clinic, user, Idempotency-Key) and replayed byte for byte."""
        return idempotent_response(
            self.request, scope=f"{self.clinic.ref}:{self.request.user.pk}", command=name, execute=execute,
            refusals_write_nothing=refusals_write_nothing,
        )


class ClinicRefField(serializers.Field):
    """A ref to an object of ``model`` inside the request's clinic; foreign and missing look alike."""

    default_error_messages = {"not_found": "Not found in this clinic.", "invalid": "Must be a ref string."}

    def __init__(self, model, **kwargs):
        self.model = model
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str) or not 0 < len(data) <= 40 or "\x00" in data:
            self.fail("invalid")
        obj = self.model.objects.filter(clinic=self.context["clinic"], ref=data).first()
        if obj is None:
            self.fail("not_found")
        return obj

    def to_representation(self, value):
        return value.ref

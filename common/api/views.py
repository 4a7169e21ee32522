"""The secure-by-default base for clinic-scoped API views: auth, scope, role, errors, idempotency.

The gate that resolves a clinic for a user is the scheduling app's (clinics and their grants are its
models); the ground floor does not import apps, so scheduling registers it at ``ready()``
(``scope_gate_register(scheduling.scoping.clinic_for_user)``).
Roles are compared by value (``"STAFF"``, ``"ADMIN"``: ``scheduling.models.Role``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from rest_framework import exceptions, serializers
from rest_framework.permissions import SAFE_METHODS
from rest_framework.views import APIView

from ..dbloss import mark_replayable
from ..errors import ValidationFailed
from ..idempotency import request_digest, run_idempotent, validate_key
from ..tokens import require_fresh_admin_token
from .errors import field_errors
from .lists import ListQuery

STAFF = "STAFF"
ADMIN = "ADMIN"


def _no_gate(user, clinic_ref, *, role, operate):
    raise RuntimeError("no clinic scope gate registered (scheduling's AppConfig.ready() registers it)")


#: The one gate (``gate(user, clinic_ref, *, role, operate)``): fails closed until scheduling registers it.
_GATE: list[Callable[..., Any]] = [_no_gate]


def scope_gate_register(gate: Callable[..., Any]) -> None:
    _GATE[0] = gate


def scope_clinic(user, clinic_ref: str | None, *, role: str, operate: bool) -> Any:
    """The clinic ``clinic_ref`` names if ``user`` may act there with ``role`` (the registered gate):
    404 outside the user's scope, exactly like a missing clinic; 403 for too low a role."""
    return _GATE[0](user, clinic_ref, role=role, operate=operate)


def idempotent_response(
    request,
    *,
    scope: str,
    command: str,
    execute: Callable[[str | None], tuple[int, dict]],
    refusals_write_nothing: bool = False,
) -> HttpResponse:
    """Run a command under the request's Idempotency-Key and answer with the stored bytes
    (``refusals_write_nothing``: see ``run_idempotent``)."""
    key = validate_key(request.headers.get("Idempotency-Key"))
    if key is not None:
        mark_replayable(request)  # a broken connection replays it once (common/dbloss.py)
    digest = request_digest(request.method, request.path, request.data)
    stored = run_idempotent(
        scope=scope, key=key, command=command, digest=digest, execute=execute,
        refusals_write_nothing=refusals_write_nothing,
    )
    response = HttpResponse(stored.body, status=stored.status_code, content_type="application/json")
    if stored.replayed:
        response["Idempotent-Replayed"] = "true"
    return response


class ClinicAPIView(APIView):
    """Resolves ``self.clinic`` from the ``clinic`` URL kwarg before any handler runs.

    A clinic outside the caller's scope is a 404 exactly like a missing one; a clinic in scope
    with too low a role is a 403. Subclasses set ``required_role``.
    """

    required_role: str = STAFF

    def clinic_ref(self, request, kwargs) -> str | None:
        """Where the clinic ref comes from: the URL (the ops views take it from the query or the body)."""
        return kwargs.get("clinic")

    def role_for(self, request) -> str:
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
        command = role == ADMIN and request.method not in SAFE_METHODS
        self.clinic = scope_clinic(request.user, self.clinic_ref(request, kwargs), role=role, operate=command)
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

"""Thin FHIR views: FHIR content negotiation, every error an ``OperationOutcome``, scope as every clinic API
(out of scope = 404). Reads: any STAFF member or the clinic's integration credential; writes: only the
integration credential (object permission ``scheduling.fhir_integration``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponse
from django.utils.http import http_date
from drf_spectacular.utils import extend_schema
from fhir.resources.R4B.appointment import Appointment as FhirAppointment
from fhir.resources.R4B.subscription import Subscription as FhirSubscription
from pydantic import ValidationError
from rest_framework import exceptions as drf
from rest_framework.permissions import SAFE_METHODS
from rest_framework.renderers import BaseRenderer
from rest_framework.views import APIView

from common.api import exception_handler as api_exception_handler
from common.errors import DomainError, NotFound, PermissionDenied, ValidationFailed
from scheduling.scoping import clinic_for_grant, clinic_for_user

from . import capability, fhir, outcome, services
from .models import FHIR_INTEGRATION_PERMISSION, Subscription
from .search import prefers_strict
from .services import subscriptions

FHIR_JSON = "application/fhir+json"
#: Media ranges (Accept) and ``_format`` values that mean FHIR JSON.
JSON_TYPES = frozenset({FHIR_JSON, "application/json", "application/json+fhir", "application/*", "*/*"})
JSON_FORMATS = frozenset({"json", FHIR_JSON, "application/json", "application/json+fhir"})


class FhirRenderer(BaseRenderer):
    media_type = FHIR_JSON
    format = "json"
    charset = None

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        if hasattr(data, "model_dump_json"):
            return data.model_dump_json(exclude_none=True).encode()
        return json.dumps(data).encode()


def _accepts_json(request) -> bool:
    fmt = request.query_params.get("_format")
    if fmt is not None:
        return fmt.strip().lower() in JSON_FORMATS
    accept = request.headers.get("Accept", "").strip()
    if not accept:
        return True
    return any(part.split(";")[0].strip().lower() in JSON_TYPES for part in accept.split(","))


def fhir_exception_handler(exc, context):
    """The API's typed refusal, rendered as an OperationOutcome with the same status and headers."""
    response = api_exception_handler(exc, context)
    if response is None:
        return None
    response.data = outcome.from_error(response.status_code, response.data)
    return response


def integration_clinic(user, clinic_ref):
    """The clinic whose integration credential ``user`` is; a member without it 403, anyone else 404."""
    try:
        return clinic_for_grant(user, clinic_ref, codename=FHIR_INTEGRATION_PERMISSION)
    except PermissionDenied:
        raise PermissionDenied("This needs the clinic's FHIR integration credential.") from None


def fhir_response(resource, *, status: int = 200, etag: bool = False) -> HttpResponse:
    response = HttpResponse(resource.model_dump_json(exclude_none=True), content_type=FHIR_JSON, status=status)
    meta = getattr(resource, "meta", None)
    if etag and meta is not None and meta.versionId:
        response["ETag"] = f'W/"{meta.versionId}"'
        if isinstance(meta.lastUpdated, datetime):
            response["Last-Modified"] = http_date(meta.lastUpdated.timestamp())
    return response


@extend_schema(exclude=True)
class FhirView(APIView):
    """The base of every FHIR route: negotiation first (a 406 before any auth), then the clinic.

    Not in the OpenAPI schema: its errors are OperationOutcomes, not the API's ``Error``, and FHIR clients
    read this server's contract from ``metadata`` (docs/fhir.md is its prose).

    Writes need the integration credential; reads take a STAFF member or that credential.
    """

    renderer_classes = [FhirRenderer]

    def perform_content_negotiation(self, request, force=False):
        renderer = FhirRenderer()
        if not force and not _accepts_json(request):
            raise drf.NotAcceptable("This server answers FHIR JSON only (application/fhir+json, _format=json).")
        return renderer, renderer.media_type

    def get_exception_handler(self):
        return fhir_exception_handler

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method.lower() not in self.http_method_names or not hasattr(self, request.method.lower()):
            raise drf.MethodNotAllowed(request.method)  # before the clinic: a 405, not the write's 403
        self.clinic = self.resolve_clinic(request, kwargs.get("clinic"))

    def resolve_clinic(self, request, clinic_ref):
        if request.method not in SAFE_METHODS:
            return integration_clinic(request.user, clinic_ref)
        try:
            return clinic_for_user(request.user, clinic_ref)
        except NotFound:
            return integration_clinic(request.user, clinic_ref)

    def base_url(self) -> str:
        return self.request.build_absolute_uri(f"/api/v1/clinics/{self.clinic.ref}/fhir/")


def _version(resource) -> str:
    """A resource's ``meta.versionId`` (every resource this server writes has one)."""
    return str(resource.meta.versionId) if resource.meta is not None else ""


class _FhirSearchView(FhirView):
    search: Callable[..., tuple[list, str | None, Any]]

    def get(self, request, clinic):
        strict = prefers_strict(request.headers.get("Prefer", ""))
        resources, cursor, parsed = type(self).search(clinic=self.clinic, params=request.query_params, strict=strict)
        page = request.build_absolute_uri(request.path)
        # The self link names only what was applied (R4: ignored parameters are left out of it).
        used = [*parsed.used, ("_count", str(parsed.count))]
        self_url = f"{page}?{urlencode(used + ([('_after', parsed.after)] if parsed.after else []))}"
        next_url = f"{page}?{urlencode([*used, ('_after', cursor)])}" if cursor else None
        return fhir_response(fhir.bundle(resources, base_url=self.base_url(), self_url=self_url, next_url=next_url,
                                         total=parsed.total))


class SlotSearchView(_FhirSearchView):
    search = staticmethod(fhir.slot_search)


class UnsupportedMediaType(DomainError):
    status_code = 415
    code = "UNSUPPORTED_MEDIA_TYPE"


def fhir_body(request, model):
    """The request's FHIR JSON body as ``model`` (validated by fhir.resources) or a typed 400/415. The
    diagnostics name the failing elements, never the values sent."""
    media = request.content_type.split(";")[0].strip().lower()
    if media not in (FHIR_JSON, "application/json"):
        raise UnsupportedMediaType("Send application/fhir+json.")
    try:
        return model.model_validate_json(request.body)
    except ValidationError as exc:
        where = sorted({".".join(str(p) for p in error["loc"]) or "body" for error in exc.errors()})[:10]
        raise ValidationFailed(f"Not a valid FHIR {model.__name__}.", fields={w: ["invalid"] for w in where}) \
            from None


def if_match(request) -> str | None:
    """The version an ``If-Match: W/"3"`` names (or None)."""
    raw = request.headers.get("If-Match")
    if raw is None:
        return None
    return raw.strip().removeprefix("W/").strip('"')


class AppointmentSearchView(_FhirSearchView):
    """Also the EHR's conditional update: ``PUT Appointment?identifier=system|value`` (integration only)."""

    search = staticmethod(fhir.appointment_search)

    def put(self, request, clinic):
        identifiers = request.query_params.getlist("identifier")
        if len(identifiers) != 1 or set(request.query_params) - {"identifier", "_format"}:
            raise ValidationFailed("A conditional update takes one identifier=system|value.",
                                   fields={"identifier": ["required"]})
        system, bar, value = identifiers[0].partition("|")
        if not bar:
            system, value = "", system
        resource = fhir_body(request, FhirAppointment)
        appointment, created = services.ehr_appointment_put(
            clinic=self.clinic, actor=request.user, system=system, value=value, resource=resource,
            if_match=if_match(request))
        answer = fhir.appointment_read(clinic=self.clinic, resource_id=fhir.fhir_id(appointment.ref))
        response = fhir_response(answer, status=201 if created else 200, etag=True)
        if created:
            response["Location"] = f"{self.base_url()}Appointment/{answer.id}/_history/{_version(answer)}"
        return response


class ScheduleSearchView(_FhirSearchView):
    search = staticmethod(fhir.schedule_search)


def _read_view(name: str, read):
    class ReadView(FhirView):
        def get(self, request, clinic, resource_id):
            return fhir_response(read(clinic=self.clinic, resource_id=resource_id), etag=True)

    ReadView.__name__ = ReadView.__qualname__ = f"{name}ReadView"
    return ReadView


SlotReadView = _read_view("Slot", fhir.slot_read)
AppointmentReadView = _read_view("Appointment", fhir.appointment_read)
ScheduleReadView = _read_view("Schedule", fhir.schedule_read)


class _IntegrationOnly(FhirView):
    """Subscriptions belong to the integration credential: reads too (a STAFF member gets 403)."""

    def resolve_clinic(self, request, clinic_ref):
        return integration_clinic(request.user, clinic_ref)


class SubscriptionView(_IntegrationOnly):
    """``POST [base]/Subscription`` (create: rest-hook) and ``GET`` (the clinic's subscriptions)."""

    def post(self, request, clinic):
        resource = fhir_body(request, FhirSubscription)
        created = subscriptions.subscription_create(clinic=self.clinic, owner=request.user, resource=resource)
        answer = subscriptions.to_fhir(created, with_secret=True)
        response = fhir_response(answer, status=201, etag=True)
        response["Location"] = f"{self.base_url()}Subscription/{answer.id}/_history/{_version(answer)}"
        return response

    def get(self, request, clinic):
        rows = Subscription.objects.filter(clinic=self.clinic).order_by("ref")[:200]
        found = [subscriptions.to_fhir(row) for row in rows]
        return fhir_response(fhir.bundle(found, base_url=self.base_url(), self_url=request.build_absolute_uri(),
                                         next_url=None))


class SubscriptionReadView(_IntegrationOnly):
    def get(self, request, clinic, resource_id):
        found = subscriptions.subscription_get(clinic=self.clinic, resource_id=resource_id)
        return fhir_response(subscriptions.to_fhir(found), etag=True)

    def delete(self, request, clinic, resource_id):
        subscriptions.subscription_delete(clinic=self.clinic, actor=request.user, resource_id=resource_id)
        return HttpResponse(status=204)


class MetadataView(FhirView):
    """``[base]/metadata``: what this server does, as a CapabilityStatement."""

    def get(self, request, clinic):
        return fhir_response(capability.statement(base_url=self.base_url(), clinic=self.clinic))


class UnknownView(FhirView):
    """Anything else under a FHIR base: a 404 OperationOutcome (an unknown type is ``not-supported``)."""

    def get(self, request, clinic, rest):
        raise NotFound(f"There is no {rest.split('/')[0][:40]} here: this server has Slot, Appointment, "
                       "Schedule and Subscription.")

    put = post = delete = patch = get

"""Thin read-only FHIR views: scope as every clinic API (out of scope = 404), FHIR JSON out."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view

from scheduling.api.base import YEARS_1900_2999, ClinicAPIView

from . import fhir

FHIR_JSON = "application/fhir+json"
SEARCH_PARAMETERS = [
    OpenApiParameter("start", {"type": "string", "format": "date-time", "pattern": YEARS_1900_2999},
                     description="ISO 8601 with offset, years 1900–2999; default now"),
    OpenApiParameter("end", {"type": "string", "format": "date-time", "pattern": YEARS_1900_2999},
                     description="default start + 7 days; after start and at most 31 days after it"),
    OpenApiParameter("_count", {"type": "integer", "minimum": 1, "maximum": 200, "default": 50},
                     description="1–200, default 50"),
    OpenApiParameter("_after", str, description="cursor from the Bundle's next link"),
]


def _fhir(resource) -> HttpResponse:
    return HttpResponse(resource.model_dump_json(exclude_none=True), content_type=FHIR_JSON)


class _FhirSearchView(ClinicAPIView):
    search = None
    resource_type = ""

    def get(self, request, clinic):
        params = fhir.search_params(request.query_params)
        resources, cursor = type(self).search(clinic=self.clinic, search=params)
        base = request.build_absolute_uri(f"/api/v1/clinics/{self.clinic.ref}/fhir/")
        page = request.build_absolute_uri(request.path)
        kept = {k: v for k, v in request.query_params.items() if k in ("start", "end", "_count")}
        next_url = f"{page}?{urlencode({**kept, '_after': cursor})}" if cursor else None
        return _fhir(fhir.bundle(resources, base_url=base, self_url=request.build_absolute_uri(), next_url=next_url))


@extend_schema_view(get=extend_schema(operation_id="fhir_slot_search", parameters=SEARCH_PARAMETERS,
                                       responses={200: OpenApiResponse(description="FHIR Bundle of Slot")}))
class SlotSearchView(_FhirSearchView):
    search = staticmethod(fhir.slot_search)


@extend_schema_view(get=extend_schema(operation_id="fhir_appointment_search", parameters=SEARCH_PARAMETERS,
                                       responses={200: OpenApiResponse(description="FHIR Bundle of Appointment")}))
class AppointmentSearchView(_FhirSearchView):
    search = staticmethod(fhir.appointment_search)


class SlotReadView(ClinicAPIView):
    @extend_schema(operation_id="fhir_slot_read", responses={200: OpenApiResponse(description="FHIR Slot")})
    def get(self, request, clinic, resource_id):
        return _fhir(fhir.slot_read(clinic=self.clinic, resource_id=resource_id))


class AppointmentReadView(ClinicAPIView):
    @extend_schema(operation_id="fhir_appointment_read",
                   responses={200: OpenApiResponse(description="FHIR Appointment")})
    def get(self, request, clinic, resource_id):
        return _fhir(fhir.appointment_read(clinic=self.clinic, resource_id=resource_id))

"""Thin DRF views for reference data, patients and appointments (API.md)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

from django.conf import settings
from django.utils.module_loading import import_string
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api import ClinicAPIView, list_parameters, page_body

from .. import selectors, services
from ..models import (
    AppointmentStatus,
    CancelActor,
    ConsentSource,
    Patient,
    Practitioner,
    Resource,
    Treatment,
    cancel_actor_ref,
)
from ..scoping import clinics_for_user, scoped_get
from .serializers import (
    AppointmentCreateInput,
    CancelInput,
    ConsentInput,
    PatientCreateInput,
    appointment_body,
    reference_body,
)


class ClinicListView(APIView):
    @extend_schema(responses={200: OpenApiResponse(description="The caller's clinics")})
    def get(self, request):
        clinics = clinics_for_user(request.user).order_by("pk")
        return Response(
            [
                {"ref": c.ref, "name": c.name, "tenant_group": c.tenant_group.ref, "timezone": c.timezone}
                for c in clinics
            ]
        )


class _ReferenceListView(ClinicAPIView):
    model: ClassVar[type[Practitioner | Treatment | Resource]]

    @extend_schema(responses={200: OpenApiResponse(description="ref, name")})
    def get(self, request, clinic):
        rows = self.model.objects.filter(clinic=self.clinic).order_by("pk")[:1000]
        return Response([reference_body(row) for row in rows])


class PractitionerListView(_ReferenceListView):
    model = Practitioner


class TreatmentListView(_ReferenceListView):
    model = Treatment


class ResourceListView(_ReferenceListView):
    model = Resource


class PatientCreateView(ClinicAPIView):
    @extend_schema(request=PatientCreateInput, responses={201: OpenApiResponse(description="{ref}")})
    def post(self, request, clinic):
        def execute(_receipt):
            data = self.validated(PatientCreateInput)
            patient = services.patient_create(clinic=self.clinic, actor_label=request.user.get_username(), **data)
            return 201, {"ref": patient.ref}

        return self.command("patient_create", execute)


class AppointmentCreateView(ClinicAPIView):
    @extend_schema(
        parameters=list_parameters(AppointmentStatus.values),
        responses={200: OpenApiResponse(description="{items: [appointment], next}")},
    )
    def get(self, request, clinic):
        query = self.list_query(AppointmentStatus.values)
        page = selectors.appointment_page(
            clinic=self.clinic, limit=query["limit"], after=query["after"], status=query.get("status"),
            day=query.get("date"),
        )
        return Response(page_body(page, appointment_body))

    @extend_schema(
        request=AppointmentCreateInput, responses={201: OpenApiResponse(description="appointment")}
    )
    def post(self, request, clinic):
        def execute(_receipt):
            data = self.validated(AppointmentCreateInput)
            appointment = services.appointment_book(clinic=self.clinic, **data)
            return 201, appointment_body(selectors.appointment_detail(clinic=self.clinic, ref=appointment.ref))

        return self.command("appointment_book", execute)


@functools.cache
def _cancel_command() -> Callable[..., tuple[Any, Any]]:
    return import_string(settings.APPOINTMENT_CANCEL_COMMAND)


class AppointmentCancelView(ClinicAPIView):
    """Cancel; a CONFIRMED appointment far enough ahead opens a vacancy (dispatched after commit). The
    appointment records why (``reason_code``, ``reason``) and who (``api:<username>`` for a token,
    ``staff:<username>`` for a session).

    The vacancy is the waitlist's, opened in the cancel's own transaction by the command
    ``settings.APPOINTMENT_CANCEL_COMMAND`` names (``waitlist.services.appointment_cancel_with_vacancy``):
    scheduling stands below the waitlist, so it names that command instead of importing it."""

    @extend_schema(
        request=CancelInput,
        responses={200: OpenApiResponse(description="{status, version, vacancy, reason_code, cancelled_by}")},
    )
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(CancelInput)
            kind = CancelActor.API if request.auth is not None else CancelActor.STAFF
            appointment, vacancy = _cancel_command()(
                clinic=self.clinic,
                appointment_ref=ref,
                reason=data["reason"],
                expected_version=data.get("expected_version"),
                reason_code=data["reason_code"],
                cancelled_by=cancel_actor_ref(kind, request.user),
                actor=request.user,
                idempotency_key=request.headers.get("Idempotency-Key") or "",
            )
            return 200, {
                "status": appointment.status,
                "version": appointment.version,
                "vacancy": vacancy.ref if vacancy else None,
                "reason_code": appointment.cancel_reason_code,
                "cancelled_by": appointment.cancelled_by,
            }

        # Every refusal of the cancel (and of its body) comes before its first write.
        return self.command("appointment_cancel", execute, refusals_write_nothing=True)


class AppointmentDetailView(ClinicAPIView):
    @extend_schema(responses={200: OpenApiResponse(description="appointment")})
    def get(self, request, clinic, ref):
        return Response(appointment_body(selectors.appointment_detail(clinic=self.clinic, ref=ref)))


class PatientConsentView(ClinicAPIView):
    """A patient's contact consent: the current state per channel and the newest history rows (states, sources and
    times only, never contact data). POST records a change (source API, actor = the caller); a channel the patient
    opted out of themselves is granted again only as PATIENT_CONSENT with evidence (else 409 CONSENT_OPTED_OUT)."""

    @extend_schema(responses={200: OpenApiResponse(description="{patient, current, history}")})
    def get(self, request, clinic, ref):
        return Response(selectors.consent_view(patient=scoped_get(Patient, self.clinic, ref)))

    @extend_schema(request=ConsentInput, responses={200: OpenApiResponse(description="{patient, current, history}")})
    def post(self, request, clinic, ref):
        def execute(_receipt):
            patient = scoped_get(Patient, self.clinic, ref)
            data = self.validated(ConsentInput)
            services.consent_record(patient=patient, channels=data["channels"], state=data["state"],
                                    source=data.get("source") or ConsentSource.API, evidence=data.get("evidence", ""),
                                    actor_label=request.user.get_username())
            return 200, selectors.consent_view(patient=patient)

        return self.command("consent_record", execute)

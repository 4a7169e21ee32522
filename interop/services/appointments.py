"""Interop commands: the EHR's conditional update of an Appointment, and the integration credential.

The EHR writes through the same services as the API (``scheduling``'s appointment commands, and
``waitlist``'s cancellation, so a CONFIRMED appointment's cancellation opens a vacancy and queues
dispatch): the same exclusion constraints, the same CAS, the same state machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from guardian.shortcuts import assign_perm

from common.errors import Conflict, DomainError, Unprocessable, ValidationFailed
from common.services import audit_record
from scheduling.models import (
    Appointment,
    AppointmentStatus,
    CancelActor,
    CancelReason,
    Clinic,
    Patient,
    Practitioner,
    Resource,
    Treatment,
    cancel_actor_ref,
)
from scheduling.services import appointment_book, appointment_move, appointment_set_status
from waitlist.services import appointment_cancel_with_vacancy

from .. import queries
from ..fhir import TREATMENT_SYSTEM, ref_of
from ..models import FHIR_INTEGRATION_PERMISSION, AppointmentIdentifier

PATIENT_SYSTEM = "urn:clinic-waitlist:patient"
#: FHIR status → ours, for what the EHR may send.
INBOUND_STATUS = {
    "proposed": AppointmentStatus.PROPOSED,
    "pending": AppointmentStatus.HELD,
    "booked": AppointmentStatus.CONFIRMED,
    "cancelled": AppointmentStatus.CANCELLED,
}
EHR_CANCEL_REASON = CancelReason.EHR_CANCELLED.value


class PreconditionFailed(DomainError):
    """``If-Match`` names a version that is not the current one, or the identifier matches several."""

    status_code = 412
    code = "PRECONDITION_FAILED"


def clinic_grant_fhir_integration(*, clinic: Clinic, user, granted_by=None) -> None:
    """Make ``user`` the clinic's EHR integration credential (FHIR writes and subscriptions; no STAFF
    role). Audited: who granted it, to whom."""
    with transaction.atomic():
        # Made here too, not only by migration 0002: a test database flush keeps only Meta permissions.
        Permission.objects.get_or_create(
            content_type=ContentType.objects.get_for_model(Clinic), codename=FHIR_INTEGRATION_PERMISSION,
            defaults={"name": "Writes FHIR appointments and subscriptions (EHR integration)"})
        assign_perm(f"scheduling.{FHIR_INTEGRATION_PERMISSION}", user, clinic)
        audit_record(actor=granted_by, action="fhir_integration_grant", clinic=clinic,
                     target_ref=f"user:{user.pk}", system_label="manage")


@dataclass(frozen=True)
class Wanted:
    """What the EHR's Appointment asks for, resolved inside the clinic."""

    status: str
    patient: Patient
    practitioner: Practitioner
    treatment: Treatment
    resource: Resource | None
    starts_at: datetime


def _participant(resource, kind: str) -> str | None:
    """The id of the ``kind`` participant (``Kind/id``, or for a patient our identifier)."""
    for participant in resource.participant or []:
        actor = participant.actor
        if actor is None:
            continue
        reference = actor.reference or ""
        if reference.startswith(f"{kind}/"):
            return reference.split("/", 1)[1]
        identifier = actor.identifier
        if kind == "Patient" and identifier is not None and identifier.system == PATIENT_SYSTEM:
            return identifier.value
    return None


def _in_clinic(model, clinic: Clinic, resource_id: str | None, name: str):
    if not resource_id:
        raise Unprocessable(f"The appointment needs a {name} participant.", fields={name: ["required"]})
    found = model.objects.filter(clinic=clinic, ref=ref_of(resource_id)).first()
    if found is None:
        raise Unprocessable(f"{name} {resource_id} is not known in this clinic.", fields={name: ["not found"]})
    return found


def wanted_from(clinic: Clinic, resource) -> Wanted:
    """Resolve the EHR's Appointment to our rows; a reference outside the clinic is like a missing one."""
    if resource.status not in INBOUND_STATUS:
        raise Unprocessable(f"status {resource.status} is not accepted here (proposed, pending, booked, "
                            "cancelled).", fields={"status": ["not supported"]})
    codes = [c.code for t in resource.serviceType or [] for c in t.coding or [] if c.system == TREATMENT_SYSTEM]
    treatment = _in_clinic(Treatment, clinic, codes[0] if codes else None, "serviceType")
    if resource.start is None:
        raise Unprocessable("The appointment needs a start.", fields={"start": ["required"]})
    starts_at = resource.start
    if resource.end is not None and resource.end - starts_at != timedelta(minutes=treatment.duration_minutes):
        raise Unprocessable(f"end must be start + {treatment.duration_minutes} minutes (the treatment's length).",
                            fields={"end": ["length"]})
    location = _participant(resource, "Location")
    return Wanted(
        status=INBOUND_STATUS[resource.status],
        patient=_in_clinic(Patient, clinic, _participant(resource, "Patient"), "Patient"),
        practitioner=_in_clinic(Practitioner, clinic, _participant(resource, "Practitioner"), "Practitioner"),
        treatment=treatment,
        resource=_in_clinic(Resource, clinic, location, "Location") if location else None,
        starts_at=starts_at,
    )


def _serialize(clinic: Clinic, system: str, value: str) -> None:
    """Two PUTs of one identifier take turns (a transaction-scoped advisory lock on its hash), so the second
    sees what the first created and updates it instead of booking a duplicate."""
    queries.identifier_lock(f"{clinic.pk}|{system}|{value}")


def _matches(clinic: Clinic, system: str, value: str) -> list[AppointmentIdentifier]:
    found = AppointmentIdentifier.objects.filter(clinic=clinic, value=value).select_related("appointment")
    return list(found.filter(system=system) if system else found[:2])


def ehr_appointment_put(*, clinic: Clinic, actor, system: str, value: str, resource,
                        if_match: str | None = None) -> tuple[Appointment, bool]:
    """``PUT Appointment?identifier=system|value``: create (True) when nothing has the identifier, else move
    the appointment to what the EHR sent (False). The same resource again changes nothing; a stale
    ``If-Match`` is a 412; an overlap is SLOT_OCCUPIED (409), exactly as through the API."""
    if not value or len(system) > 200 or len(value) > 200:
        raise ValidationFailed("identifier: give system|value.", fields={"identifier": ["invalid"]})
    wanted = wanted_from(clinic, resource)
    with transaction.atomic():
        _serialize(clinic, system, value)
        matches = _matches(clinic, system, value)
        if len(matches) > 1:
            raise PreconditionFailed("The identifier matches more than one appointment; give its system.")
        if not matches:
            if if_match:
                raise PreconditionFailed("If-Match names a version, but nothing has this identifier.")
            if not system:
                raise ValidationFailed("identifier: a new appointment needs system|value.",
                                       fields={"identifier": ["system required"]})
            appointment, created = _create(clinic, system, value, wanted), True
        else:
            appointment, created = _update(clinic, matches[0].appointment, wanted, if_match, actor), False
        audit_record(actor=actor, action="fhir_appointment_put", clinic=clinic, target_ref=appointment.ref,
                     result={"created": created, "status": appointment.status, "version": appointment.version})
        return appointment, created


def _create(clinic: Clinic, system: str, value: str, wanted: Wanted) -> Appointment:
    if wanted.status == AppointmentStatus.CANCELLED:
        raise Unprocessable("There is no appointment with this identifier to cancel.",
                            fields={"status": ["nothing to cancel"]})
    appointment = appointment_book(clinic=clinic, patient=wanted.patient, practitioner=wanted.practitioner,
                                   treatment=wanted.treatment, starts_at=wanted.starts_at, status=wanted.status,
                                   resource=wanted.resource)
    AppointmentIdentifier.objects.create(clinic=clinic, appointment=appointment, system=system, value=value)
    return appointment


def _update(clinic: Clinic, appointment: Appointment, wanted: Wanted, if_match: str | None, actor) -> Appointment:
    if if_match and if_match != str(appointment.version):
        raise PreconditionFailed(f"If-Match {if_match} is stale: the appointment is at version "
                                 f"{appointment.version}.")
    if (appointment.patient_id, appointment.treatment_id) != (wanted.patient.pk, wanted.treatment.pk):
        raise Unprocessable("The patient and the service type of an appointment cannot change.",
                            fields={"participant": ["immutable"]})
    if wanted.status == AppointmentStatus.CANCELLED:
        if appointment.status == AppointmentStatus.CANCELLED:
            return appointment  # sent again: nothing to do
        cancelled, _vacancy = appointment_cancel_with_vacancy(
            clinic=clinic, appointment_ref=appointment.ref, reason=EHR_CANCEL_REASON,
            expected_version=appointment.version, reason_code=CancelReason.EHR_CANCELLED,
            cancelled_by=cancel_actor_ref(CancelActor.INTEGRATION, actor), actor=actor)
        return cancelled
    if appointment.status == AppointmentStatus.CANCELLED:
        raise Conflict("A cancelled appointment cannot be booked again: send a new identifier.",
                       code="APPOINTMENT_TRANSITION_INVALID")
    moved = (appointment.starts_at, appointment.practitioner_id, appointment.resource_id) != (
        wanted.starts_at, wanted.practitioner.pk, wanted.resource.pk if wanted.resource else None)
    if moved:
        appointment = appointment_move(clinic=clinic, appointment_ref=appointment.ref, starts_at=wanted.starts_at,
                                       practitioner=wanted.practitioner, resource=wanted.resource,
                                       keep_resource=False, expected_version=appointment.version)
    if appointment.status != wanted.status:
        appointment = appointment_set_status(clinic=clinic, appointment_ref=appointment.ref, target=wanted.status,
                                             expected_version=appointment.version)
    return appointment

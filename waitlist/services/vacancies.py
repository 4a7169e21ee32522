"""Opening a vacancy when a CONFIRMED appointment is cancelled, and dispatching it to one candidate."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from common.errors import NotFound
from common.services import new_correlation_id
from scheduling import services as scheduling
from scheduling.models import Appointment, AppointmentStatus, Clinic
from scheduling.services.features import feature_enabled

from ..models import Vacancy
from ._shared import actor_label, queue_dispatch
from .policy import policy_current
from .promotion import RESTART, DispatchResult, offer_next, settled

logger = logging.getLogger("waitlist")


def appointment_cancel_with_vacancy(
    *,
    clinic: Clinic,
    appointment_ref: str,
    reason: str,
    expected_version: int | None = None,
    now: datetime | None = None,
) -> tuple[Appointment, Vacancy | None]:
    """Cancel an appointment and, if it was CONFIRMED and starts at least the policy's lead time
    from now, open a vacancy for its slot (the cancelling patient excluded) in the same
    transaction; dispatch is queued for after the commit."""
    now = now or timezone.now()
    with transaction.atomic():
        appointment = scheduling.appointment_cancel(
            clinic=clinic, appointment_ref=appointment_ref, reason=reason, expected_version=expected_version
        )
        if appointment.previous_status != AppointmentStatus.CONFIRMED:
            return appointment, None
        policy = policy_current(clinic=clinic)
        if appointment.starts_at - now < timedelta(minutes=policy.min_lead_minutes):
            return appointment, None
        vacancy = Vacancy.objects.create(
            vacancy_key=f"appointment:{appointment.ref}",
            clinic=clinic,
            tenant_group_id=clinic.tenant_group_id,
            practitioner_id=appointment.practitioner_id,
            treatment_id=appointment.treatment_id,
            resource_id=appointment.resource_id,
            starts_at=appointment.starts_at,
            ends_at=appointment.ends_at,
            excluded_patient_id=appointment.patient_id,
            source_appointment=appointment,
        )
        logger.info("vacancy %s opened from %s", vacancy.ref, appointment.ref)
        queue_dispatch(vacancy.pk)
        return appointment, vacancy


def vacancy_dispatch(
    *,
    clinic: Clinic,
    vacancy_ref: str,
    actor=None,
    now: datetime | None = None,
    correlation_id: str = "",
) -> DispatchResult:
    """Offer the vacancy (a ref, scoped to ``clinic``: a foreign one is NotFound) to the best eligible
    candidate; see ``dispatch``."""
    ref = vacancy_ref if isinstance(vacancy_ref, str) else ""
    return _dispatch(_VACANCY.filter(clinic=clinic, ref=ref).first(), actor=actor, now=now,
                     correlation_id=correlation_id)


def vacancy_dispatch_by_id(
    *,
    vacancy_id: int,
    actor=None,
    now: datetime | None = None,
    correlation_id: str = "",
) -> DispatchResult:
    """Offer the vacancy to the best eligible candidate: at most one active offer ever results.

    Safe to run from many workers at once: candidates are read without locks, and promotion
    re-validates under the vacancy fence; a worker that finds an offer committed by another
    answers ALREADY_OFFERED and writes nothing. The id comes from inside the domain (a task, reconcile);
    a caller holding a ref uses ``vacancy_dispatch``, which scopes it to the clinic.
    """
    return _dispatch(_VACANCY.filter(pk=vacancy_id).first(), actor=actor, now=now, correlation_id=correlation_id)


_VACANCY = Vacancy.objects.select_related("clinic", "resource")


def _dispatch(vacancy: Vacancy | None, *, actor, now: datetime | None, correlation_id: str) -> DispatchResult:
    if vacancy is None:
        raise NotFound()
    now = now or timezone.now()
    correlation_id = correlation_id or new_correlation_id()
    label = actor_label(actor, "dispatch")
    for _round in range(3):
        early = settled(vacancy, now)
        if early is not None:
            return early
        # Flag off (globally, tenant outside the allowlist, or this clinic): no new offer and so no new
        # notification. Closing a started vacancy above still runs; re-enabling dispatches again and
        # the partial unique index keeps it to one active offer.
        if not feature_enabled("waitlist", vacancy.clinic):
            return DispatchResult("DISABLED")
        result = offer_next(vacancy, now=now, actor_label=label, correlation_id=correlation_id)
        if result.outcome != RESTART:
            return result
        vacancy.refresh_from_db()  # the policy or a decision changed while matching: match again
    return DispatchResult("NO_CANDIDATE")

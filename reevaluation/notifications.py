"""Delivery of ``reevaluation.job_completed`` outbox rows: the handler registered in ``ReevaluationConfig.ready``.

The row carries refs and counts only (job, revision, mode, outcome counts, policy). At send time the
handler loads the job's applied changes (PROPOSAL_SUPERSEDED, HOLD_REPLACED, FALLBACK_TO_PROPOSED)
and tells the patient what changed, through ``common.notify.send_patient_notice`` (consent is
checked here first, then the clinic's quiet hours and contact cap; the contact is read only there).
Staff see the same changes, with this row's delivery state, on the console (``selectors.recent_changes``).

Outcomes: no applied change (dry run, kept holds, needs-staff proposals) → ``DeliverySkipped
("NO_PATIENT_CHANGE")``; job or patient gone → ``DeliverySkipped``; provider failure → retried.
The notice names the clinic, treatment and times in the clinic's zone: never the assessment. It ends, like
every notice, with the patient's opt-out link (``waitlist.notifications.optout_line``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from zoneinfo import ZoneInfo

from django.utils import formats, timezone, translation
from django.utils.translation import gettext as _

from common.models import OutboxMessage
from common.notify import send_patient_notice
from common.outbox import DeliverySkipped
from scheduling.models import Appointment
from scheduling.services.consent import consent_granted, provider_channels
from waitlist.notifications import optout_line
from waitlist.reachability import send_window
from waitlist.services.policy import policy_current
from waitlist.tokens import optout_link

from .models import CHANGE_OUTCOMES, Outcome, ReevaluationJob

LANGUAGES = ("en", "ko")


def _when(value, tz_name: str) -> str:
    return formats.date_format(timezone.localtime(value, ZoneInfo(tz_name)), "DATETIME_FORMAT")


def change_lines(changes: Sequence[Mapping[str, Any]], appointments: dict[str, Appointment], tz_name: str) -> list[str]:
    """One sentence per change, in the active language."""
    lines = []
    for change in changes:
        before = appointments[change["appointment_ref"]]
        after = appointments.get(change["replacement_ref"])
        values = {"treatment": before.treatment.name, "when": _when(before.starts_at, tz_name)}
        if change["outcome"] == Outcome.PROPOSAL_SUPERSEDED and after is not None:
            values["new_treatment"] = after.treatment.name
            lines.append(_("Your proposed %(treatment)s on %(when)s was replaced by a new proposal: "
                           "%(new_treatment)s at the same time.") % values)
        elif change["outcome"] == Outcome.HOLD_REPLACED:
            lines.append(_("The %(treatment)s time held for you on %(when)s was replaced by another "
                           "held time at the same start.") % values)
        else:
            lines.append(_("The %(treatment)s time held for you on %(when)s is no longer reserved; it "
                           "stays a proposal and the clinic will contact you.") % values)
    return lines


def deliver_job_completed(message: OutboxMessage) -> str:
    """The outbox handler for ``reevaluation.job_completed``; returns the provider name."""
    job = (
        ReevaluationJob.objects.select_related("clinic")
        .filter(ref=message.aggregate_ref, clinic__ref=message.clinic_ref)
        .first()
    )
    if job is None:
        raise DeliverySkipped("JOB_MISSING")
    changes = list(
        job.outcomes.filter(applied=True, outcome__in=CHANGE_OUTCOMES)
        .order_by("pk")
        .values("appointment_ref", "outcome", "replacement_ref")
    )
    if not changes:
        raise DeliverySkipped("NO_PATIENT_CHANGE")
    refs = {c["appointment_ref"] for c in changes} | {c["replacement_ref"] for c in changes if c["replacement_ref"]}
    appointments = {
        a.ref: a
        for a in Appointment.objects.select_related("patient", "treatment").filter(clinic=job.clinic, ref__in=refs)
    }
    if changes[0]["appointment_ref"] not in appointments:
        raise DeliverySkipped("APPOINTMENT_MISSING")
    clinic, patient = job.clinic, appointments[changes[0]["appointment_ref"]].patient
    if not consent_granted(patient.pk, provider_channels(clinic.settings)):
        raise DeliverySkipped("CONSENT_REVOKED")
    with translation.override(patient.language if patient.language in LANGUAGES else "en"):
        subject = _("Your appointment at %(clinic)s changed") % {"clinic": clinic.name}
        body = "\n".join(change_lines(changes, appointments, clinic.timezone)) + "\n"
    body += optout_line(optout_link(patient), patient.language)  # every notice carries the opt-out link
    window = send_window(policy_current(clinic=clinic), clinic)
    return send_patient_notice(message=message, clinic=clinic, patient=patient, window=window,
                               subject=subject, body=body, now=timezone.now())

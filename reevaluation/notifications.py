"""Delivery of ``reevaluation.job_completed`` outbox rows: the handler registered in ``ReevaluationConfig.ready``.

The row carries refs and counts only (job, revision, mode, outcome counts, policy). At send time the
handler loads the job's applied changes (PROPOSAL_SUPERSEDED, HOLD_REPLACED, FALLBACK_TO_PROPOSED)
and tells the patient what changed, through ``common.notify.send_patient_notice`` (consent is
checked here first, then the clinic's quiet hours and contact cap; the contact is read only there).
Staff see the same changes, with this row's delivery state, on the console (``selectors.recent_changes``).

Outcomes: no applied change (dry run, kept holds, needs-staff proposals) → ``DeliverySkipped
("NO_PATIENT_CHANGE")``; job or patient gone → ``DeliverySkipped``; provider failure → retried.
The notice names the clinic, treatment and times in the clinic's zone: never the assessment. It ends, like
every notice, with the patient's opt-out link (``waitlist.notices.offer_notice.optout_line``).
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
from reevaluation.models import CHANGE_OUTCOMES, Outcome, ReevaluationJob
from reevaluation.proposals.models import ANSWERABLE_STATES, AppointmentProposal
from reevaluation.proposals.tokens import proposal_link
from scheduling.models import Appointment
from scheduling.services.consent import consent_granted, provider_channels
from waitlist.notices.offer_notice import optout_line
from waitlist.offers.tokens import optout_link
from waitlist.policy.services import policy_current
from waitlist.rules.reachability import send_window

LANGUAGES = ("en", "ko")


def _shown(row) -> str:
    """A clinic's or treatment's name in the active language (the patient's: ``DisplayNamed.name_in``)."""
    return row.name_in(translation.get_language())


def _when(value, tz_name: str) -> str:
    return formats.date_format(timezone.localtime(value, ZoneInfo(tz_name)), "DATETIME_FORMAT")


def change_lines(changes: Sequence[Mapping[str, Any]], appointments: dict[str, Appointment], tz_name: str) -> list[str]:
    """One sentence per change, in the active language."""
    lines = []
    for change in changes:
        before = appointments[change["appointment_ref"]]
        after = appointments.get(change["replacement_ref"])
        values = {"treatment": _shown(before.treatment), "when": _when(before.starts_at, tz_name)}
        if change["outcome"] == Outcome.PROPOSAL_SUPERSEDED and after is not None:
            values["new_treatment"] = _shown(after.treatment)
            lines.append(_("Your proposed %(treatment)s on %(when)s was replaced by a new proposal: "
                           "%(new_treatment)s at the same time.") % values)
        elif change["outcome"] == Outcome.HOLD_REPLACED:
            lines.append(_("The %(treatment)s time held for you on %(when)s was replaced by another "
                           "held time at the same start.") % values)
        else:
            lines.append(_("The %(treatment)s time held for you on %(when)s is no longer reserved; it "
                           "stays a proposal and the clinic will contact you.") % values)
    return lines


def proposal_lines(proposals, appointments: dict[str, Appointment], tz_name: str) -> list[str]:
    """Per proposal: why, and the link to its page (the times themselves are on the page)."""
    lines = []
    for proposal in proposals:
        current = appointments.get(proposal.appointment_ref)
        values = {
            "treatment": _shown(current.treatment) if current else "",
            "when": _when(current.starts_at, tz_name) if current else "",
            "until": _when(proposal.expires_at, tz_name),
            "link": proposal_link(proposal),
        }
        if proposal.needs_operator:
            text = _("Your confirmed %(treatment)s on %(when)s no longer fits what your care needs. It stays "
                     "booked unless you choose another time and the clinic confirms it. Choose a time, keep "
                     "your appointment, or ask us to call you (until %(until)s):\n%(link)s")
        else:
            text = _("We are holding a time that fits for you. Accept it, keep your current proposal, or ask us "
                     "to call you (until %(until)s):\n%(link)s")
        lines.append(text % values)
    return lines


def deliver_proposal_applied(message: OutboxMessage) -> str:
    """The outbox handler for ``reevaluation.proposal_applied``: the patient's new time, after their choice
    (and, for a confirmed appointment, the clinic's confirmation)."""
    payload = message.payload or {}
    proposal = (
        AppointmentProposal.objects.select_related("clinic", "patient")
        .filter(ref=payload.get("proposal") or message.aggregate_ref, clinic__ref=message.clinic_ref).first()
    )
    if proposal is None:
        raise DeliverySkipped("PROPOSAL_MISSING")
    new = Appointment.objects.select_related("treatment").filter(
        clinic=proposal.clinic, ref=proposal.result_appointment_ref).first()
    if new is None:
        raise DeliverySkipped("APPOINTMENT_MISSING")
    clinic, patient = proposal.clinic, proposal.patient
    if not consent_granted(patient.pk, provider_channels(clinic.settings)):
        raise DeliverySkipped("CONSENT_REVOKED")
    with translation.override(patient.language if patient.language in LANGUAGES else "en"):
        subject = _("Your new time at %(clinic)s") % {"clinic": _shown(clinic)}
        values = {"treatment": _shown(new.treatment), "when": _when(new.starts_at, clinic.timezone)}
        if new.status == "CONFIRMED":
            body = _("Your %(treatment)s is now confirmed on %(when)s, as you chose.") % values
        else:
            body = _("Your %(treatment)s on %(when)s is held for you, as you chose.") % values
        body += "\n"
    body += optout_line(optout_link(patient), patient.language)
    window = send_window(policy_current(clinic=clinic), clinic)
    return send_patient_notice(message=message, clinic=clinic, patient=patient, window=window,
                               subject=subject, body=body, now=timezone.now())


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
    # Proposals this job made that the patient can still answer (issue 28): each gets its page's link.
    proposals = list(
        AppointmentProposal.objects.select_related("patient").filter(job=job, state__in=ANSWERABLE_STATES)
        .order_by("pk")
    )
    if not changes and not proposals:
        raise DeliverySkipped("NO_PATIENT_CHANGE")
    refs = {c["appointment_ref"] for c in changes} | {c["replacement_ref"] for c in changes if c["replacement_ref"]}
    refs |= {p.appointment_ref for p in proposals}
    appointments = {
        a.ref: a
        for a in Appointment.objects.select_related("patient", "treatment").filter(clinic=job.clinic, ref__in=refs)
    }
    if changes and changes[0]["appointment_ref"] not in appointments:
        raise DeliverySkipped("APPOINTMENT_MISSING")
    clinic = job.clinic
    patient = appointments[changes[0]["appointment_ref"]].patient if changes else proposals[0].patient
    if not consent_granted(patient.pk, provider_channels(clinic.settings)):
        raise DeliverySkipped("CONSENT_REVOKED")
    with translation.override(patient.language if patient.language in LANGUAGES else "en"):
        subject = _("Your appointment at %(clinic)s changed") % {"clinic": _shown(clinic)}
        if not changes:
            subject = _("Please choose a new time at %(clinic)s") % {"clinic": _shown(clinic)}
        lines = change_lines(changes, appointments, clinic.timezone)
        lines += proposal_lines(proposals, appointments, clinic.timezone)
        body = "\n".join(lines) + "\n"
    body += optout_line(optout_link(patient), patient.language)  # every notice carries the opt-out link
    window = send_window(policy_current(clinic=clinic), clinic)
    return send_patient_notice(message=message, clinic=clinic, patient=patient, window=window,
                               subject=subject, body=body, now=timezone.now())

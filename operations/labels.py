"""Plain words for the codes the console shows, and for the policy's fields (with their units).

The codes stay on screen (they are what the API, the logs and the audit rows carry); these labels and
explanations sit beside them so a clinic reads "No candidate" and why, not only ``NO_CANDIDATE``.
"""

from __future__ import annotations

#: code → (label, explanation). Unknown codes are shown as they are.
CODES: dict[str, tuple[str, str]] = {
    # action queue kinds
    "VACANCY_REVIEW": ("Needs review", "Automatic offering stopped: the candidate's booking-reliability decision is "
                       "not fresh. Promote the candidate or skip to the next."),
    "VACANCY_NO_CANDIDATE": ("No candidate", "Nobody on the waiting list can take this slot now. Re-dispatch after "
                             "the reasons change, or fill the slot another way."),
    "VACANCY_WAITING": ("Waiting too long", "Dispatch is held back (quiet hours or contact caps) until too close to "
                        "the slot's start to fill it in time."),
    "BOOKING_STUCK": ("Booking stuck", "The patient accepted but the booking did not complete. Retry the booking."),
    "DELIVERY_DEAD": ("Notice not delivered", "A patient notice (an offer, a booking's confirmation) failed on "
                      "every attempt; the patient may not know."),
    "PROVIDER_FAILING": ("Notices failing", "The clinic's notice provider failed its last attempts and has sent "
                         "nothing since: patients are not being told of offers."),
    "SUBSCRIPTION_ERROR": ("EHR not told", "The EHR's subscription endpoint kept failing, so it was set to error: "
                           "the EHR no longer hears of bookings, cancellations and refilled slots."),
    "OFFER_WITHOUT_HOLD": ("Offer without a hold", "An open offer no longer reserves its slot (found by reconcile)."),
    # why an appointment was cancelled (scheduling.models.CancelReason)
    "PATIENT_REQUEST": ("Patient asked", "The patient asked to cancel."),
    "CLINIC_REQUEST": ("Clinic cancelled", "The clinic cancelled the appointment."),
    "PRACTITIONER_UNAVAILABLE": ("Practitioner unavailable", "The practitioner cannot see the patient then."),
    "RESCHEDULED": ("Rescheduled", "The appointment moved to another time (a new appointment)."),
    "EHR_CANCELLED": ("Cancelled in the EHR", "The clinic's EHR sent the cancellation (FHIR)."),
    "STANDING_RELEASED": ("Released automatic booking", "The patient released a booking made for them "
                          "automatically, within the release time."),
    # outcomes and reasons
    "NO_CANDIDATE": ("No candidate", "Every entry on the waiting list was passed over for this slot."),
    "OFFERED": ("Offered", "An offer was sent to the next candidate."),
    "BOOKED": ("Auto-booked", "Booked at once: the patient had agreed in advance (standing acceptance)."),
    "ALREADY_OFFERED": ("Already offered", "An offer is already out for this slot."),
    "STAFF_REVIEW": ("Staff review", "A person must decide before the slot is offered."),
    "WAITING": ("Waiting", "Nobody is reachable now; dispatch resumes by itself."),
    "CLOSED": ("Closed", "The vacancy is no longer open (filled, started or cancelled)."),
    "DISABLED": ("Waitlist off", "The waitlist is switched off for this clinic."),
    "QUIET_HOURS": ("Quiet hours", "No offer is made or sent during the clinic's quiet hours."),
    "CONTACT_CAP": ("Contact limit reached", "The patient already got the most notices allowed per day."),
    "ENTRY_LOCKED": ("Busy elsewhere", "Another dispatch was working on this entry at the same moment."),
    "DECISION_STALE": ("Decision out of date", "The booking-reliability decision is older than allowed."),
    "DECISION_UNAVAILABLE": ("No decision", "No booking-reliability decision is available for the patient."),
    "DECISION_FRESH": ("Decision fresh", "The booking-reliability decision is current."),
    "NO_CONTACT_CONSENT": ("No consent to contact", "The patient has not agreed to be contacted on any channel."),
    "PATIENT_OVERLAP": ("Already booked then", "The patient has another appointment at that time."),
    "NOT_BOOKED": ("Not booked yet", "The booking has not been made."),
    "BOOKING_RETRY_FAILED": ("Retry failed", "The last booking retry was refused."),
    "OPTED_OUT": ("Opted out", "The patient asked to get no more offers."),
    "DECISION_FEED_SILENT": ("Decision feed silent", "No waiting patient got a decision in 24 h while the decision "
                             "gate is required."),
    "SMTP_UNAVAILABLE": ("Mail server unavailable", "The mail server could not be reached on any attempt."),
    "DEAD": ("Undeliverable", "Every delivery attempt failed."),
    "CONNECT_ERROR": ("Endpoint unreachable", "The subscriber's endpoint could not be reached."),
    "WEBHOOK_TIMEOUT": ("Gateway timed out", "The messaging gateway did not answer in time."),
    "WEBHOOK_UNAVAILABLE": ("Gateway unavailable", "The messaging gateway could not be reached or answered 5xx."),
    "WEBHOOK_REJECTED": ("Gateway refused", "The messaging gateway refused the notice (4xx): check its settings."),
    "NO_CONTACT": ("No contact details", "The patient has no phone or email for this channel."),
    # fairness pass-over families
    "PRIORITY": ("Lower priority", "Someone with a higher priority came first."),
    "STAFF_SKIPPED": ("Skipped by staff", "Staff chose the next candidate in a review."),
    "DECLINE_SUPPRESSION": ("Paused after a decline", "The patient declined a similar offer recently."),
    "WEEKLY_CAP": ("Weekly offer limit", "The patient already got the most offers allowed in 7 days."),
    "OTHER": ("Other", "Any other reason."),
    "MATCHED": ("Matched", "Chosen as the best eligible candidate."),
    "EXPIRED": ("Expired", "The answer time ran out."),
    "DECLINED": ("Declined", "The patient said no."),
    "WITHDRAWN": ("Withdrawn", "Staff or the system took the offer back."),
    "ACCEPTED": ("Accepted", "The patient said yes; the booking follows."),
    "FRESH": ("Fresh", "The booking-reliability decision is current."),
    "STALE": ("Out of date", "The booking-reliability decision is older than allowed."),
    "UNAVAILABLE": ("Unavailable", "No booking-reliability decision could be read."),
    # reevaluation: failure classes and codes, outcomes, priority families
    "TRANSIENT": ("Temporary", "Timeouts, unavailable services, lost leases: safe to run again."),
    "CONTRACT": ("CRM contract", "The CRM answered outside the contract: investigate with the CRM first."),
    "TRUST_PRIVACY": ("Trust or privacy", "A trust or privacy boundary was hit: handle as an incident first."),
    "ASSESSMENT_TIMEOUT": ("Assessment timed out", "The assessment service did not answer in time."),
    "ASSESSMENT_UNAVAILABLE": ("Assessment unavailable", "The assessment service could not be reached."),
    "ASSESSMENT_HASH_MISMATCH": ("Assessment changed", "The assessment did not match its digest: quarantined."),
    "LEASE_EXPIRED": ("Lease expired", "The worker lost its lease before finishing."),
    "WORKER_ERROR": ("Worker error", "The worker failed unexpectedly."),
    "SIGNATURE_INVALID": ("Signature invalid", "The event's signature did not verify."),
    "PROPOSAL_SUPERSEDED": ("Proposal replaced", "A newer proposal replaced the patient's proposal."),
    "HOLD_KEPT": ("Hold kept", "The held slot still fits."),
    "HOLD_REPLACED": ("Hold replaced", "The held slot was swapped for one that fits."),
    "FALLBACK_TO_PROPOSED": ("Hold dropped, proposed", "No fitting slot could be held: proposed instead."),
    "SKIPPED_INELIGIBLE": ("Skipped: not eligible", "The patient is not eligible for a change."),
    "SKIPPED_UNCHANGED": ("Skipped: unchanged", "Nothing changed for the patient."),
    "PROPOSAL_NEEDS_STAFF": ("Needs staff", "A person must decide on the proposal."),
    "PENDING": ("Pending", "Waiting to run."),
    "RUNNING": ("Running", "A worker is on it."),
    "RETRY_WAIT": ("Waiting to retry", "Failed once; runs again at the next attempt time."),
    "FAILED": ("Failed", "Stopped after its last attempt: needs a person."),
    "COMPLETED": ("Completed", "Finished with its outcomes."),
    # policy choices
    "NEXT_CANDIDATE": ("Next candidate", "Skip to the next candidate."),
    "FRESH_READ": ("Ask again", "Ask the reliability service for a fresh decision first."),
    "REQUIRED": ("Required", "Offer only on a fresh booking-reliability decision."),
    "NOT_USED": ("Not used", "No booking-reliability decision applies."),
    "ON_ACCEPT": ("On accept", "The patient's accept books at once."),
    "BOOKING_COMMAND": ("By booking command", "An accepted offer waits until staff or a system books it."),
    "FIXED": ("Fixed", "The same answer time for every offer."),
    "LEAD_TIME": ("By lead time", "A share of the time left until the slot, between a floor and a ceiling."),
    "SIMILAR": ("Similar offers", "Same practitioner and same part of the day."),
    "ALL": ("All offers", "Every offer to the entry."),
    # job families
    "SLOT_FIT": ("Slot fit", "1 when the entry asked for this practitioner, else 0."),
    "PROPOSED_ONLY": ("Proposal only", "The job only proposes a change; it holds nothing yet."),
    "HELD_PRESENT": ("Hold present", "The job holds a slot that may need to change."),
}


def _http(code: str) -> tuple[str, str] | None:
    """``HTTP_503`` (a subscriber's answer): its own words, not one entry per status."""
    if code.startswith("HTTP_") and code[5:].isdigit():
        return f"Endpoint answered {code[5:]}", "The subscriber's endpoint answered with an error status."
    return None


def code_label(code) -> str:
    return (CODES.get(str(code)) or _http(str(code)) or (str(code), ""))[0]


def code_help(code) -> str:
    return (CODES.get(str(code)) or _http(str(code)) or ("", ""))[1]


#: Action-queue kind → what a person does about a row that has no command in the console.
QUEUE_ACTIONS: dict[str, str] = {
    "PROVIDER_FAILING": "Check the clinic's notice provider (the clinic's notification settings, the gateway's "
                        "status); notices are retried and go out once it works again.",
    "SUBSCRIPTION_ERROR": "Ask the EHR's integrator to fix their endpoint, then delete and create the "
                          "Subscription again (FHIR API); changes made meanwhile are sent once it is active.",
    "DELIVERY_DEAD": "Contact the patient another way if the slot is still theirs; check the provider if many fail.",
}


def queue_action(kind: str) -> str:
    return QUEUE_ACTIONS.get(kind, "")


#: policy field → (label, unit, what it does).
POLICY_FIELDS: dict[str, tuple[str, str, str]] = {
    "hold_minutes": ("Time to answer (fixed)", "minutes",
                     "With a fixed answer window, how long a patient has to accept before the slot goes to the next."),
    "min_lead_minutes": ("Minimum notice", "minutes",
                         "A cancelled slot starting sooner than this is not offered at all."),
    "stale_action": ("When the decision is out of date", "",
                     "What dispatch does with a candidate whose reliability decision is stale."),
    "unavailable_action": ("When there is no decision", "",
                           "What dispatch does with a candidate who has no reliability decision."),
    "page_size": ("Candidates read at a time", "entries", "How many waiting entries dispatch reads per step."),
    "max_candidates": ("Most candidates per dispatch", "entries",
                       "Dispatch stops looking after this many; reconcile tries again later."),
    "max_pages": ("Most steps per dispatch", "steps", "Dispatch stops after this many reads."),
    "time_budget_ms": ("Time budget per dispatch", "milliseconds", "Dispatch stops looking after this long."),
    "decline_suppression_hours": ("Pause after a decline", "hours",
                                  "After a decline the patient gets no similar offer for this long."),
    "decline_suppression_scope": ("What a decline pauses", "",
                                  "Similar offers only (same practitioner, same part of the day) or every offer."),
    "weekly_offer_cap": ("Offers per patient per week", "offers in 7 days",
                         "At most this many offers to one patient in any 7 days; empty means no limit."),
    "decision_gate": ("Booking-reliability decision", "",
                      "Whether an offer needs a fresh decision from the reliability service."),
    "confirmation": ("How an accept becomes a booking", "",
                     "At once on accept, or later by a booking command."),
    "quiet_hours_start": ("Quiet hours from", "clinic time", "From this time no offer is made or sent."),
    "quiet_hours_end": ("Quiet hours until", "clinic time", "Offers resume at this time (may be the next day)."),
    "contact_cap_per_day": ("Notices per patient per day", "notices in 24 h",
                            "A patient who got this many is passed over for now; empty means no limit."),
    "answer_window": ("How answer time is set", "", "Fixed minutes, or a share of the time left until the slot."),
    "answer_window_percent": ("Share of time left to answer", "%",
                              "With answer time by lead time: this share of the time until the slot."),
    "answer_window_min_minutes": ("Shortest answer time", "minutes", "The answer time is never shorter than this."),
    "answer_window_max_minutes": ("Longest answer time", "minutes", "The answer time is never longer than this."),
    "answer_window_margin_minutes": ("Answer ends before the slot", "minutes",
                                     "Every answer time ends at least this long before the slot starts."),
    "standing_acceptance": ("Automatic booking allowed", "yes/no",
                            "Patients may agree in advance; dispatch then books them at once with a release link."),
    "standing_release_minutes": ("Release an automatic booking within", "minutes",
                                 "How long after an automatic booking the patient may still release it."),
}


def policy_label(name: str) -> str:
    return POLICY_FIELDS.get(name, (name.replace("_", " "), "", ""))[0]


def policy_unit(name: str) -> str:
    return POLICY_FIELDS.get(name, ("", "", ""))[1]


def policy_help(name: str) -> str:
    return POLICY_FIELDS.get(name, ("", "", ""))[2]

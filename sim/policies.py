"""The policies compared on the same month. Real ones are product configurations driven through the
services; MODELLED ones (``modelled`` set) are simulated by ``sim.models`` and labelled so."""

from __future__ import annotations

import dataclasses

from .adapter import PolicySpec

# Ours as configured: the product's defaults (hold 20 min, lead 3 h, weekly cap 8, 6 h after a decline (offers
# like the declined one), the whole window for every patient (a short window after unanswered offers is off:
# measured, it cost fills),
# quiet hours 21:00–08:00, 3 notices a day per patient, decision_gate REQUIRED with staff review for a
# patient without a FRESH decision), all published as WaitlistPolicy fields.
# The product's acknowledgement job (issue #39, ``release_unacknowledged``) reminds and then releases an automatic
# booking its patient has not acknowledged, and the slot is refilled: the engine runs the product's job at the times
# it stored. ``OURS_TODAY`` (the name kept) is the product without that job: unacknowledged bookings kept.
OURS = PolicySpec("ours", "Ours (product defaults)", hold_minutes=20, min_lead_minutes=180)
OURS_TODAY = PolicySpec("ours_today", "Ours without the acknowledgement job (unacknowledged bookings kept)",
                        hold_minutes=20, min_lead_minutes=180, months_share=1 / 4, release_unacknowledged=False)
# The same policy without the booking-reliability gate (a clinic with no reliability service).
OURS_GATE_NOT_USED = PolicySpec("ours_gate_not_used", "Ours, decision_gate NOT_USED", hold_minutes=20,
                                min_lead_minutes=180, decision_gate="NOT_USED")
# Ours with the two contact limits that cost fills switched off (no weekly cap, no suppression after a
# decline); quiet hours, the daily contact cap, the priority order and the gate stay: what the defaults cost.
OURS_NO_CAPS = PolicySpec("ours_no_caps", "Ours, no weekly cap or decline suppression", hold_minutes=20,
                          min_lead_minutes=180, weekly_offer_cap=None, decline_suppression_hours=0)
# Features off, one at a time (each runs only where the product has its field: ``run.available``):
# the answer window fixed at 20 minutes to the slot's start, as before LEAD_TIME (no margin) ...
# Feature-off runs take the first quarter of the months (the time budget); each is paired with ours on those.
OURS_FIXED_WINDOW = PolicySpec("ours_fixed_window", "Ours, fixed 20-minute window", hold_minutes=20,
                               min_lead_minutes=180, months_share=1 / 4,
                               extra={"answer_window": "FIXED", "answer_window_margin_minutes": 0})
# ... and the old contact limits: a weekly cap of 3, and a decline holds back every offer for 72 h, not only
# similar ones (the cap's restart after an accept has no switch; a simulated accept books, so it does not matter).
OURS_OLD_LIMITS = PolicySpec("ours_old_limits", "Ours, old contact limits (cap 3 a week, a decline holds back all "
                             "offers 72 h)", hold_minutes=20, min_lead_minutes=180, months_share=1 / 4,
                             weekly_offer_cap=3, decline_suppression_hours=72,
                             extra={"decline_suppression_scope": "ALL"})
# ... and standing acceptance off: nobody is booked automatically, every patient is asked (the policy field
# ``standing_acceptance``; the simulated patients who would opt in are asked like the others).
OURS_NO_STANDING = PolicySpec("ours_no_standing", "Ours, no standing acceptance", hold_minutes=20,
                              min_lead_minutes=180, months_share=1 / 4, standing_acceptance=False)
# The short window for patients whose recent offers went unanswered, on (off in ours: the product's default since
# make simulate measured it costing fills; ``python -m sim.diagnose --policy ours_unanswered_window`` runs it).
OURS_UNANSWERED_WINDOW = PolicySpec("ours_unanswered_window", "Ours, 30-minute window after 2 unanswered offers",
                                    hold_minutes=20, min_lead_minutes=180, months_share=1 / 4,
                                    extra={"answer_window_unanswered_after": 2,
                                           "answer_window_unanswered_minutes": 30})
# ... and the patients who leave their offers unanswered kept in their place (not asked last) ...
OURS_NO_ASK_LAST = PolicySpec("ours_no_ask_last", "Ours, patients who do not answer kept in their place",
                              hold_minutes=20, min_lead_minutes=180, months_share=1 / 4,
                              extra={"unanswered_ask_last_after": None})
# ... and a yes after the window refused even while the time is still free (no late accept).
OURS_NO_LATE_ACCEPT = PolicySpec("ours_no_late_accept", "Ours, no late accept", hold_minutes=20,
                                 min_lead_minutes=180, months_share=1 / 4, extra={"late_accept": False})
# The peer's FIFO cascade (seeds/peer-waitlist-service.ts.txt) as a configuration of our services:
# created-at order (no priority, no practitioner preference, no availability: its entries are "any time", and a
# patient offered a time they cannot come declines), 20-minute hold, 3-hour lead, accept books
# at once, no weekly cap, no decline suppression, no quiet hours, no daily contact cap, no reliability gate.
# Its window stays the peer's fixed 20 minutes (to the slot's start, no margin); it has no standing acceptance and
# refuses a yes after the window (the peer's expired offer cannot be claimed).
FIFO = PolicySpec("fifo", "Peer FIFO cascade", hold_minutes=20, min_lead_minutes=180, weekly_offer_cap=None,
                  decline_suppression_hours=0, quiet_hours=False, contact_cap_per_day=0, decision_gate="NOT_USED",
                  use_priority=False, use_practitioner=False, use_availability=False, standing_acceptance=False,
                  extra={"answer_window": "FIXED", "answer_window_margin_minutes": 0,
                         "answer_window_unanswered_minutes": None, "unanswered_ask_last_after": None,
                         "late_accept": False})
# The same FIFO cascade with ours' quiet hours (nothing else changed): the gap quiet hours alone make.
FIFO_QUIET = dataclasses.replace(FIFO, name="fifo_quiet", label="Peer FIFO cascade with quiet hours",
                                 quiet_hours=True)
# The modelled competitors (sim.models) run under ours' margin, quiet hours and lead, with standing acceptance,
# late replies and the same release of unacknowledged automatic bookings as ours.
BROADCAST = PolicySpec("broadcast", "First-to-reply broadcast (modelled)", min_lead_minutes=180,
                       modelled="broadcast")
TIERED = PolicySpec("tiered", "Tiered broadcast (modelled)", min_lead_minutes=180, modelled="tiered",
                    extra={"tier_size": 3, "tier_all_hours": 3})
BATCH3 = TIERED  # the former name
MODELLED_RULES = OURS
COMPETITORS = ["fifo", "fifo_quiet", "broadcast", "tiered"]

# Run by default, every one on all the held-out months; ``OURS_TODAY`` and the feature-off runs of issue #22 (on
# the first quarter of the months) are in ``ALL_POLICIES``.
POLICIES = [OURS, FIFO, FIFO_QUIET, BROADCAST, TIERED]
ALL_POLICIES = [*POLICIES, OURS_TODAY, OURS_FIXED_WINDOW, OURS_OLD_LIMITS, OURS_NO_STANDING, OURS_NO_ASK_LAST,
                OURS_NO_LATE_ACCEPT, OURS_UNANSWERED_WINDOW, OURS_NO_CAPS, OURS_GATE_NOT_USED]


def sweep_specs() -> list[PolicySpec]:
    """LEAD_TIME settings around the product's defaults (10%, 20–480 min, 60 min margin), one axis at a time:
    ``python -m sim.run --sweep`` runs them on the first months and docs/simulation.md shows them beside ours."""
    variants = [(5, 480, 60), (25, 480, 60), (10, 240, 60), (10, 720, 60), (10, 480, 30)]
    return [PolicySpec(f"sweep_p{p}_max{m}_margin{g}", f"LEAD_TIME {p}%, max {m // 60} h, margin {g} min",
                       hold_minutes=20, min_lead_minutes=180,
                       extra={"answer_window": "LEAD_TIME", "answer_window_percent": p,
                              "answer_window_max_minutes": m, "answer_window_margin_minutes": g})
            for p, m, g in variants]


# A month of ours is replayed with this candidate in SHADOW beside it (docs/simulation.md "Shadow policy"):
# the contact limits off, so the page shows whom the limits change.
DEFAULT_SHADOW = {"weekly_offer_cap": None, "decline_suppression_hours": 0}


"""Can an offer made now reach its patient now? The one reachability check in the dispatch path.

Dispatch makes an offer only to a candidate it can reach at once: an offer whose notice waits
overnight would run its answer window unseen and spend the candidate's chance. A candidate who cannot
be reached is passed over *for now* (a ``DispatchNote``): no offer row, so it keeps its place, its
weekly cap and its chance at the vacancy. Reads only; no locks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from common.notify import SendWindow, send_window_now
from waitlist.models import WaitlistPolicy


@dataclass(frozen=True)
class Unreachable:
    """Why nobody (``patient_ref`` empty) or one patient cannot be contacted now, and until when."""

    reason: str  # QUIET_HOURS, CONTACT_CAP (part 6 adds the consent reason)
    until: datetime | None


def send_window(policy: WaitlistPolicy, clinic) -> SendWindow:
    """The policy's contact rules in the form ``common.notify`` checks them."""
    return SendWindow(
        tz_name=clinic.timezone,
        quiet_start=policy.quiet_hours_start,
        quiet_end=policy.quiet_hours_end,
        cap_per_day=policy.contact_cap_per_day,
    )


def reach_now(*, policy: WaitlistPolicy, clinic, now: datetime, patient_ref: str = "",
              sent: list[datetime] | None = None) -> tuple[Unreachable | None, dict]:
    """Whether a notice sent now would go out now (None) or why not, with the contact cap's statement parameters
    (``common.notify.contact_cap_params``) for promotion's entry lock, which reads the patient's recent sends.

    Without ``patient_ref``: the clinic-wide check only (quiet hours), asked once before matching
    (``dispatch.context``). With it: quiet hours, then the patient's own rules (the offer's terms,
    ``terms.offer_terms``). A per-patient consent check belongs here, between the two, so dispatch and delivery
    keep one definition. ``sent``: the patient's recent sends read with another statement (common's SQL function
    ``cw_recent_sends``; promotion reads them with the entry's lock), instead of a query here."""
    now_ = send_window_now(send_window(policy, clinic), recipient_ref=patient_ref, now=now, sent=sent)
    unreachable = None if now_.block is None else Unreachable(reason=now_.block[0], until=now_.block[1])
    return unreachable, now_.cap_params

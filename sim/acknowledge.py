"""What becomes of an automatic ("standing acceptance") booking: acknowledged, released, or left unread.

A booking counts as attended only once its patient has acknowledged it: they read its notice and would have said
yes (``Month.answer_at``; a patient who never reads never acknowledges). One who would have said no releases it
before its ``release_until`` if they read it in time.

The product's acknowledgement job (issue #39, ``waitlist.texts.services.acknowledgement``) reminds a booking still
unacknowledged at its ``remind_at`` (the "you are booked" notice again) and releases it at its ``release_at``
(``standing_release``, reason UNACKNOWLEDGED), both times by the product's ``ack_times`` (at the policy's defaults,
``ack_remind_*``, which every simulated policy keeps). The real
runs (``sim.engine``) run that job itself at each booking's stored times and record the patient's acknowledgement
through the product's ``acknowledgement_record``; the product decides. The modelled competitors (``sim.models``)
have no database: ``outcome`` gives their booking the fate the product's job would, from the same ``ack_times``
(``PolicySpec.release_unacknowledged``: with the job; without it, an unread booking is kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .generator import Booking, Month


@dataclass(frozen=True)
class Outcome:
    case: str  # ACCEPTED (acknowledged), RELEASED (by the patient), RELEASED_UNACKNOWLEDGED, UNREAD, LATE_DECLINE
    release_at: datetime | None  # when the release happens (patient or product)
    acknowledged_at: datetime | None
    reminder_at: datetime | None  # the reminder the product's job sends (a message), if it sends one


def ack_times(booked_at: datetime, starts_at: datetime, release_until: datetime | None
              ) -> tuple[datetime, datetime] | None:
    """``(remind_at, release_at)`` by the product's own rule (None without a release deadline: nothing to
    release, as ``acknowledgement_expect`` records none)."""
    if release_until is None:
        return None
    from waitlist.texts.services.acknowledgement import ack_times as product_ack_times

    return product_ack_times(booked_at=booked_at, starts_at=starts_at, release_until=release_until)


def outcome(month: Month, entry_key: str, booking: Booking, booked_at: datetime, sent_at: datetime,
            release_until: datetime | None, release_unacknowledged: bool) -> Outcome:
    """The fate of a booking made at ``booked_at`` whose notice reached the patient at ``sent_at`` (the modelled
    competitors' path; the real runs let the product decide). The job releases at ``release_at`` unless the
    patient acted before; it reminds at ``remind_at`` (sent when quiet hours allow) if they had not acted by then."""
    from .models import next_send_time

    reply = month.reply(entry_key, booking)
    acts = month.answer_at(sent_at, reply) if reply.kind != "NONE" else None
    times = ack_times(booked_at, booking.starts_at, release_until) if release_unacknowledged else None
    release_at = times[1] if times else None
    reminder = None
    if times is not None and times[0] < times[1] and (acts is None or acts > times[0]):
        reminder = next_send_time(times[0], month)
    if acts is not None and (release_at is None or acts < release_at):
        if reply.kind == "ACCEPT":
            if acts < booking.starts_at:
                return Outcome("ACCEPTED", None, acts, reminder)
            return Outcome("UNREAD", None, None, reminder)
        if release_until is not None and acts < release_until:
            return Outcome("RELEASED", acts, None, reminder)
        return Outcome("LATE_DECLINE", None, None, reminder)
    if release_at is not None:
        return Outcome("RELEASED_UNACKNOWLEDGED", release_at, None, reminder)
    return Outcome("UNREAD", None, None, reminder)

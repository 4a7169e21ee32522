"""Where every parameter of ``generator.Params`` comes from, and the sensitivity corners built on them.

Each parameter is a scenario setting (what month is simulated), a policy setting (the product's own defaults),
sourced (a published figure: /work/shared/design/SIMULATION-FACTS.md or the source named) or an assumption with
a low and a high value. Assumptions are grouped by what they describe (``GROUPS``); a corner moves one group to
its low or high values, all else central. The pessimistic corner moves every group to the side whose one-at-a-time
corner gave ours the smaller lead over the best competitor (measured, so the corner is as unkind as the data say).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .generator import Params


@dataclass(frozen=True)
class Row:
    kind: str  # SCENARIO, POLICY, SOURCED, ASSUMPTION
    source: str  # the figure it rests on, or why it is assumed
    low: Any = None
    high: Any = None
    group: str = ""  # the assumption group a corner moves together


FACTS = "SIMULATION-FACTS.md"
PARAMETERS: dict[str, Row] = {
    "days": Row("SCENARIO", "a 28-day clinic month"),
    "practitioners": Row("SCENARIO", "one practitioner at the default scale"),
    "timezone": Row("SCENARIO", "the clinic's zone"),
    "open_hour": Row("SCENARIO", "clinic day 09:00-18:00, weekdays"),
    "close_hour": Row("SCENARIO", "clinic day 09:00-18:00, weekdays"),
    "slot_minutes": Row("SCENARIO", "30-minute visits"),
    "booked_share": Row("ASSUMPTION", "a busy clinic books most slots ahead", 0.75, 0.95, "list"),
    "booking_lead_mean_days": Row("SOURCED", f"4-12 week booking horizons (MDM Policy & Practice 2024; {FACTS})"),
    "booking_lead_max_days": Row("SOURCED", f"12-week horizon (MDM Policy & Practice 2024; {FACTS})"),
    "cancel_base": Row("SOURCED", f"VHA clinics: 19% cancelled at 1 month of lead, 50% by 12 (J Ambul Care Manage "
                                  f"2008; {FACTS}): base + slope at 1 month = 0.19"),
    "cancel_per_month": Row("SOURCED", "VHA 2008 (above): the slope of cancellation with lead"),
    "cancel_max": Row("SOURCED", "VHA 2008 (above): 50% at 12 months"),
    "same_day_share": Row("SOURCED", f"late cancellations about half of all (neurology 2024; {FACTS}); the split "
                                     "same day / night before is assumed"),
    "overnight_share": Row("ASSUMPTION", "the night-before part of the late half (neurology 2024 gives only the half)",
                           0.10, 0.35, "cancel_timing"),
    "backlog_per_practitioner": Row("ASSUMPTION", "waiting list at the month's start", 8, 24, "list"),
    "arrivals_per_practitioner_day": Row("ASSUMPTION", "new entries a day", 0.5, 1.5, "list"),
    "backlog_max_wait_days": Row("ASSUMPTION", "how long the backlog has waited", 60.0, 180.0, "list"),
    "named_share": Row("ASSUMPTION", "entries naming one practitioner", 0.2, 0.6, "fit"),
    "window_min_days": Row("ASSUMPTION", "shortest availability window", 1.0, 7.0, "fit"),
    "window_max_days": Row("ASSUMPTION", "longest availability window", 10.0, 35.0, "fit"),
    "band_weights": Row("ASSUMPTION", "priority bands routine / soon / urgent", (0.9, 0.08, 0.02), (0.6, 0.3, 0.1),
                        "fit"),
    "current_after_window_days": Row("ASSUMPTION", "distance of the current appointment: days sooner only, no "
                                                   "effect on fill (not cornered)", 7.0, 28.0),
    "opt_out_share": Row("ASSUMPTION", "opt-outs during the month (opt-out is standard; no published rate)", 0.02,
                         0.10, "upkeep"),
    "availability_any_share": Row("ASSUMPTION", "patients who tick \"any time\" in the product's availability "
                                                "field (no published figure; SIMULATION-FACTS.md: offers go only to "
                                                "patients whose stated availability matches)", 0.2, 0.7,
                                  "availability"),
    "availability_day_share": Row("ASSUMPTION", "the others: each clinic weekday named with this chance (at least "
                                                "one)", 0.4, 0.8, "availability"),
    "availability_part_share": Row("ASSUMPTION", "the others: each part of the day (morning, afternoon, evening) "
                                                 "named with this chance (at least one)", 0.4, 0.8, "availability"),
    "sms_share": Row("SOURCED", f"52% prefer SMS (DrDoctor survey, Tech Monitor; {FACTS})"),
    "sms_silent_share": Row("ASSUMPTION", "text readers who never read a waitlist notice", 0.1, 0.3, "silent"),
    "email_silent_share": Row("ASSUMPTION", "e-mail readers who never read a waitlist notice", 0.25, 0.55, "silent"),
    "slow_share": Row("ASSUMPTION", "of the patients who read, those replying within hours, not minutes", 0.25, 0.6,
                      "slow"),
    "fast_median_minutes": Row("ASSUMPTION", "median reply of a fast text reader (Prague clinic: about 10 minutes to "
                                             f"answer, {FACTS})", 3.0, 15.0, "delays"),
    "slow_median_minutes": Row("ASSUMPTION", "median reply of a slow reader", 60.0, 300.0, "slow"),
    "email_delay_factor": Row("ASSUMPTION", "an e-mail is read this many times later than a text", 1.0, 4.0, "delays"),
    "reply_sigma": Row("ASSUMPTION", "spread (log) of reply delays", 0.6, 1.2, "delays"),
    "asleep_start": Row("ASSUMPTION", "patients' night: nothing read or sent", "00:00", "22:00", "night"),
    "asleep_end": Row("ASSUMPTION", "patients' night: nothing read or sent", "06:00", "08:00", "night"),
    "accept_share": Row("ASSUMPTION", "a reply is a yes; calibrated so FIFO's acceptance per offer is near Fast "
                                      f"Pass's 11% and Sutter's 8.3% ({FACTS})", 0.25, 0.45, "accept"),
    "decision_unavailable_share": Row("ASSUMPTION", "patients the reliability feed has no decision for", 0.05, 0.3,
                                      "upkeep"),
    "staff_review_minutes": Row("ASSUMPTION", "staff resolve a review this long after it opened", 30.0, 240.0,
                                "upkeep"),
    "standing_share": Row("ASSUMPTION", "entries opting in to automatic booking (no published figure)", 0.1, 0.5,
                          "standing"),
    "standing_notice_minutes": Row("ASSUMPTION", "minimum notices offered: at once, 3 h, a day"),
    "standing_notice_weights": Row("ASSUMPTION", "which minimum notice they pick", (0.6, 0.3, 0.1), (0.2, 0.4, 0.4),
                                   "standing"),
    "no_show_accepted": Row("SOURCED", f"Fast Pass: 5,399 visits of 6,603 accepts, 18% not attended ({FACTS}); "
                                       "Dantas 2018's average no-show is 23%"),
    "no_show_late_decline": Row("ASSUMPTION", "a booking they would have declined, read after its release deadline",
                                0.5, 1.0, "no_show"),
    "quiet_start": Row("POLICY", "the product's default quiet hours"),
    "quiet_end": Row("POLICY", "the product's default quiet hours"),
    "contact_cap_per_day": Row("POLICY", "the product's default daily contact cap"),
}

GROUPS: dict[str, str] = {
    "silent": "patients who never read (both channels)",
    "slow": "slow responders (share and median delay)",
    "accept": "share of replies that are yes",
    "standing": "automatic-booking opt-in",
    "delays": "reply delays (fast median, e-mail factor, spread)",
    "night": "patients' night",
    "cancel_timing": "night-before cancellations",
    "list": "list size, arrivals and clinic load",
    "fit": "window fit (named practitioner, windows, bands)",
    "availability": "stated availability (days and parts of the day)",
    "upkeep": "opt-outs, reliability-feed gaps, staff review",
    "no_show": "no-show of a late-read declined booking",
}
# The pessimistic corner's sides, declared before any run (the machine's time did not allow choosing them from the
# one-at-a-time corners first): every group where asking one patient at a time suffers most against a broadcast
# that keeps the slot open: more patients who never read, slower and later replies, a longer night, fewer yeses,
# more automatic bookings to acknowledge, a shorter list, narrower availability, more opt-outs and feed gaps, more
# night-before cancellations, late-read declined bookings never attended; narrower stated availability (declared
# with the availability group when it was added, before its corners ran). The doc compares them with the measured
# one-at-a-time corners.
PESSIMISTIC = {"silent": "high", "slow": "high", "delays": "high", "night": "high", "accept": "low",
               "standing": "high", "list": "low", "fit": "low", "availability": "low", "upkeep": "high",
               "cancel_timing": "high", "no_show": "high"}
# Groups that change only how a run is scored (the no-show draws), not what happens in it: scored on the central
# runs' logs, no new run.
METRIC_ONLY = {"no_show"}


def check_complete() -> list[str]:
    """Parameters of ``Params`` without a row (the doc's table must cover every one)."""
    return [f.name for f in dataclasses.fields(Params) if f.name not in PARAMETERS]


def corner(params: Params, sides: dict[str, str]) -> Params:
    """``params`` with each named group at its ``low`` or ``high`` values."""
    changes = {name: getattr(row, sides[row.group]) for name, row in PARAMETERS.items()
               if row.group in sides and row.kind == "ASSUMPTION"}
    return dataclasses.replace(params, **changes)


def corner_name(sides: dict[str, str]) -> str:
    if not sides:
        return "central"
    if len(sides) == 1:
        (group, side), = sides.items()
        return f"{group}_{side}"
    return "pessimistic"

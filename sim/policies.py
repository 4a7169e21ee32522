"""The policies compared on the same month. Real ones are product configurations driven through the
services; MODELLED ones (``modelled`` set) are simulated by ``sim.models`` and labelled so."""

from __future__ import annotations

from .adapter import PolicySpec

# Ours as configured: the product's defaults (clinic hold 20 min, lead 3 h; policy weekly cap 3,
# 72 h after a decline; quiet hours 21:00–08:00 and 3 notices a day per patient in clinic settings).
OURS = PolicySpec("ours", "Ours (as configured)", hold_minutes=20, min_lead_minutes=180)
# decision_gate (the loop issue): the same policy with the booking-reliability gate required / not used.
# Only run when the product has the field (adapter.policy_fields drops unknown extras).
OURS_GATE_REQUIRED = PolicySpec("ours_gate_required", "Ours, decision_gate REQUIRED", hold_minutes=20,
                                min_lead_minutes=180, extra={"decision_gate": "REQUIRED"})
OURS_GATE_NOT_USED = PolicySpec("ours_gate_not_used", "Ours, decision_gate NOT_USED", hold_minutes=20,
                                min_lead_minutes=180, extra={"decision_gate": "NOT_USED"})
# The peer's FIFO cascade (seeds/peer-waitlist-service.ts.txt) as a configuration of our services:
# created-at order (no priority, no practitioner preference), 20-minute hold, 3-hour lead, accept books
# at once, no weekly cap, no decline suppression, no quiet hours, no daily contact cap.
FIFO = PolicySpec("fifo", "Peer FIFO cascade", hold_minutes=20, min_lead_minutes=180, weekly_offer_cap=None,
                  decline_suppression_hours=0, quiet_hours=False, contact_cap_per_day=0, use_priority=False,
                  use_practitioner=False)
BROADCAST = PolicySpec("broadcast", "Broadcast (modelled)", min_lead_minutes=180, modelled="broadcast")
BATCH3 = PolicySpec("batch3", "Batches of 3, 7-min hold (modelled)", hold_minutes=7, min_lead_minutes=180,
                    modelled="batch", extra={"batch_size": 3})

POLICIES = [OURS, OURS_GATE_REQUIRED, OURS_GATE_NOT_USED, FIFO, BROADCAST, BATCH3]


def gate_supported() -> bool:
    from waitlist.models import WaitlistPolicy

    return any(f.name == "decision_gate" for f in WaitlistPolicy._meta.get_fields())


def applicable(policies: list[PolicySpec] | None = None) -> list[PolicySpec]:
    """The gate variants only where the product has ``decision_gate`` (else they equal OURS)."""
    policies = policies if policies is not None else POLICIES
    if gate_supported():
        return policies
    return [p for p in policies if "decision_gate" not in p.extra]

"""A dispatch's context, read once before matching (issue 42): ``DispatchContext``.

Who dispatches and in which story (the actor label and the correlation id), whether the waitlist is on for the
clinic (scheduling's flag), the clinic's newest policy, whether the clinic's quiet hours hold now, the
contact cap's statement parameters for the entry lock and the vacancy's slot. The candidate loop
(``promotion.offer_next``), the matcher and promotion under the fence (``offer_write``) take these from the context
instead of each asking ``common``, scheduling and the policy again: read everything first, decide in the rules
(``waitlist.rules``), write once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from common.services import command_actor
from waitlist.effects import SLOT_FIELDS
from waitlist.models import Vacancy, WaitlistPolicy
from waitlist.policy.services import policy_current, policy_for_dispatch
from waitlist.rules.reachability import Unreachable, reach_now


@dataclass(frozen=True)
class DispatchContext:
    """What one dispatch of one vacancy runs on (``dispatch_context``). ``policy`` is None when the waitlist is off
    for the clinic (``enabled`` False) or the policy is not read yet (a late yes is taken up first)."""

    now: datetime
    actor_label: str
    correlation_id: str
    enabled: bool
    policy: WaitlistPolicy | None = None
    #: The clinic's quiet hours now (``rules.reachability``): no offer at all, the vacancy waits.
    quiet: Unreachable | None = None
    #: ``common.notify.contact_cap_params`` for this policy now: the entry lock reads the patient's recent sends.
    cap_params: dict = field(default_factory=dict)
    #: The vacancy's slot (``effects.slot_of``): what the hold reserves.
    slot: dict = field(default_factory=dict)


def dispatch_context(vacancy: Vacancy, *, actor, now: datetime, correlation_id: str, cache: Any = None,
                     read_policy: bool = True, known_on: bool = False) -> DispatchContext:
    """The context of one dispatch of ``vacancy``: the flag first, then (when on and ``read_policy``) the policy
    and the send window now. ``cache``: the dispatcher loop's per-clinic reads
    (``vacancies.LoopCache``). ``known_on``: the flag was read on by this dispatch already (after a late yes)."""
    label, correlation_id = command_actor(actor, "dispatch", correlation_id)
    if cache is not None:
        enabled = cache.enabled(vacancy.clinic)
        policy = cache.policy(vacancy.clinic) if enabled and read_policy else None
    else:
        enabled, policy = policy_for_dispatch(clinic=vacancy.clinic, read=read_policy, known_on=known_on)
    if policy is None:
        return DispatchContext(now, label, correlation_id, enabled)
    return _with_policy(vacancy, policy, now=now, actor_label=label, correlation_id=correlation_id)


def policy_context(vacancy: Vacancy, *, now: datetime, actor_label: str, correlation_id: str,
                   policy: WaitlistPolicy | None = None) -> DispatchContext:
    """The context of a candidate loop a command runs past the flag (staff review's SKIP): the clinic's newest
    policy (unless given) and the send window now."""
    return _with_policy(vacancy, policy or policy_current(clinic=vacancy.clinic), now=now, actor_label=actor_label,
                        correlation_id=correlation_id)


def _with_policy(vacancy: Vacancy, policy: WaitlistPolicy, *, now: datetime, actor_label: str,
                 correlation_id: str) -> DispatchContext:
    """The context of a dispatch the waitlist is on for: the policy, the send window now and the slot (the fields
    ``effects.slot_of`` reads, read here: one more call into ``effects`` would enter it twice on the walk)."""
    quiet, cap_params = reach_now(policy=policy, clinic=vacancy.clinic, now=now)
    return DispatchContext(now, actor_label, correlation_id, True, policy, quiet, cap_params,
                           {name: getattr(vacancy, name) for name in SLOT_FIELDS})

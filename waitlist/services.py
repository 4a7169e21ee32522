"""Waitlist commands: the only writers of waitlist rows. Each opens its own transaction."""

from waitlist.dispatch.loop import expire_run, reconcile_run
from waitlist.dispatch.promotion import DispatchResult
from waitlist.dispatch.vacancies import (
    appointment_cancel_with_vacancy,
    vacancies_dispatch,
    vacancy_dispatch,
    vacancy_dispatch_by_id,
)
from waitlist.entries.services import entry_create, entry_set_priority, entry_withdraw
from waitlist.notices.confirmation_services import booking_confirmation_queue
from waitlist.offers.accept import AcceptResult, offer_claim_and_book, offer_late_accept_and_book
from waitlist.offers.booking import offer_book
from waitlist.offers.late_accept import LateAccept, offer_late_accept
from waitlist.offers.offers import (
    offer_claim,
    offer_decline,
    offer_expire,
    offer_notice_delivered,
    offer_withdraw,
    offers_expire_due,
)
from waitlist.offers.recovery import (
    BookingRetry,
    ReviewResult,
    hold_retry_booking,
    vacancy_close,
    vacancy_redispatch,
    vacancy_reopen,
    vacancy_review_resolve,
)
from waitlist.policy.controls import waitlist_switch_set, waitlist_tenant_allow
from waitlist.policy.services import policy_change, policy_current, policy_publish
from waitlist.reliability.services import decision_record
from waitlist.shadow.services import shadow_discard, shadow_observe, shadow_promote, shadow_publish
from waitlist.standing.services import standing_acceptance_record, standing_release

__all__ = [
    "AcceptResult",
    "BookingRetry",
    "DispatchResult",
    "LateAccept",
    "ReviewResult",
    "appointment_cancel_with_vacancy",
    "booking_confirmation_queue",
    "decision_record",
    "entry_create",
    "entry_set_priority",
    "entry_withdraw",
    "expire_run",
    "hold_retry_booking",
    "offer_book",
    "offer_claim",
    "offer_claim_and_book",
    "offer_decline",
    "offer_expire",
    "offer_late_accept",
    "offer_late_accept_and_book",
    "offer_notice_delivered",
    "offer_withdraw",
    "offers_expire_due",
    "policy_change",
    "policy_current",
    "policy_publish",
    "reconcile_run",
    "shadow_discard",
    "shadow_observe",
    "shadow_promote",
    "shadow_publish",
    "standing_acceptance_record",
    "standing_release",
    "vacancies_dispatch",
    "vacancy_close",
    "vacancy_dispatch",
    "vacancy_dispatch_by_id",
    "vacancy_redispatch",
    "vacancy_reopen",
    "vacancy_review_resolve",
    "waitlist_switch_set",
    "waitlist_tenant_allow",
]

"""Waitlist commands: the only writers of waitlist rows. Each opens its own transaction."""

from .accept import AcceptResult, offer_claim_and_book, offer_late_accept_and_book
from .booking import offer_book
from .confirmation import booking_confirmation_queue
from .controls import waitlist_switch_set, waitlist_tenant_allow
from .decisions import decision_record
from .entries import entry_create, entry_set_priority, entry_withdraw
from .late_accept import LateAccept, offer_late_accept
from .loop import expire_run, reconcile_run
from .offers import (
    offer_claim,
    offer_decline,
    offer_expire,
    offer_notice_delivered,
    offer_withdraw,
    offers_expire_due,
)
from .policy import policy_change, policy_current, policy_publish
from .promotion import DispatchResult
from .recovery import (
    BookingRetry,
    ReviewResult,
    hold_retry_booking,
    vacancy_close,
    vacancy_redispatch,
    vacancy_reopen,
    vacancy_review_resolve,
)
from .shadow import shadow_discard, shadow_observe, shadow_promote, shadow_publish
from .standing import standing_acceptance_record, standing_release
from .vacancies import appointment_cancel_with_vacancy, vacancies_dispatch, vacancy_dispatch, vacancy_dispatch_by_id

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

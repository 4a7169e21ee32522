"""Who may run each waitlist command (registered with ``scheduling.scoping`` at ``WaitlistConfig.ready()``).
Destructive commands (the patient or the clinic loses something) are ADMIN."""

from scheduling.models import Role

COMMAND_ROLES: dict[str, Role] = {
    # recovery (flow 9)
    "offer_withdraw": Role.ADMIN,  # the patient may be about to accept it
    # Declining on the patient's behalf ends their chance as surely as a withdrawal (and suppresses them for
    # the policy's hours): ADMIN only. The patient's own claim page declines with the patient as owner.
    "offer_decline": Role.ADMIN,
    "vacancy_close": Role.ADMIN,
    "vacancy_reopen": Role.ADMIN,
    "vacancy_redispatch": Role.STAFF,
    "hold_retry_booking": Role.STAFF,
    "vacancy_review_resolve": Role.STAFF,
    # entries and standing acceptance (a priority is the matcher's order: ADMIN)
    "entry_create": Role.STAFF,
    "entry_set_priority": Role.ADMIN,
    "entry_withdraw": Role.STAFF,
    "standing_acceptance_record": Role.STAFF,  # on the patient's word, or by staff with their consent (audited)
    "standing_release": Role.STAFF,
    "offer_claim": Role.STAFF,
    "offer_late_accept": Role.STAFF,  # the patient's yes after the window, on their word
    "hold_book": Role.STAFF,
    "vacancy_dispatch": Role.STAFF,
    # patients joining by themselves (issue 40): the switch, treatments and origins are the clinic's ADMIN's; the
    # approval queue (when the clinic asks for one) is front-desk work
    "join_settings_set": Role.ADMIN,
    "join_request_approve": Role.STAFF,
    "join_request_reject": Role.STAFF,
    "entry_resume": Role.STAFF,  # an entry paused by an unanswered upkeep question, on the patient's word
    # controls and policy
    "waitlist_switch_set": Role.ADMIN,
    "waitlist_tenant_allow": Role.ADMIN,
    "policy_change": Role.ADMIN,
    "shadow_publish": Role.ADMIN,
    "shadow_promote": Role.ADMIN,
    "shadow_discard": Role.ADMIN,
}

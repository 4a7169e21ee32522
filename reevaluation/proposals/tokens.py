"""Proposal-page tokens: signed (HMAC with SECRET_KEY, timestamped), salted for this one purpose, naming one
proposal. The page checks the proposal's state and expiry against the database, so the link dies with the
proposal; the token's own age bounds a leaked link anyway. Same helpers and errors as the waitlist's links."""

from __future__ import annotations

from django.conf import settings
from django.core import signing

from waitlist.offers.tokens import TokenExpired, TokenInvalid, signed_fields

SALT = "reevaluation.proposal"
#: The link lives under /claim/ (``/claim/rp-<token>/``), so the log redaction of claim links
#: (``common.redaction``) digests it in every log line as it does the claim page's.
PATH_PREFIX = "rp-"

__all__ = ["TokenExpired", "TokenInvalid", "proposal_link", "proposal_token_make", "proposal_token_read"]


def proposal_token_make(proposal) -> str:
    return signing.dumps({"rp": proposal.ref}, salt=SALT, compress=False)


def max_age_seconds() -> int:
    return int(getattr(settings, "REEVALUATION_PROPOSAL_TOKEN_MAX_AGE_DAYS", 7)) * 86400


def proposal_token_read(token) -> str:
    """The proposal ref of a genuine, unexpired token; TokenInvalid or TokenExpired otherwise."""
    (proposal_ref,) = signed_fields(token, salt=SALT, max_age=max_age_seconds(), keys=("rp",))
    return proposal_ref


def proposal_link(proposal) -> str:
    return f"{settings.PUBLIC_BASE_URL.rstrip('/')}/claim/{PATH_PREFIX}{proposal_token_make(proposal)}/"

"""Issue 15 part 1: one claim over the API is at most 10 SQL statements (counted, not timed); it is 9
(issue 42: the hold's step is scheduling's own statement, not spliced into the waitlist's).

The whole HTTP request is counted (middleware, token authentication, scope, throttles, the idempotency
receipt, the service, the response), outside a test transaction (``transaction=True``) as under
gunicorn, so no test savepoint wraps the request and BEGIN/COMMIT are counted.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.auth import token_cache_clear
from tests.conftest import token_client
from waitlist.models import EntryStatus, OfferClaimReceipt, OfferStatus

pytestmark = pytest.mark.django_db(transaction=True)

MAX_CLAIM_STATEMENTS = 10
#: What one claim is, in order, the first time a worker sees the token (later ones skip the token read).
CLAIM_STATEMENTS = [
    'FROM "authtoken_token"',  # token → user (cached per worker for API_TOKEN_CACHE_SECONDS)
    'FROM "scheduling_clinic"',  # the clinic and the caller's roles there, one statement
    "BEGIN",
    "INSERT INTO common_commandreceipt",  # the idempotency fence
    "FOR NO KEY UPDATE OF",  # the lock chain with everything the checks read
    "UPDATE scheduling_capacityhold",  # scheduling's hold step (``hold_accept_locked``)
    "WITH o AS (",  # the waitlist's writes, chained compare-and-set
    'UPDATE "common_commandreceipt"',  # the stored answer
    "COMMIT",
]



def _claim(client, base, offer, key):
    return client.post(
        f"{base}/offers/{offer.ref}/claim", {"expected_version": offer.version}, format="json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def _shape(captured) -> list[str]:
    """Each statement named by the first of ``CLAIM_STATEMENTS`` it contains (or its first 60 characters)."""
    return [
        next((mark for mark in CLAIM_STATEMENTS if mark in q["sql"]), q["sql"][:60])
        for q in captured.captured_queries
    ]


def _listing(queries) -> str:
    return "\n".join(f"{i + 1:2}. {q['sql'][:400]}" for i, q in enumerate(queries))


def test_one_claim_with_an_idempotency_key_is_at_most_ten_statements(world, offer):
    client = token_client(world.staff)
    base = f"/api/v1/clinics/{world.clinic.ref}"
    token_cache_clear()  # a worker that has not seen this token yet (the fixture's requests used it)
    with CaptureQueriesContext(connection) as captured:
        response = _claim(client, base, offer, "claim-count-1")
    assert response.status_code == 200, response.content
    assert len(captured) <= MAX_CLAIM_STATEMENTS, (
        f"{len(captured)} statements for one claim:\n{_listing(captured.captured_queries)}"
    )
    assert _shape(captured) == CLAIM_STATEMENTS, _listing(captured.captured_queries)
    locking = [q["sql"] for q in captured.captured_queries if "FOR NO KEY UPDATE" in q["sql"]]
    assert len(locking) == 1, _listing(captured.captured_queries)
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED and offer.entry.status == EntryStatus.ACCEPTED
    assert OfferClaimReceipt.objects.filter(offer=offer).count() == 1


def test_a_replayed_claim_is_answered_by_the_receipt_fence_alone(world, offer):
    client = token_client(world.staff)
    base = f"/api/v1/clinics/{world.clinic.ref}"
    first = _claim(client, base, offer, "claim-count-2")
    with CaptureQueriesContext(connection) as captured:
        again = _claim(client, base, offer, "claim-count-2")
    assert again.content == first.content
    chain = ('FROM "waitlist_', "UPDATE waitlist_", "INSERT INTO waitlist_")
    touched = [q["sql"] for q in captured.captured_queries if any(t in q["sql"] for t in chain)]
    assert touched == [] and len(captured) <= MAX_CLAIM_STATEMENTS, _listing(captured.captured_queries)


def test_the_claim_locks_its_chain_in_the_documented_order_in_one_statement(world, offer):
    """PostgreSQL takes the rows of ``FOR … UPDATE OF a, b`` in the order of that list: vacancy first."""
    client = token_client(world.staff)
    with CaptureQueriesContext(connection) as captured:
        _claim(client, f"/api/v1/clinics/{world.clinic.ref}", offer, "claim-order")
    (locking,) = [q["sql"] for q in captured.captured_queries if "FOR NO KEY UPDATE" in q["sql"]]
    assert locking.endswith(
        'FOR NO KEY UPDATE OF "waitlist_vacancy", "waitlist_offer", "scheduling_capacityhold", '
        '"waitlist_waitlistentry"'
    ), locking[-300:]


def test_a_workers_next_claim_skips_the_token_read(world, offer):
    client = token_client(world.staff)
    base = f"/api/v1/clinics/{world.clinic.ref}"
    assert client.get(f"{base}/treatments/").status_code == 200  # the worker has seen the token
    with CaptureQueriesContext(connection) as captured:
        response = _claim(client, base, offer, "claim-count-warm")
    assert response.status_code == 200, response.content
    assert _shape(captured) == CLAIM_STATEMENTS[1:], _listing(captured.captured_queries)


def test_a_refused_claim_is_stored_without_a_savepoint_and_replayed(world, offer):
    """Every refusal comes before the claim's one write, so the receipt needs no savepoint to undo it."""
    client = token_client(world.staff)
    base = f"/api/v1/clinics/{world.clinic.ref}"
    with CaptureQueriesContext(connection) as captured:
        refused = client.post(
            f"{base}/offers/{offer.ref}/claim", {"expected_version": offer.version + 5}, format="json",
            HTTP_IDEMPOTENCY_KEY="claim-refused",
        )
    assert refused.status_code == 409 and refused.json()["code"] == "VERSION_CONFLICT"
    assert not [q for q in captured.captured_queries if "SAVEPOINT" in q["sql"]], _listing(captured.captured_queries)
    again = client.post(
        f"{base}/offers/{offer.ref}/claim", {"expected_version": offer.version + 5}, format="json",
        HTTP_IDEMPOTENCY_KEY="claim-refused",
    )
    assert again.content == refused.content and again["Idempotent-Replayed"] == "true"
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED and not OfferClaimReceipt.objects.filter(offer=offer).exists()

"""Issue 16 / issue 13 part 5: intake trust. One answer for every trust failure, keys bound to tenant
groups, headers covered by the signature, and quarantine writes bounded per source."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from reevaluation.intake.services import sign
from reevaluation.models import QuarantineCase, QuarantineTally, ReevaluationJob
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import json_body
from tests.reevaluation.test_intake import URL, send, valid_body


def _trust_failure(kind: str, clinic, other_tenant_clinic, settings):
    settings.REEVALUATION_HMAC_KEYS = ["demo:demo-secret-change-me", f"bound:bound-secret:{clinic.tenant_group.ref}"]
    raw = rf.encode(valid_body(clinic))
    if kind == "KEY_UNKNOWN":
        return raw, rf.headers(raw, key_id="nope", secret="x")
    if kind == "SIGNATURE_INVALID":
        return raw, rf.headers(raw, secret="wrong-secret")
    if kind == "ISSUER_INVALID":
        return raw, rf.headers(raw, **{"X-Issuer": "evil-crm"})
    if kind == "AUDIENCE_INVALID":
        return raw, rf.headers(raw, **{"X-Audience": "someone-else"})
    # KEY_TENANT_MISMATCH: a genuine key bound to one tenant speaking for another.
    raw = rf.encode(valid_body(other_tenant_clinic))
    return raw, rf.headers(raw, key_id="bound", secret="bound-secret")


KINDS = ["KEY_UNKNOWN", "SIGNATURE_INVALID", "ISSUER_INVALID", "AUDIENCE_INVALID", "KEY_TENANT_MISMATCH"]


def test_every_trust_failure_gets_the_same_answer(anon_client, clinic, other_tenant_clinic, settings):
    answers = set()
    for kind in KINDS:
        raw, headers = _trust_failure(kind, clinic, other_tenant_clinic, settings)
        response = send(anon_client, raw, headers)
        answers.add((response.status_code, response.content))
    assert answers == {(401, b'{"code":"SIGNATURE_INVALID","detail":"The event could not be verified."}')}
    # The quarantine rows (for operators) still say which check failed.
    assert sorted(QuarantineCase.objects.values_list("reason_code", flat=True)) == sorted(KINDS)
    assert set(QuarantineCase.objects.values_list("category", flat=True)) == {"TRUST"}


def test_a_bound_key_speaks_for_its_own_tenant(anon_client, clinic, settings):
    settings.REEVALUATION_HMAC_KEYS = [f"bound:bound-secret:tg_elsewhere|{clinic.tenant_group.ref}"]
    raw = rf.encode(valid_body(clinic))
    response = send(anon_client, raw, rf.headers(raw, key_id="bound", secret="bound-secret"))
    assert response.status_code == 202, response.content


def test_an_unbound_secret_containing_colons_still_works(anon_client, clinic, settings):
    settings.REEVALUATION_HMAC_KEYS = ["k1:sec:ret:with:colons"]
    raw = rf.encode(valid_body(clinic))
    assert send(anon_client, raw, rf.headers(raw, key_id="k1", secret="sec:ret:with:colons")).status_code == 202


def test_the_key_id_is_covered_by_the_signature(anon_client, clinic, settings):
    settings.REEVALUATION_HMAC_KEYS = ["a:shared-secret", "b:shared-secret"]
    raw = rf.encode(valid_body(clinic))
    swapped = {**rf.headers(raw, key_id="a", secret="shared-secret"), "X-Key-Id": "b"}
    assert send(anon_client, raw, swapped).status_code == 401
    assert QuarantineCase.objects.get().reason_code == "SIGNATURE_INVALID"


def test_issuer_and_audience_are_covered_by_the_signature(anon_client, clinic, settings):
    raw = rf.encode(valid_body(clinic))
    signed_elsewhere = sign(raw, "demo-secret-change-me", key_id="demo", issuer="other-crm", audience="other-app")
    headers = {**rf.headers(raw), "X-Signature": signed_elsewhere}  # replayed with this service's headers
    assert send(anon_client, raw, headers).status_code == 401
    assert ReevaluationJob.objects.count() == 0


def test_a_body_only_signature_is_refused(anon_client, clinic):
    raw = rf.encode(valid_body(clinic))
    legacy = "sha256=" + hmac.new(b"demo-secret-change-me", raw, hashlib.sha256).hexdigest()
    assert send(anon_client, raw, {**rf.headers(raw), "X-Signature": legacy}).status_code == 401


def test_an_unsigned_flood_is_counted_in_full_but_stored_only_as_a_sample(anon_client, clinic, settings):
    settings.REEVALUATION_QUARANTINE_STORE_PER_MINUTE = 3
    settings.REEVALUATION_QUARANTINE_SAMPLE_EVERY = 5
    with time_machine.travel(timezone.now().replace(second=1), tick=False):
        answers = [
            anon_client.post(URL, data=b"{}", content_type="application/json", REMOTE_ADDR="203.0.113.5")
            for _ in range(12)
        ]
        other = anon_client.post(URL, data=b"{}", content_type="application/json", REMOTE_ADDR="203.0.113.6")
    assert {a.status_code for a in answers} == {401} and other.status_code == 401
    assert len({a.content for a in answers}) == 1  # stored or sampled, the answer is the same
    tally = QuarantineTally.objects.get(source="addr:203.0.113.5")
    assert (tally.refused, tally.stored) == (12, 4)  # the first 3, then the 8th (3 + 5)
    assert QuarantineCase.objects.count() == 5  # 4 from the flood + 1 from another address


def test_a_verified_source_over_its_rate_is_told_its_case_was_counted_not_stored(anon_client, clinic, settings):
    settings.REEVALUATION_QUARANTINE_STORE_PER_MINUTE = 1
    with time_machine.travel(timezone.now().replace(second=1), tick=False):
        answers = []
        for _ in range(2):
            body = valid_body(clinic)
            body["patientReferenceFingerprint"] = "NOT-HEX"
            raw = rf.encode(body)
            answers.append(json_body(send(anon_client, raw, rf.headers(raw))))
    assert "quarantine case rqc_" in answers[0]["detail"]
    assert "not stored" in answers[1]["detail"]
    assert QuarantineTally.objects.get(source="key:demo").refused == 2


@pytest.mark.parametrize("kind", KINDS)
def test_trust_failures_are_quarantined_without_attribution_to_a_tenant(
    anon_client, clinic, other_tenant_clinic, settings, kind
):
    raw, headers = _trust_failure(kind, clinic, other_tenant_clinic, settings)
    send(anon_client, raw, headers)
    case = QuarantineCase.objects.get()
    assert case.reason_code == kind and case.clinic_id is None


def test_tallies_past_their_retention_are_forgotten(anon_client, clinic, settings):
    settings.REEVALUATION_QUARANTINE_TALLY_DAYS = 30
    old = timezone.now() - timedelta(days=31)
    with time_machine.travel(old, tick=False):
        anon_client.post(URL, data=b"{}", content_type="application/json", REMOTE_ADDR="203.0.113.7")
    anon_client.post(URL, data=b"{}", content_type="application/json", REMOTE_ADDR="203.0.113.8")
    assert list(QuarantineTally.objects.values_list("source", flat=True)) == ["addr:203.0.113.8"]
    assert QuarantineCase.objects.count() == 2  # the evidence stays; only the counters go

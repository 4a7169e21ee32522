"""Intake input validation: full-match patterns, sane times and typed 413s, each with a quarantine row."""

from __future__ import annotations

import pytest

from reevaluation.models import QuarantineCase, ReevaluationJob
from tests.reevaluation import factories as rf
from tests.reevaluation.test_intake import send, valid_body


@pytest.mark.parametrize(
    "field, value",
    [
        ("eventId", "evt-1\n"),
        ("assessmentRef", "asm-1\n"),
        ("assessmentHash", "a" * 64 + "\n"),
        ("patientReferenceFingerprint", "b" * 64 + "\n"),
    ],
)
def test_a_trailing_newline_is_refused_and_quarantined(anon_client, clinic, field, value):
    raw = rf.encode(valid_body(clinic, **{field: value}))
    response = send(anon_client, raw, rf.headers(raw))
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "SCHEMA_INVALID"
    assert QuarantineCase.objects.count() == 1 and not ReevaluationJob.objects.exists()


@pytest.mark.parametrize(
    "occurred_at",
    ["9999-12-31T23:59:59-10:00", "9999-12-31T23:59:59+00:00", "0296-01-01T00:00:00+00:00", "2099-01-01T00:00:00Z"],
)
def test_an_occurred_at_outside_the_sane_range_is_quarantined_not_a_job(anon_client, clinic, occurred_at):
    raw = rf.encode(valid_body(clinic, occurredAt=occurred_at))
    response = send(anon_client, raw, rf.headers(raw))
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "SCHEMA_INVALID"
    assert QuarantineCase.objects.count() == 1 and not ReevaluationJob.objects.exists()


def test_a_body_over_the_server_limit_is_a_typed_413_with_a_quarantine_row(anon_client, clinic):
    raw = b"{" + b" " * (3 * 1024 * 1024) + b"}"
    response = send(anon_client, raw, rf.headers(raw))
    assert response.status_code == 413 and response["Content-Type"] == "application/json"
    assert response.json()["code"] == "PAYLOAD_TOO_LARGE"
    case = QuarantineCase.objects.get()
    assert case.evidence_size == len(raw) and case.reason_code == "SCHEMA_INVALID"

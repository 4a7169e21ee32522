"""Redrive by failure class: TRANSIENT by default, CONTRACT/TRUST_PRIVACY only by explicit choice and
their own confirmation, exact targets with a lifetime, single jobs left out, redriven jobs marked."""

from __future__ import annotations

import pytest

from reevaluation import selectors
from reevaluation.models import JobState, RedrivePreview, ReevaluationJob, failure_class
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event

pytestmark = pytest.mark.django_db
URL = "/api/v1/ops/profile-reevaluation"


def failed(world, code: str, n: int = 1, start: int = 1) -> list[ReevaluationJob]:
    refs = [post_event(world, rf.fingerprint(f"{world.crm_ref}-{code}-{start + i}"), 1).job_ref for i in range(n)]
    ReevaluationJob.objects.filter(ref__in=refs).update(state=JobState.FAILED, attempts=5, last_failure_code=code)
    return list(ReevaluationJob.objects.filter(ref__in=refs).order_by("pk"))


def call(client, clinic, key: str, **body):
    payload = {"clinic": clinic.ref, "reason": "CRM outage over", **body}
    return client.post(URL, payload, format="json", HTTP_IDEMPOTENCY_KEY=key)


@pytest.fixture
def mixed(world):
    """One FAILED job per class: a timeout, a hash mismatch and a privacy breach."""
    return {
        "TRANSIENT": failed(world, "ASSESSMENT_TIMEOUT")[0],
        "CONTRACT": failed(world, "ASSESSMENT_HASH_MISMATCH")[0],
        "TRUST_PRIVACY": failed(world, "PRIVACY_BOUNDARY")[0],
    }


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("ASSESSMENT_TIMEOUT", "TRANSIENT"),
        ("ASSESSMENT_UNAVAILABLE", "TRANSIENT"),
        ("LEASE_EXPIRED", "TRANSIENT"),
        ("ASSESSMENT_HASH_MISMATCH", "CONTRACT"),
        ("ASSESSMENT_POLICY_STALE", "CONTRACT"),
        ("SOMETHING_NEW", "CONTRACT"),
        ("PRIVACY_BOUNDARY", "TRUST_PRIVACY"),
        ("CONFIRMED_PROTECTED", "TRUST_PRIVACY"),
    ],
)
def test_failure_codes_map_to_classes_and_unknown_codes_are_never_transient(code, cls):
    assert failure_class(code) == cls


def test_preview_takes_transient_only_by_default_and_counts_every_class(staff_client, world, mixed):
    body = call(staff_client, world.clinic, "p1", action="PREVIEW").json()
    assert [t["job"] for t in body["targets"]] == [mixed["TRANSIENT"].ref]
    assert body["targets"][0]["failure_class"] == "TRANSIENT"
    assert body["class_counts"] == {"TRANSIENT": 1, "CONTRACT": 1, "TRUST_PRIVACY": 1}
    assert body["failure_classes"] == ["TRANSIENT"] and body["includes_non_transient"] is False
    assert body["lifetime_seconds"] == 15 * 60 and body["expires_at"]
    assert RedrivePreview.objects.get(ref=body["preview"]).job_ids == [mixed["TRANSIENT"].pk]


def test_non_transient_classes_need_an_explicit_choice(staff_client, world, mixed):
    response = call(staff_client, world.clinic, "p1", action="PREVIEW", failure_classes=["TRUST_PRIVACY"])
    assert response.status_code == 400
    assert response.json()["code"] == "VALIDATION_ERROR"
    assert "include_non_transient" in response.json()["fields"]
    assert not RedrivePreview.objects.exists()


def test_executing_a_non_transient_preview_needs_its_own_confirmation(admin_client, world, mixed):
    preview = call(
        admin_client, world.clinic, "p1", action="PREVIEW", failure_classes=["CONTRACT"], include_non_transient=True
    ).json()
    assert preview["includes_non_transient"] is True
    assert [t["job"] for t in preview["targets"]] == [mixed["CONTRACT"].ref]
    refused = call(admin_client, world.clinic, "e1", action="EXECUTE", preview=preview["preview"])
    assert refused.status_code == 400 and "confirm_non_transient" in refused.json()["fields"]
    assert RedrivePreview.objects.get(ref=preview["preview"]).executed_at is None
    done = call(
        admin_client, world.clinic, "e2", action="EXECUTE", preview=preview["preview"], confirm_non_transient=True
    ).json()
    assert [row["job"] for row in done["redriven"]] == [mixed["CONTRACT"].ref]


def test_an_admin_leaves_out_single_jobs_before_execute(admin_client, world):
    jobs = failed(world, "ASSESSMENT_UNAVAILABLE", n=3)
    preview = call(admin_client, world.clinic, "p1", action="PREVIEW").json()
    body = call(
        admin_client, world.clinic, "e1", action="EXECUTE", preview=preview["preview"], exclude=[jobs[1].ref]
    ).json()
    assert [row["job"] for row in body["redriven"]] == [jobs[0].ref, jobs[2].ref]
    assert body["excluded"] == [{"job": jobs[1].ref, "state": "FAILED"}]
    assert not ReevaluationJob.objects.filter(redrive_of=jobs[1]).exists()
    again = call(admin_client, world.clinic, "p2", action="PREVIEW").json()
    assert [t["job"] for t in again["targets"]] == [jobs[1].ref]  # still actionable


def test_leaving_out_a_job_outside_the_preview_is_refused(admin_client, world, mixed):
    preview = call(admin_client, world.clinic, "p1", action="PREVIEW").json()
    response = call(
        admin_client, world.clinic, "e1", action="EXECUTE", preview=preview["preview"], exclude=[mixed["CONTRACT"].ref]
    )
    assert response.status_code == 400 and "exclude" in response.json()["fields"]
    assert RedrivePreview.objects.get(ref=preview["preview"]).executed_at is None


def test_redriven_jobs_are_marked_and_the_failed_counter_counts_only_actionable(admin_client, world, mixed):
    preview = call(admin_client, world.clinic, "p1", action="PREVIEW").json()
    child = call(admin_client, world.clinic, "e1", action="EXECUTE", preview=preview["preview"]).json()["redriven"][0]
    snap = selectors.snapshot(clinic=world.clinic)
    assert snap["counts"]["FAILED"] == 3
    assert snap["failed_actionable"] == 2 and snap["failed_settled"] == 1
    assert snap["failed_by_class"] == {"TRANSIENT": 0, "CONTRACT": 1, "TRUST_PRIVACY": 1}
    rows = {row["job"]: row for row in snap["action_queue"]}
    assert rows[mixed["TRANSIENT"].ref]["redriven_as"] == child["redrive_job"]
    assert [row["job"] for row in snap["action_queue"]][-1] == mixed["TRANSIENT"].ref  # marked, last
    assert rows[mixed["CONTRACT"].ref]["redriven_as"] is None
    assert rows[mixed["CONTRACT"].ref]["failure_class"] == "CONTRACT"


def test_a_redriven_job_leaves_the_queue_once_its_child_completed(admin_client, world, mixed):
    preview = call(admin_client, world.clinic, "p1", action="PREVIEW").json()
    child = call(admin_client, world.clinic, "e1", action="EXECUTE", preview=preview["preview"]).json()["redriven"][0]
    ReevaluationJob.objects.filter(ref=child["redrive_job"]).update(state=JobState.COMPLETED)
    refs = [row["job"] for row in selectors.action_queue(clinic=world.clinic, limit=50)]
    assert mixed["TRANSIENT"].ref not in refs and child["redrive_job"] not in refs

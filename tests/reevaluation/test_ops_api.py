"""Operations snapshot (STAFF) and redrive PREVIEW/EXECUTE (ADMIN) over the API."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.errors import PermissionDenied
from common.models import AuditEntry
from reevaluation.models import JobState, RedrivePreview, ReevaluationJob
from reevaluation.services import redrive_execute, redrive_preview
from scheduling.models import Role
from tests import factories as f
from tests.conftest import token_client
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import json_body, post_event

URL = "/api/v1/ops/profile-reevaluation"
SNAPSHOT_KEYS = {
    "counts",
    "active_leases",
    "oldest_backlog_age_seconds",
    "lease_renewal_failures",
    "consecutive_assessment_failures",
    "drain_state",
    "mutation_mode",
    "action_queue",
}
QUEUE_KEYS = {
    "job",
    "target_revision",
    "priority_class",
    "due_at",
    "next_attempt_at",
    "last_failure_code",
    "outcome_counts",
}


def failed_jobs(world, n: int, start: int = 1) -> list[ReevaluationJob]:
    jobs = []
    for i in range(n):
        fp = rf.fingerprint(f"{world.crm_ref}-{start + i}")
        ref = post_event(world, fp, 1).job_ref
        ReevaluationJob.objects.filter(ref=ref).update(
            state=JobState.FAILED, attempts=5, last_failure_code="ASSESSMENT_TIMEOUT"
        )
        jobs.append(ReevaluationJob.objects.get(ref=ref))
    return jobs


def redrive(client, clinic, key: str, **body):
    payload = {"clinic": clinic.ref, "reason": "CRM outage over", **body}
    return client.post(URL, payload, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_snapshot_shape_for_staff(staff_client, world):
    rf.enable(world.clinic, "DRY_RUN")
    failed_jobs(world, 1)
    post_event(world, world.fp, 1)
    response = staff_client.get(URL, {"clinic": world.clinic.ref})
    assert response.status_code == 200
    body = response.json()
    assert SNAPSHOT_KEYS <= set(body)
    assert set(body["counts"]) == {"PENDING", "RUNNING", "RETRY_WAIT", "COMPLETED", "STALE", "FAILED"}
    assert body["counts"]["FAILED"] == 1 and body["counts"]["PENDING"] == 1
    assert body["mutation_mode"] == "DRY_RUN" and body["drain_state"] == "ACTIVE"
    assert body["oldest_backlog_age_seconds"] >= 0 and "oldest_pending_age_seconds" in body
    assert "claim_latency_seconds" in body
    assert [row["last_failure_code"] for row in body["action_queue"]][0] == "ASSESSMENT_TIMEOUT"
    assert QUEUE_KEYS <= set(body["action_queue"][0])


def test_snapshot_query_count_does_not_grow_with_jobs(staff_client, world):
    failed_jobs(world, 2)
    staff_client.get(URL, {"clinic": world.clinic.ref})  # the worker now knows the token (common/auth.py)
    with CaptureQueriesContext(connection) as few:
        staff_client.get(URL, {"clinic": world.clinic.ref})
    failed_jobs(world, 6, start=10)
    with CaptureQueriesContext(connection) as many:
        staff_client.get(URL, {"clinic": world.clinic.ref})
    assert len(many) == len(few)


def test_action_queue_keyset_pages(staff_client, world):
    failed_jobs(world, 5)
    first = staff_client.get(URL, {"clinic": world.clinic.ref, "limit": 2}).json()["action_queue"]
    second = staff_client.get(URL, {"clinic": world.clinic.ref, "limit": 2, "after": first[-1]["job"]}).json()
    refs = [row["job"] for row in first] + [row["job"] for row in second["action_queue"]]
    assert len(refs) == len(set(refs)) == 4


def test_snapshot_scope(anon_client, outsider_client, world):
    assert anon_client.get(URL, {"clinic": world.clinic.ref}).status_code == 401
    response = outsider_client.get(URL, {"clinic": world.clinic.ref})
    assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND"


def test_preview_then_execute(admin_client, admin, world):
    jobs = failed_jobs(world, 3)
    preview = redrive(admin_client, world.clinic, "k1", action="PREVIEW", limit=2)
    assert preview.status_code == 200, preview.content
    body = json_body(preview)
    assert body["count"] == 2 and [t["job"] for t in body["targets"]] == [j.ref for j in jobs[:2]]
    assert body["preview"].startswith("rpv_")
    executed = redrive(admin_client, world.clinic, "k2", action="EXECUTE", preview=body["preview"], limit=2)
    assert executed.status_code == 200, executed.content
    result = json_body(executed)
    assert result["count"] == 2 and result["skipped"] == []
    children = ReevaluationJob.objects.filter(redrive_of__in=jobs[:2])
    assert children.count() == 2 and all(c.state == JobState.PENDING and c.attempts == 0 for c in children)
    assert not ReevaluationJob.objects.filter(redrive_of=jobs[2]).exists()
    audits = AuditEntry.objects.filter(action__startswith="reevaluation.redrive").order_by("pk")
    assert [a.action for a in audits] == ["reevaluation.redrive_preview", "reevaluation.redrive_execute"]
    assert all(a.actor == admin and a.idempotency_key and a.clinic_ref == world.clinic.ref for a in audits)


def test_execute_acts_only_on_previewed_rows_still_eligible(admin, world):
    jobs = failed_jobs(world, 3)
    preview = redrive_preview(clinic=world.clinic, actor=admin, reason="retry", limit=3)
    # Between PREVIEW and EXECUTE: one job is redriven elsewhere, one gets a newer revision, and a
    # brand-new FAILED job appears (it was not previewed, so it is not touched).
    other = redrive_preview(clinic=world.clinic, actor=admin, reason="other", limit=1)
    redrive_execute(clinic=world.clinic, actor=admin, preview_ref=other.preview_ref, reason="other")
    post_event(world, jobs[1].fingerprint, 2)
    newcomer = failed_jobs(world, 1, start=50)[0]
    result = redrive_execute(
        clinic=world.clinic, actor=admin, preview_ref=preview.preview_ref, reason="retry"
    )
    assert [r["job"] for r in result.redriven] == [jobs[2].ref]
    assert sorted(s["job"] for s in result.skipped) == sorted([jobs[0].ref, jobs[1].ref])
    assert not ReevaluationJob.objects.filter(redrive_of=newcomer).exists()


def test_a_preview_executes_once(admin, world):
    failed_jobs(world, 1)
    preview = redrive_preview(clinic=world.clinic, actor=admin, reason="retry", limit=5)
    redrive_execute(clinic=world.clinic, actor=admin, preview_ref=preview.preview_ref, reason="retry")
    from common.errors import Conflict

    with pytest.raises(Conflict) as err:
        redrive_execute(clinic=world.clinic, actor=admin, preview_ref=preview.preview_ref, reason="retry")
    assert err.value.code == "PREVIEW_USED"


def test_target_revision_filters_the_preview(admin, world):
    failed_jobs(world, 1)
    assert (
        redrive_preview(clinic=world.clinic, actor=admin, reason="r", limit=5, target_revision=9).count == 0
    )
    assert (
        redrive_preview(clinic=world.clinic, actor=admin, reason="r", limit=5, target_revision=1).count == 1
    )


def test_staff_may_preview_but_gets_403_on_execute(staff_client, staff, world):
    jobs = failed_jobs(world, 1)
    preview = redrive(staff_client, world.clinic, "s1", action="PREVIEW", limit=1)
    assert preview.status_code == 200 and preview.json()["count"] == 1
    response = redrive(staff_client, world.clinic, "s2", action="EXECUTE", preview=preview.json()["preview"])
    assert response.status_code == 403 and response.json()["code"] == "PERMISSION_DENIED"
    assert not ReevaluationJob.objects.filter(redrive_of=jobs[0]).exists()
    with pytest.raises(PermissionDenied):  # the service checks the role too
        redrive_execute(clinic=world.clinic, actor=staff, preview_ref=preview.json()["preview"], reason="x")
    assert RedrivePreview.objects.get().executed_at is None


def test_admin_of_another_clinic_gets_404(outsider_client, world):
    failed_jobs(world, 1)
    response = redrive(outsider_client, world.clinic, "o1", action="PREVIEW", limit=1)
    assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND"
    missing = outsider_client.post(
        URL, {"clinic": "cl_missing", "reason": "x", "action": "PREVIEW"}, format="json"
    )
    assert missing.status_code == 404


def test_preview_of_another_clinic_is_not_found(admin, world, other_tenant_clinic):
    failed_jobs(world, 1)
    preview = redrive_preview(clinic=world.clinic, actor=admin, reason="r", limit=5)
    other_admin = f.user_with_role(other_tenant_clinic, Role.ADMIN)
    response = redrive(
        token_client(other_admin), other_tenant_clinic, "x1", action="EXECUTE", preview=preview.preview_ref
    )
    assert response.status_code == 404


def test_actor_in_body_is_ignored_and_replay_is_identical(admin_client, admin, world, staff):
    failed_jobs(world, 1)
    first = redrive(admin_client, world.clinic, "same", action="PREVIEW", limit=1, actor=staff.username)
    again = redrive(admin_client, world.clinic, "same", action="PREVIEW", limit=1, actor=staff.username)
    assert first.content == again.content and again["Idempotent-Replayed"] == "true"
    assert RedrivePreview.objects.count() == 1 and RedrivePreview.objects.get().actor == admin
    assert AuditEntry.objects.get(action="reevaluation.redrive_preview").actor == admin
    changed = redrive(admin_client, world.clinic, "same", action="PREVIEW", limit=2)
    assert changed.status_code == 422 and changed.json()["code"] == "IDEMPOTENCY_KEY_REUSED"


def test_validation_errors(admin_client, world):
    response = redrive(admin_client, world.clinic, "v1", action="EXECUTE")
    assert response.status_code == 400 and "preview" in response.json()["fields"]
    response = admin_client.post(URL, {"action": "PREVIEW"}, format="json")
    assert response.status_code == 400 and "clinic" in response.json()["fields"]

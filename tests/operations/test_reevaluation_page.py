"""The reevaluation console page: snapshot, queue, detail panel, quarantine, redrive, switches, audit."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from common.models import AuditEntry, CommandReceipt
from reevaluation import selectors
from reevaluation.models import (
    ClinicReevaluationSettings,
    JobState,
    QuarantineCase,
    RedrivePreview,
    ReevaluationJob,
)
from reevaluation.services import redrive_preview
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event
from tests.worlds import ReevaluationWorld

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def page_url(clinic, **params) -> str:
    url = reverse("console:reevaluation", kwargs={"clinic_ref": clinic.ref})
    if params:
        url += "?" + "&".join(f"{k}={v}" for k, v in params.items())
    return url


def url(name: str, clinic, **kwargs) -> str:
    return reverse(f"console:{name}", kwargs={"clinic_ref": clinic.ref, **kwargs})


def queue_refs(html: str) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)"', html)


def case_refs(html: str) -> list[str]:
    return re.findall(r'<tr data-case="([^"]+)"', html)


def cursor(html: str, name: str = "after") -> str | None:
    match = re.search(rf'hx-get="[^"]*\?{name}=([^"&]+)"', html)
    return match.group(1) if match else None


def hidden(html: str, name: str) -> str:
    return re.search(rf'name="{name}" value="([^"]+)"', html).group(1)


@pytest.fixture
def world(clinic):
    return ReevaluationWorld(clinic)


def failed_jobs(world, n: int, start: int = 1, code: str = "ASSESSMENT_TIMEOUT") -> list[ReevaluationJob]:
    """FAILED jobs that are still their scope's head (so a redrive may target them)."""
    refs = [post_event(world, rf.fingerprint(f"{world.crm_ref}-{start + i}"), 1).job_ref for i in range(n)]
    ReevaluationJob.objects.filter(ref__in=refs).update(state=JobState.FAILED, attempts=5, last_failure_code=code)
    return list(ReevaluationJob.objects.filter(ref__in=refs).order_by("pk"))


def quarantine_cases(clinic, n: int) -> None:
    for i in range(n):
        QuarantineCase.objects.create(
            reason_code="SIGNATURE_INVALID",
            category="TRUST",
            evidence_digest=f"{i:02d}" + "ab" * 31,
            clinic=clinic,
            tenant_group=clinic.tenant_group,
        )


def preview_as(web, clinic, *, limit=10, key="pk-1", **extra):
    data = {"reason": "CRM outage is over", "limit": limit, "idempotency_key": key, **extra}
    return web.post(url("reevaluation-preview", clinic), data, **HX)


def execute_as(web, clinic, preview_ref, *, key="ek-1", **extra):
    data = {
        "preview": preview_ref,
        "reason": "CRM outage is over",
        "confirm": "on",
        "idempotency_key": key,
        **extra,
    }
    return web.post(url("reevaluation-execute", clinic), data, **HX)


# --- the page -------------------------------------------------------------------------------------


def test_nav_slot_is_a_link_now(staff_web, clinic):
    html = staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref})).content.decode()
    assert f'href="{page_url(clinic)}"' in html


def test_snapshot_queue_and_read_only_switches_for_staff(staff_web, world):
    rf.enable(world.clinic, "DRY_RUN")
    failed = failed_jobs(world, 1)
    held = world.book("HELD", 10)
    assert held.status == "HELD"
    pending = post_event(world, world.fp, 1).job_ref  # the patient holds a HELD: HELD_PRESENT
    other = post_event(world, rf.fingerprint("nobody"), 1).job_ref  # PROPOSED_ONLY
    html = staff_web.get(page_url(world.clinic)).content.decode()
    assert 'data-count="FAILED">1<' in html and 'data-count="PENDING">2<' in html
    for label in ("Active leases", "Oldest backlog", "Lease-renewal failures", "Consecutive assessment failures"):
        assert label in html
    assert 'hx-trigger="every 15s, reevaluation-changed from:body"' in html
    # HELD_PRESENT before PROPOSED_ONLY; within a class FAILED before PENDING.
    assert queue_refs(html) == [pending, failed[0].ref, other]
    assert "ASSESSMENT_TIMEOUT" in html and "HELD_PRESENT" in html and "PROPOSED_ONLY" in html
    assert " KST" in html  # due times in the clinic's zone
    # STAFF: mode and drain read-only, a PREVIEW form, no execute or switch controls.
    assert re.search(r'data-testid="mode-readonly"><span class="code-label"[^>]*data-code="DRY_RUN">Trial run', html)
    assert re.search(r'data-testid="drain-readonly"><span class="code-label"[^>]*data-code="ACTIVE">', html)
    assert url("reevaluation-preview", world.clinic) in html
    for name in ("reevaluation-execute", "reevaluation-mode", "reevaluation-drain"):
        assert url(name, world.clinic) not in html


def test_admin_sees_switch_forms(admin_web, world):
    html = admin_web.get(page_url(world.clinic)).content.decode()
    assert url("reevaluation-mode", world.clinic) in html and url("reevaluation-drain", world.clinic) in html
    assert 'name="mode"' in html and 'name="state"' in html and "Current: Reevaluation off" in html
    assert html.count('id="mode_reason"') == 1 and html.count('id="drain_reason"') == 1


def test_snapshot_poll_returns_only_the_snapshot_block(staff_web, world):
    failed_jobs(world, 1)
    response = staff_web.get(page_url(world.clinic), HTTP_HX_TARGET="reeval-snapshot", **HX)
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="reeval-snapshot"') and "<html" not in html
    assert 'data-count="FAILED">1<' in html


def test_queue_load_more_walks_every_row_once(staff_web, world, settings):
    settings.CONSOLE_REEVALUATION_PAGE_SIZE = 4
    failed_jobs(world, 3)
    rf.bulk_jobs(world.clinic, 6)
    expected = [row["job"] for row in selectors.action_queue(clinic=world.clinic, limit=50)]
    html = staff_web.get(page_url(world.clinic)).content.decode()
    seen, after = queue_refs(html), cursor(html)
    while after:
        with CaptureQueriesContext(connection) as ctx:
            fragment = staff_web.get(page_url(world.clinic, after=after), **HX).content.decode()
        assert "<html" not in fragment
        assert not any("OFFSET" in q["sql"].upper() for q in ctx.captured_queries)
        seen += queue_refs(fragment)
        after = cursor(fragment)
    assert seen == expected and len(seen) == 9


def test_queue_cursor_of_another_clinic_is_404(staff_web, world, other_tenant_clinic):
    (foreign,) = rf.bulk_jobs(other_tenant_clinic, 1)
    assert staff_web.get(page_url(world.clinic, after=foreign.ref), **HX).status_code == 404


def test_quarantine_list_with_keyset_paging(staff_web, world, other_tenant_clinic):
    quarantine_cases(world.clinic, 13)
    quarantine_cases(other_tenant_clinic, 2)
    html = staff_web.get(page_url(world.clinic)).content.decode()
    first = case_refs(html)
    assert len(first) == 10 and "SIGNATURE_INVALID" in html and "TRUST" in html
    assert "12ababababab…" in html  # the newest case's digest prefix, never the whole digest
    assert "12" + "ab" * 31 not in html
    fragment = staff_web.get(page_url(world.clinic, qafter=cursor(html, "qafter")), **HX).content.decode()
    rest = case_refs(fragment)
    expected = list(
        QuarantineCase.objects.filter(clinic=world.clinic).order_by("-created_at", "-id").values_list("ref", flat=True)
    )
    assert first + rest == expected and cursor(fragment, "qafter") is None


def test_detail_panel_shows_scope_lineage_and_no_full_fingerprint(staff_web, admin, world):
    (job,) = failed_jobs(world, 1)
    preview = redrive_preview(clinic=world.clinic, actor=admin, reason="retry please", limit=5)
    from reevaluation.services import redrive_execute

    result = redrive_execute(clinic=world.clinic, actor=admin, preview_ref=preview.preview_ref, reason="retry")
    child = result.redriven[0]["redrive_job"]
    response = staff_web.get(url("reevaluation-job", world.clinic, job_ref=job.ref), **HX)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert world.clinic.tenant_group.ref in html and world.clinic.ref in html
    assert job.fingerprint[:8] in html and job.fingerprint not in html
    assert "ASSESSMENT_TIMEOUT" in html and f'data-lineage="{child}"' in html
    child_html = staff_web.get(url("reevaluation-job", world.clinic, job_ref=child), **HX).content.decode()
    assert f'data-lineage="{job.ref}"' in child_html and "redrive of" in child_html
    # Without htmx the same panel comes as a full page.
    assert "<html" in staff_web.get(url("reevaluation-job", world.clinic, job_ref=job.ref)).content.decode()


def test_detail_panel_of_another_clinics_job_is_404(staff_web, world, other_tenant_clinic):
    (foreign,) = rf.bulk_jobs(other_tenant_clinic, 1)
    assert staff_web.get(url("reevaluation-job", world.clinic, job_ref=foreign.ref)).status_code == 404
    assert staff_web.get(url("reevaluation-job", world.clinic, job_ref="rjb_missing")).status_code == 404


def test_outsider_and_anonymous(outsider_web, client, world):
    assert outsider_web.get(page_url(world.clinic)).status_code == 404
    assert client.get(page_url(world.clinic)).status_code == 302
    assert outsider_web.post(url("reevaluation-preview", world.clinic), {}).status_code == 404


def test_page_is_read_only(staff_web, world):
    assert staff_web.post(page_url(world.clinic)).status_code == 405


# --- redrive --------------------------------------------------------------------------------------


def test_staff_previews_but_sees_no_execute_and_gets_403_when_posting_anyway(staff_web, staff, world):
    jobs = failed_jobs(world, 2)
    response = preview_as(staff_web, world.clinic)
    html = response.content.decode()
    assert response.status_code == 200
    assert [j.ref in html for j in jobs] == [True, True] and "ASSESSMENT_TIMEOUT" in html
    assert url("reevaluation-execute", world.clinic) not in html and 'data-testid="admin-only"' in html
    preview = RedrivePreview.objects.get()
    assert preview.actor == staff and f'data-preview="{preview.ref}"' in html
    refused = execute_as(staff_web, world.clinic, preview.ref)
    assert refused.status_code == 403
    assert not ReevaluationJob.objects.filter(redrive_of__isnull=False).exists()
    assert RedrivePreview.objects.get().executed_at is None
    assert not AuditEntry.objects.filter(action="reevaluation.redrive_execute").exists()


def test_admin_previews_executes_and_sees_the_lineage(admin_web, admin, world):
    jobs = failed_jobs(world, 3)
    html = preview_as(admin_web, world.clinic, limit=2).content.decode()
    assert [j.ref in html for j in jobs] == [True, True, False]
    assert url("reevaluation-execute", world.clinic) in html
    preview_ref, key = hidden(html, "preview"), hidden(html, "idempotency_key")
    response = execute_as(admin_web, world.clinic, preview_ref, key=key)
    assert response.status_code == 200
    result = response.content.decode()
    children = {c.redrive_of_id: c for c in ReevaluationJob.objects.filter(redrive_of__isnull=False)}
    assert set(children) == {jobs[0].pk, jobs[1].pk}
    for parent in jobs[:2]:
        child = children[parent.pk]
        assert f'data-parent="{parent.ref}" data-child="{child.ref}"' in result
    events = json.loads(response["HX-Trigger"])
    assert "reevaluation-changed" in events and "Redriven 2" in events["console-toast"]["message"]
    audit = AuditEntry.objects.get(action="reevaluation.redrive_execute")
    assert audit.actor == admin and audit.idempotency_key == key and audit.reason == "CRM outage is over"


def test_replayed_execute_shows_the_same_result_and_redrives_once(admin_web, world):
    failed_jobs(world, 2)
    html = preview_as(admin_web, world.clinic).content.decode()
    preview_ref = hidden(html, "preview")
    first = execute_as(admin_web, world.clinic, preview_ref, key="same-key")
    again = execute_as(admin_web, world.clinic, preview_ref, key="same-key")
    assert first.status_code == again.status_code == 200
    assert ReevaluationJob.objects.filter(redrive_of__isnull=False).count() == 2
    assert AuditEntry.objects.filter(action="reevaluation.redrive_execute").count() == 1
    strip = lambda s: s.replace(" <small>(replayed: nothing ran again)</small>", "")  # noqa: E731
    assert strip(again.content.decode()) == first.content.decode()
    assert "replayed" in again.content.decode()
    # A new key for a used preview is a conflict, shown as a toast; still nothing runs twice.
    used = execute_as(admin_web, world.clinic, preview_ref, key="other-key")
    assert used.status_code == 409 and used["HX-Reswap"] == "none"
    assert ReevaluationJob.objects.filter(redrive_of__isnull=False).count() == 2


def test_same_key_with_a_different_request_is_refused(admin_web, world):
    failed_jobs(world, 1)
    preview_as(admin_web, world.clinic, key="k")
    response = preview_as(admin_web, world.clinic, key="k", limit=3)
    assert response.status_code == 422 and RedrivePreview.objects.count() == 1


def test_replayed_preview_shows_the_same_preview(staff_web, world):
    failed_jobs(world, 1)
    first = preview_as(staff_web, world.clinic, key="p")
    again = preview_as(staff_web, world.clinic, key="p")
    assert RedrivePreview.objects.count() == 1
    assert hidden_or_attr(first.content.decode()) == hidden_or_attr(again.content.decode())


def hidden_or_attr(html: str) -> str:
    return re.search(r'data-preview="([^"]+)"', html).group(1)


def test_execute_a_preview_of_another_clinic_is_404(admin_web, admin, world, second_clinic_admin):
    failed_jobs(world, 1)
    preview = redrive_preview(clinic=world.clinic, actor=admin, reason="retry please", limit=5)
    response = execute_as(admin_web, second_clinic_admin, preview.preview_ref)
    assert response.status_code == 404
    assert RedrivePreview.objects.get().executed_at is None


@pytest.fixture
def second_clinic_admin(clinic, admin):
    from scheduling.models import Role
    from scheduling.services import clinic_grant_operate, clinic_grant_role
    from tests import factories as f

    other = f.ClinicFactory(name="Bundang Clinic", tenant_group=clinic.tenant_group)
    clinic_grant_role(clinic=other, user=admin, role=Role.ADMIN)
    clinic_grant_operate(clinic=other, user=admin)
    return other


def test_invalid_forms_are_shown_again_with_errors(admin_web, admin, world):
    response = admin_web.post(url("reevaluation-preview", world.clinic), {"reason": "x", "limit": 500}, **HX)
    html = response.content.decode()
    assert response.status_code == 200 and html.count('class="field-error"') == 2
    assert response["HX-Retarget"] == "#redrive-form"
    response = admin_web.post(url("reevaluation-execute", world.clinic), {"preview": "rpv_x", "reason": "x"}, **HX)
    assert response.status_code == 404  # an unknown preview, like another clinic's
    preview = RedrivePreview.objects.create(
        tenant_group=world.clinic.tenant_group, clinic=world.clinic, actor=admin, reason="r", limit=1,
        expires_at="2100-01-01T00:00Z",
    )
    response = admin_web.post(url("reevaluation-execute", world.clinic), {"preview": preview.ref, "reason": "x"}, **HX)
    assert response.status_code == 200 and 'class="field-error"' in response.content.decode()
    assert not AuditEntry.objects.exists()


def test_actor_in_the_body_changes_nothing(admin_web, admin, staff, world):
    failed_jobs(world, 1)
    forged = {"actor": staff.username, "actor_label": "someone-else", "actor_id": staff.pk}
    html = preview_as(admin_web, world.clinic, **forged).content.decode()
    execute_as(admin_web, world.clinic, hidden(html, "preview"), **forged)
    admin_web.post(
        url("reevaluation-mode", world.clinic),
        {"mode": "DRY_RUN", "reason": "rollout step", "confirm": "on", "idempotency_key": "m1", **forged},
        **HX,
    )
    entries = AuditEntry.objects.filter(action__startswith="reevaluation.")
    assert entries.count() == 3
    assert {(e.actor_id, e.actor_label) for e in entries} == {(admin.pk, "admin-user")}
    assert RedrivePreview.objects.get().actor == admin


# --- mode and drain -------------------------------------------------------------------------------


def test_admin_sets_mode_and_drain_with_a_reason_and_audit_rows(admin_web, admin, world):
    response = admin_web.post(
        url("reevaluation-mode", world.clinic),
        {"mode": "DRY_RUN", "reason": "rollout step 2", "confirm": "on", "idempotency_key": "m1"},
        **HX,
    )
    assert response.status_code == 200 and "Current: Trial run only" in response.content.decode()
    assert "reevaluation-changed" in json.loads(response["HX-Trigger"])
    response = admin_web.post(
        url("reevaluation-drain", world.clinic),
        {"state": "DRAINING", "reason": "maintenance", "confirm": "on", "idempotency_key": "d1"},
        **HX,
    )
    # Nothing runs, so DRAINING goes straight to DRAINED.
    assert response.status_code == 200 and "Current: Stopped" in response.content.decode()
    row = ClinicReevaluationSettings.objects.get(clinic=world.clinic)
    assert (row.mutation_mode, row.drain_state) == ("DRY_RUN", "DRAINED")
    entries = AuditEntry.objects.filter(clinic_ref=world.clinic.ref).order_by("pk")
    assert [(e.action, e.actor_id, e.reason) for e in entries] == [
        ("reevaluation.mode_set", admin.pk, "rollout step 2"),
        ("reevaluation.drain_set", admin.pk, "maintenance"),
    ]
    # The audit log page shows them.
    audit_html = admin_web.get(reverse("console:audit", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    assert "reevaluation.mode_set" in audit_html and "reevaluation.drain_set" in audit_html


def test_switch_replay_and_conflicts(admin_web, world):
    data = {"mode": "DRY_RUN", "reason": "rollout step", "confirm": "on", "idempotency_key": "m1"}
    admin_web.post(url("reevaluation-mode", world.clinic), data, **HX)
    admin_web.post(url("reevaluation-mode", world.clinic), data, **HX)
    assert AuditEntry.objects.filter(action="reevaluation.mode_set").count() == 1
    assert CommandReceipt.objects.filter(key="m1").count() == 1
    # A move the server refuses is not offered, and posting it anyway is a field error (no change).
    bad = admin_web.post(
        url("reevaluation-drain", world.clinic),
        {"state": "DRAINED", "reason": "skip draining", "confirm": "on", "idempotency_key": "d1"},
        **HX,
    )
    assert bad.status_code == 200 and 'class="field-error"' in bad.content.decode()
    assert ClinicReevaluationSettings.objects.get(clinic=world.clinic).drain_state == "ACTIVE"
    invalid = admin_web.post(url("reevaluation-mode", world.clinic), {"mode": "YOLO", "reason": "r"}, **HX)
    assert invalid.status_code == 200 and 'class="field-error"' in invalid.content.decode()


def test_staff_cannot_switch(staff_web, world):
    for name, field, value in (("reevaluation-mode", "mode", "DRY_RUN"), ("reevaluation-drain", "state", "DRAINING")):
        data = {field: value, "reason": "let me try", "confirm": "on", "idempotency_key": "s1"}
        assert staff_web.post(url(name, world.clinic), data).status_code == 403
    assert not ClinicReevaluationSettings.objects.filter(clinic=world.clinic).exists()
    assert not AuditEntry.objects.exists()


# --- query counts ---------------------------------------------------------------------------------


@pytest.mark.parametrize("jobs", [3, 40])
def test_page_query_count_does_not_grow_with_jobs(staff_web, world, jobs, django_assert_num_queries):
    failed_jobs(world, 2)
    rf.bulk_jobs(world.clinic, jobs)
    quarantine_cases(world.clinic, 12)
    # session, user, clinic_for_user, switcher, then the snapshot: state counts, aggregates, claim
    # latency, settings, quarantine count, actionable FAILED per class, action queue page, quarantine
    # page, recent changes (the switches' allowed moves come from the snapshot), live proposals (issue 28).
    with django_assert_num_queries(14):
        response = staff_web.get(page_url(world.clinic))
    assert len(queue_refs(response.content.decode())) == min(jobs + 2, 20)


def _subplan_loops(plan: dict) -> list[int]:
    """How many times each subquery node of an EXPLAIN ANALYZE (FORMAT JSON) plan ran."""
    own = [plan["Actual Loops"]] if plan.get("Parent Relationship") == "SubPlan" else []
    return own + [n for child in plan.get("Plans", []) for n in _subplan_loops(child)]


def test_queue_reads_per_row_only_for_the_rows_shown(admin_web, world):
    """The rank (which the sort needs for every queued job) reads redrives through one hashed set; the
    parent's and the child's refs are read only for the page's rows (a correlated subquery per queued
    job made the planner's estimate cross ``jit_above_cost`` on a 10k-job clinic: JIT was over half the
    page's time). The rows still show the lineage both ways, and redriven parents still sort last."""
    jobs = failed_jobs(world, 3)
    rf.bulk_jobs(world.clinic, 60)
    html = preview_as(admin_web, world.clinic, limit=2).content.decode()
    assert execute_as(admin_web, world.clinic, hidden(html, "preview"), key=hidden(html, "idempotency_key")
                      ).status_code == 200
    children = {c.redrive_of_id: c.ref for c in ReevaluationJob.objects.filter(redrive_of__isnull=False)}
    rows = selectors.action_queue(clinic=world.clinic, limit=200)
    by_ref = {row["job"]: row for row in rows}
    for parent in jobs[:2]:
        assert by_ref[parent.ref]["redriven_as"] == children[parent.pk]
        assert by_ref[children[parent.pk]]["redrive_of"] == parent.ref
    assert by_ref[jobs[2].ref]["redriven_as"] is None and by_ref[jobs[2].ref]["redrive_of"] is None
    assert [row["job"] for row in rows][-2:] == sorted([p.ref for p in jobs[:2]], key=lambda r: (
        by_ref[r]["due_at"], r))  # priority classes equal here: the redriven parents rank last
    with CaptureQueriesContext(connection) as ctx:
        page = selectors.action_queue(clinic=world.clinic, limit=10)
    with connection.cursor() as c:
        c.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + ctx.captured_queries[-1]["sql"])
        plan = c.fetchone()[0]
        plan = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    loops = _subplan_loops(plan)
    assert len(page) == 10 and loops and max(loops) <= 10, loops


@pytest.mark.parametrize("jobs", [25, 60])
def test_fragment_query_counts_are_constant(staff_web, world, jobs, django_assert_num_queries):
    rf.bulk_jobs(world.clinic, jobs)
    html = staff_web.get(page_url(world.clinic)).content.decode()
    # session, user, clinic_for_user, cursor anchor, one page
    with django_assert_num_queries(5):
        staff_web.get(page_url(world.clinic, after=cursor(html)), **HX)
    job = ReevaluationJob.objects.filter(clinic=world.clinic).first()
    # session, user, clinic_for_user, job, latest outcome, lineage children
    with django_assert_num_queries(6):
        staff_web.get(url("reevaluation-job", world.clinic, job_ref=job.ref), **HX)


def test_the_page_links_to_finished_jobs_and_the_completed_counter_opens_them(staff_web, world):
    """After `make demo-event` the job is COMPLETED: its outcome is one click away, on the finished list."""
    from django.utils import timezone

    done = post_event(world, rf.fingerprint(f"{world.crm_ref}-done"), 1).job_ref
    ReevaluationJob.objects.filter(ref=done).update(state=JobState.COMPLETED, finished_at=timezone.now(),
                                                    outcome_counts={"SKIPPED_UNCHANGED": 1})
    html = staff_web.get(page_url(world.clinic)).content.decode()
    finished = url("reevaluation-finished", world.clinic)
    assert f'href="{finished}" data-testid="finished-link"' in html
    link = re.search(r'data-count="COMPLETED"><a href="([^"]+)"', html).group(1)
    assert link == f"{finished}?status=COMPLETED"
    listed = staff_web.get(link).content.decode()
    assert done in listed and "SKIPPED_UNCHANGED" in listed

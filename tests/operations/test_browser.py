"""The console in a real browser: Debian's Chromium driven by the Playwright Python package.

The browser fixtures live in ``tests/operations/browser_support.py`` and are registered once by the
package's conftest, so every browser test module in a process shares one Playwright session.
Screenshots go to ``test-artifacts/screenshots/`` (git-ignored). Run just these with ``pytest -m browser``.
"""

from __future__ import annotations

import re

import pytest

from tests.operations.browser_support import TABLET, shot, sign_in, sync_api
from tests.operations.conftest import make_audit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_staff_sees_their_clinic_and_audit_log_but_not_another_clinic(
    open_page, staff, clinic, other_tenant_clinic, settings
):
    settings.CONSOLE_AUDIT_PAGE_SIZE = 5
    make_audit(clinic, 8)
    make_audit(other_tenant_clinic, 2, action="foreign.secret")
    page = open_page()
    shot_prefix = "staff"

    page.goto("/console/login/")
    shot(page, f"{shot_prefix}-1-login")
    sign_in(page, staff.username)
    assert page.url.endswith(f"/console/c/{clinic.ref}/")
    sync_api.expect(page.locator("h1")).to_have_text("Gangnam Clinic")
    shot(page, f"{shot_prefix}-2-clinic-home")

    page.click("nav.sections >> text=Audit log")
    page.wait_for_url(re.compile(r"/audit/$"))
    rows = page.locator("#audit-rows tr[data-ref]")
    sync_api.expect(rows).to_have_count(5)
    # htmx (under the CSP) appends the next keyset page in place and shows the end-of-log toast.
    page.click("text=Load more")
    sync_api.expect(rows).to_have_count(8)
    sync_api.expect(page.get_by_test_id("toast")).to_contain_text("oldest entry")
    sync_api.expect(page.locator("text=Load more")).to_have_count(0)
    assert "foreign.secret" not in page.content()
    shot(page, f"{shot_prefix}-3-audit-log")

    # The htmx filter swaps only the results and pushes the URL.
    page.fill("#id_action", "nothing.matches")
    page.click("button:has-text('Filter')")
    sync_api.expect(page.locator("#audit-results")).to_contain_text("No audit entries for this action")
    assert "action=nothing.matches" in page.url

    response = page.goto(f"/console/c/{other_tenant_clinic.ref}/")
    assert response.status == 404
    sync_api.expect(page.locator("h1")).to_have_text("Not found")
    assert "Elsewhere Clinic" not in page.content()
    shot(page, f"{shot_prefix}-4-other-clinic-404")
    assert page.errors == []  # no CSP violations, no script errors

    page.click("button:has-text('Sign out')")
    page.wait_for_url(re.compile(r"/console/login/$"))


def test_outsider_sees_none_of_the_clinic(open_page, outsider, clinic, other_tenant_clinic):
    make_audit(clinic, 3)
    page = open_page()
    sign_in(page, outsider.username)
    assert page.url.endswith(f"/console/c/{other_tenant_clinic.ref}/")
    for path in (f"/console/c/{clinic.ref}/", f"/console/c/{clinic.ref}/audit/"):
        response = page.goto(path)
        assert response.status == 404
        assert "Gangnam Clinic" not in page.content() and clinic.ref not in page.content()
    shot(page, "outsider-404")
    assert page.errors == []


def test_switcher_lists_only_the_users_clinics(open_page, staff, clinic, second_clinic, other_tenant_clinic):
    page = open_page(TABLET)
    sign_in(page, staff.username)
    page.click("[data-testid=clinic-switcher] summary")
    options = page.locator("[data-testid=clinic-switcher] li a")
    sync_api.expect(options).to_have_text(["Bundang Clinic", "Gangnam Clinic"])
    shot(page, "switcher-tablet")
    page.click("[data-testid=clinic-switcher] li a >> text=Bundang Clinic")
    page.wait_for_url(re.compile(rf"/console/c/{second_clinic.ref}/$"))
    sync_api.expect(page.locator("h1")).to_have_text("Bundang Clinic")
    # A tablet-width page does not scroll sideways: the layout fits.
    assert page.evaluate("document.documentElement.scrollWidth") <= TABLET["width"]
    assert page.errors == []


def _reevaluation_world(clinic, failed: int = 2) -> list[str]:
    """FAILED jobs (still their scope's head) and one PENDING job, through signed intake."""
    from reevaluation.models import JobState, ReevaluationJob
    from tests.reevaluation import factories as rf
    from tests.reevaluation.conftest import post_event

    refs = [post_event(clinic, rf.fingerprint(f"browser-{clinic.pk}-{i}"), 1).job_ref for i in range(failed)]
    ReevaluationJob.objects.filter(ref__in=refs).update(
        state=JobState.FAILED, attempts=5, last_failure_code="ASSESSMENT_TIMEOUT"
    )
    post_event(clinic, rf.fingerprint(f"browser-{clinic.pk}-pending"), 1)
    return refs


def _preview(page, reason: str = "CRM outage is over") -> None:
    page.fill("#preview_reason", reason)
    page.click("button:has-text('Preview')")
    sync_api.expect(page.get_by_test_id("redrive-result")).to_contain_text("would be redriven")


def test_staff_reads_the_reevaluation_page_and_previews_but_cannot_execute(open_page, staff, clinic):
    failed = _reevaluation_world(clinic)
    page = open_page()
    sign_in(page, staff.username)
    page.click("nav.sections >> text=Reevaluation")
    page.wait_for_url(re.compile(r"/reevaluation/$"))
    sync_api.expect(page.locator("#queue-rows tr[data-job]")).to_have_count(3)
    sync_api.expect(page.locator("[data-count=FAILED]")).to_have_text("2")
    mode = page.get_by_test_id("mode-readonly").locator("[data-code]")
    sync_api.expect(mode).to_have_attribute("data-code", "DISABLED")
    sync_api.expect(page.get_by_test_id("mode-readonly")).to_contain_text("Reevaluation off")
    # Clicking a row (not only its link) loads the detail panel with htmx.
    page.click(f"#queue-rows tr[data-job='{failed[0]}'] td:nth-child(2)")
    sync_api.expect(page.get_by_test_id("job-detail")).to_contain_text("ASSESSMENT_TIMEOUT")
    assert page.url.endswith("/reevaluation/")  # no navigation: a partial swap
    _preview(page)
    result = page.get_by_test_id("redrive-result")
    for ref in failed:
        sync_api.expect(result).to_contain_text(ref)
    sync_api.expect(page.get_by_test_id("admin-only")).to_be_visible()
    sync_api.expect(page.locator("button:has-text('Execute redrive')")).to_have_count(0)
    sync_api.expect(page.locator("button:has-text('Set mode')")).to_have_count(0)
    shot(page, "reevaluation-staff-preview")
    assert page.errors == []


def test_admin_previews_executes_and_follows_the_lineage(open_page, admin, clinic):
    from reevaluation.models import ReevaluationJob

    failed = _reevaluation_world(clinic)
    page = open_page()
    sign_in(page, admin.username)
    page.goto(f"/console/c/{clinic.ref}/reevaluation/")
    _preview(page)
    shot(page, "reevaluation-admin-preview")
    page.check("#execute_confirm")
    # Every toast rendered is recorded: it lives 5 s, so on a loaded machine it may be gone by the time the
    # assertion looks for it in the page.
    page.evaluate("""() => { window.toastsShown = []; new MutationObserver((changes) => changes.forEach((c) =>
        c.addedNodes.forEach((n) => n.dataset && n.dataset.testid === "toast" && window.toastsShown.push(n.textContent))
    )).observe(document.getElementById("toasts"), {childList: true}); }""")
    page.click("button:has-text('Execute redrive')")
    execute_result = page.get_by_test_id("execute-result")
    sync_api.expect(execute_result).to_contain_text("Redriven 2, skipped 0")
    page.wait_for_function("() => window.toastsShown.some((text) => text.includes('Redriven 2'))")
    children = dict(
        ReevaluationJob.objects.filter(redrive_of__ref__in=failed).values_list("redrive_of__ref", "ref")
    )
    assert set(children) == set(failed)
    for parent, child in children.items():
        sync_api.expect(page.locator(f"li[data-parent='{parent}'][data-child='{child}']")).to_have_count(1)
    # The snapshot refreshed itself after the change: two new PENDING jobs.
    sync_api.expect(page.locator("[data-count=PENDING]")).to_have_text("3")
    child = children[failed[0]]
    page.click(f"li[data-child='{child}'] >> text={child}")
    detail = page.get_by_test_id("job-detail")
    sync_api.expect(detail).to_contain_text("redrive of")
    sync_api.expect(detail.locator(f"[data-lineage='{failed[0]}']")).to_have_count(1)
    shot(page, "reevaluation-admin-executed")
    # Mode switch with a reason (behind its disclosure); the snapshot shows the new mode.
    page.get_by_test_id("disclose-mode").locator("summary").click()
    page.select_option("#mode_mode", "DRY_RUN")
    page.fill("#mode_reason", "rollout step 2")
    page.check("#mode_confirm")
    page.click("button:has-text('Set mode')")
    mode = page.get_by_test_id("mutation-mode").locator("[data-code]")
    sync_api.expect(mode).to_have_attribute("data-code", "DRY_RUN")
    page.set_viewport_size(TABLET)
    shot(page, "reevaluation-admin-tablet")
    assert page.evaluate("document.documentElement.scrollWidth") <= TABLET["width"]
    assert page.errors == []

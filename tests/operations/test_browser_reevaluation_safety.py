"""The reevaluation safety flows in a real browser: redrive by failure class (leave-out and the
separate confirmation), the automatic-drain banner, and mode/drain forms that offer only allowed moves."""

from __future__ import annotations

import uuid

import pytest

from reevaluation.models import ClinicReevaluationSettings, JobState, ReevaluationJob
from tests.operations.browser_support import shot, sign_in, sync_api
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
expect = sync_api.expect


def _failed(clinic, code: str, n: int) -> list[str]:
    refs = [post_event(clinic, rf.fingerprint(f"bsafe-{clinic.pk}-{code}-{i}"), 1).job_ref for i in range(n)]
    ReevaluationJob.objects.filter(ref__in=refs).update(state=JobState.FAILED, attempts=5, last_failure_code=code)
    return sorted(refs, key=lambda ref: ReevaluationJob.objects.get(ref=ref).pk)


def _page(open_page, user, clinic):
    page = open_page()
    sign_in(page, user.username)
    page.goto(f"/console/c/{clinic.ref}/reevaluation/")
    return page


def test_admin_redrives_by_failure_class_and_leaves_out_a_job(open_page, admin, clinic):
    transient = _failed(clinic, "ASSESSMENT_TIMEOUT", 2)
    [contract] = _failed(clinic, "ASSESSMENT_HASH_MISMATCH", 1)
    page = _page(open_page, admin, clinic)
    expect(page.locator("[data-count=FAILED]")).to_have_text("3")
    # Default PREVIEW: TRANSIENT only, with counts per class, its lifetime and the exact targets.
    page.fill("#preview_reason", "CRM outage is over")
    page.click("button:has-text('Preview')")
    result = page.get_by_test_id("redrive-result")
    expect(result.locator("[data-class-count=TRANSIENT]")).to_have_text("2")
    expect(result.locator("[data-class-count=CONTRACT]")).to_have_text("1")
    expect(page.get_by_test_id("non-transient-note")).to_be_visible()
    expect(page.get_by_test_id("preview-lifetime")).to_contain_text("15m")
    expect(result.locator("li[data-target]")).to_have_count(2)
    assert contract not in result.inner_text()
    shot(page, "reevaluation-class-preview")
    # Leave out the second job, then execute.
    page.check(f"input[name=exclude][value='{transient[1]}']")
    page.fill("#execute_reason", "CRM outage is over")
    page.check("#execute_confirm")
    page.click("button:has-text('Execute redrive')")
    expect(page.get_by_test_id("execute-result")).to_contain_text("Redriven 1, skipped 0, left out 1")
    # The queue marks the redriven job with its child; FAILED counts what is still actionable.
    expect(page.locator(f"#queue-rows tr[data-job='{transient[0]}'] [data-testid=redriven-as]")).to_contain_text(
        "Run again as"
    )
    expect(page.locator("[data-count=FAILED]")).to_have_text("2")
    expect(page.get_by_test_id("failed-settled")).to_contain_text("+1")
    shot(page, "reevaluation-class-executed")

    # CONTRACT failures: an explicit choice at PREVIEW, then their own confirmation at EXECUTE.
    page.uncheck("#preview_failure_classes_0")
    page.check("#preview_failure_classes_1")
    page.fill("#preview_reason", "hash mismatch explained by the CRM")
    page.click("button:has-text('Preview')")
    expect(page.locator("#redrive-form .field-error")).to_contain_text("never redriven by default")
    page.check("#preview_include_non_transient")
    page.click("button:has-text('Preview')")
    expect(page.get_by_test_id("non-transient-warning")).to_be_visible()
    page.fill("#execute_reason", "hash mismatch explained by the CRM")
    page.check("#execute_confirm")
    page.click("button:has-text('Execute redrive')")
    # The separate confirmation is required: the form is not sent without it.
    second = page.locator("#execute_confirm_non_transient")
    assert second.evaluate("el => el.validity.valueMissing") is True
    assert not ReevaluationJob.objects.filter(redrive_of__ref=contract).exists()
    page.check("#execute_confirm_non_transient")
    page.click("button:has-text('Execute redrive')")
    expect(page.get_by_test_id("execute-result")).to_contain_text("Redriven 1")
    assert ReevaluationJob.objects.filter(redrive_of__ref=contract).exists()
    shot(page, "reevaluation-class-contract")
    assert page.errors == []


def test_an_automatic_drain_shows_a_banner_until_an_admin_resumes(open_page, admin, clinic, settings):
    settings.REEVALUATION_AUTO_DRAIN_QUARANTINE_THRESHOLD = 1
    rf.enable(clinic, "DRY_RUN")
    for i in range(2):
        # An event id used again with another body: quarantined (EVENT_ID_REUSED), counted toward the threshold.
        # (One PRIVACY_BOUNDARY case from a signed source stops the clinic at once: another banner.)
        fp, event_id = rf.fingerprint(f"banner-{uuid.uuid4().hex}-{i}"), f"banner-{uuid.uuid4().hex}"
        post_event(clinic, fp, 1, eventId=event_id)
        with pytest.raises(Exception):  # noqa: B017 - a refused (quarantined) event
            post_event(clinic, fp, 2, eventId=event_id)
    page = _page(open_page, admin, clinic)
    banner = page.get_by_test_id("auto-drain-banner")
    expect(banner).to_contain_text("quarantine repeated")
    expect(banner).to_contain_text("EVENT_ID_REUSED")
    expect(page.get_by_test_id("drain-state").locator("[data-code]")).to_have_attribute("data-code", "DRAINED")
    shot(page, "reevaluation-auto-drain-banner")
    # The drain form (behind its disclosure) offers the only move the server accepts from DRAINED: ACTIVE.
    page.get_by_test_id("disclose-drain").locator("summary").click()
    page.select_option("#drain_state", "ACTIVE")
    page.fill("#drain_reason", "payload fixed by the CRM team")
    page.check("#drain_confirm")
    page.click("button:has-text('Set drain state')")
    expect(page.get_by_test_id("drain-state").locator("[data-code]")).to_have_attribute("data-code", "ACTIVE")
    expect(page.get_by_test_id("auto-drain-banner")).to_have_count(0)
    assert ClinicReevaluationSettings.objects.get(clinic=clinic).drain_cause == ""
    assert page.errors == []


def test_mode_and_drain_forms_start_on_the_current_value_and_offer_only_allowed_moves(
    open_page, admin, clinic
):
    rf.enable(clinic, "DRY_RUN")
    page = _page(open_page, admin, clinic)
    page.get_by_test_id("disclose-mode").locator("summary").click()
    page.get_by_test_id("disclose-drain").locator("summary").click()
    mode = page.locator("#mode_mode")
    expect(mode).to_have_value("DRY_RUN")
    options = mode.locator("option")
    expect(options).to_have_text(["Trial run only (current)", "Reevaluation off", "Change proposed visits"])
    expect(mode.locator("option[value=DRY_RUN]")).to_be_disabled()
    drain = page.locator("#drain_state")
    expect(drain).to_have_value("ACTIVE")
    expect(drain.locator("option")).to_have_text(["Active (current)", "Stopping"])
    # Submitting without choosing a move is refused with a field error and changes nothing.
    page.fill("#mode_reason", "just clicking")
    page.check("#mode_confirm")
    page.click("button:has-text('Set mode')")
    expect(page.locator("#mode_mode ~ .field-error, [data-testid=reason-confirm] .field-error").first).to_be_visible()
    assert ClinicReevaluationSettings.objects.get(clinic=clinic).mutation_mode == "DRY_RUN"
    # One step forward: the form then starts on the new value and offers its moves.
    page.select_option("#mode_mode", "APPLY_PROPOSED")
    page.fill("#mode_reason", "rollout step 3")
    page.check("#mode_confirm")
    page.click("button:has-text('Set mode')")
    expect(page.get_by_test_id("mutation-mode").locator("[data-code]")).to_have_attribute("data-code", "APPLY_PROPOSED")
    expect(page.locator("#mode_mode")).to_have_value("APPLY_PROPOSED")
    expect(page.locator("#mode_mode option")).to_have_text(
        ["Change proposed visits (current)", "Reevaluation off", "Trial run only", "Change proposed and held visits"]
    )
    shot(page, "reevaluation-switches")
    assert page.errors == []


def test_at_390_px_the_queue_changes_and_quarantine_are_cards_that_fit_the_phone(open_page, staff, clinic):
    """Phone: each queue, change and quarantine row is a card of label/value pairs (as the audit log's):
    nothing in ``main`` is wider than the screen, so nothing scrolls sideways."""
    from reevaluation.models import QuarantineCase

    _failed(clinic, "ASSESSMENT_TIMEOUT", 2)
    rf.bulk_jobs(clinic, 3)
    for i in range(2):
        QuarantineCase.objects.create(
            reason_code="ASSESSMENT_HASH_MISMATCH", category="CONTRACT", evidence_digest=f"{i:02d}" + "ab" * 31,
            clinic=clinic, tenant_group=clinic.tenant_group,
        )
    page = open_page({"width": 390, "height": 844})
    sign_in(page, staff.username)
    page.goto(f"/console/c/{clinic.ref}/reevaluation/")
    fit = page.evaluate("""() => {
      const wide = el => el.getBoundingClientRect().right > document.documentElement.clientWidth + 1;
      return {
        page: document.documentElement.scrollWidth,
        overflowing: Array.from(document.querySelectorAll('main td, main th, main table'))
          .filter(el => el.offsetParent !== null && wide(el))
          .map(el => el.tagName + ':' + el.textContent.trim().slice(0, 30)),
      };
    }""")
    assert fit == {"page": 390, "overflowing": []}, fit
    # Each value is introduced by its column's name (the header row is hidden on a phone).
    first = page.locator("table.queue tbody tr[data-job]").first
    expect(first.locator("td[data-label=State]")).to_be_visible()
    label = first.locator("td[data-label=State]").evaluate("el => getComputedStyle(el, '::before').content")
    assert label == '"State"'
    expect(page.locator("table.quarantine tr[data-case] td[data-label='Reason code']")).to_have_count(2)
    expect(page.locator("table.queue thead")).to_be_hidden()
    shot(page, "console-reevaluation-phone")

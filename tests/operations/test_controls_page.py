"""The waitlist controls page: everyone in scope reads it, only ADMIN change the switch and the policy."""

from __future__ import annotations

import json

from common.models import AuditEntry
from scheduling.services.features import feature_enabled
from waitlist import services
from waitlist.models import WaitlistPolicy

PAGE = "/console/c/{}/controls/"


def _post(client, url, *, htmx=False, **fields):
    body = {"reason": "because of the drill", "confirm": "on", "idempotency_key": fields.pop("key", "key-1"), **fields}
    return client.post(url, body, headers={"HX-Request": "true"} if htmx else {})


def test_the_page_shows_the_switch_state_and_the_current_policy(clinic, staff_web):
    policy = services.policy_current(clinic=clinic)
    html = staff_web.get(PAGE.format(clinic.ref)).content.decode()
    assert 'data-testid="switch-effective">OFF' in html
    assert policy.digest()[:16] in html and 'data-field="hold_minutes"' in html
    assert "reason-confirm" not in html  # STAFF see no forms


def test_staff_cannot_post_a_switch(clinic, staff_web):
    response = _post(staff_web, PAGE.format(clinic.ref) + "switch/", state="on")
    assert response.status_code == 403 and not AuditEntry.objects.exists()


def test_an_admin_allowlists_the_tenant_from_the_console(clinic, admin_web):
    response = _post(admin_web, PAGE.format(clinic.ref) + "allowlist/", state="on", htmx=True)
    assert response.status_code == 200 and response["HX-Retarget"] == "#controls-panel"
    assert feature_enabled("waitlist", clinic)
    assert AuditEntry.objects.get().reason == "because of the drill"


def test_a_double_submit_of_the_switch_acts_once(clinic, admin_web):
    for _ in range(2):
        _post(admin_web, PAGE.format(clinic.ref) + "switch/", state="off", key="same-key")
    assert AuditEntry.objects.count() == 1


def test_an_admin_publishes_a_policy_version_from_the_model_form(clinic, admin_web):
    current = services.policy_current(clinic=clinic)
    fields = {name: ("" if getattr(current, name) is None else getattr(current, name))
              for name in WaitlistPolicy.editable_fields()}
    fields.update(hold_minutes=7, expected_version=current.version)
    html = _post(admin_web, PAGE.format(clinic.ref) + "policy/", **fields).content.decode()
    new = services.policy_current(clinic=clinic)
    assert new.version == current.version + 1 and new.hold_minutes == 7
    assert new.digest()[:16] in html


def test_an_invalid_policy_value_shows_the_field_error_and_publishes_nothing(clinic, admin_web):
    current = services.policy_current(clinic=clinic)
    html = _post(admin_web, PAGE.format(clinic.ref) + "policy/", hold_minutes=0, min_lead_minutes=10,
                 stale_action="STAFF_REVIEW", unavailable_action="STAFF_REVIEW", decline_suppression_hours=1,
                 expected_version=current.version).content.decode()
    assert "field-error" in html
    assert services.policy_current(clinic=clinic).version == current.version


def test_the_page_lists_consent_changes_as_states_without_contact_data(clinic, staff_web):
    from scheduling.models import ConsentSource, ConsentState, ContactChannel
    from scheduling.services import consent_record
    from tests import factories as f
    from tests.conftest import assert_no_pii

    patient = f.PatientFactory(clinic=clinic)
    consent_record(patient=patient, channels=[ContactChannel.SMS], state=ConsentState.REVOKED,
                   source=ConsentSource.OPT_OUT_LINK, actor_label="patient")
    html = staff_web.get(PAGE.format(clinic.ref)).content.decode()
    assert patient.ref in html and "REVOKED" in html and "OPT_OUT_LINK" in html
    assert_no_pii(html, [patient])


def test_the_page_says_only_the_patients_new_consent_reverses_their_opt_out(clinic, staff_web):
    html = staff_web.get(PAGE.format(clinic.ref)).content.decode()
    assert 'data-testid="consent-rule"' in html and "PATIENT_CONSENT" in html and "CONSENT_OPTED_OUT" in html


# --- the shadow policy: ADMIN promotes it to ENFORCE or discards it --------------------------------


def _shadow(clinic, admin, **changes):
    return services.shadow_publish(clinic=clinic, actor=admin, reason="try a tighter cap",
                                   changes=changes or {"weekly_offer_cap": 1})


def test_the_page_previews_a_shadow_promote_and_only_admins_see_the_buttons(clinic, admin, staff_web, admin_web):
    shadow = _shadow(clinic, admin)
    staff_html = staff_web.get(PAGE.format(clinic.ref)).content.decode()
    assert shadow.ref in staff_html and 'data-code="SHADOW">Observing <code' in staff_html
    assert 'data-testid="shadow-preview"' in staff_html and 'data-field="weekly_offer_cap"' in staff_html
    assert "/shadow/" not in staff_html  # STAFF see no promote or discard form
    admin_html = admin_web.get(PAGE.format(clinic.ref)).content.decode()
    assert f"/controls/shadow/{shadow.ref}/promote/" in admin_html
    assert f"/controls/shadow/{shadow.ref}/discard/" in admin_html


def test_an_admin_promotes_the_shadow_to_a_new_audited_policy_version(clinic, admin, admin_web):
    shadow = _shadow(clinic, admin)
    before = services.policy_current(clinic=clinic).version
    url = PAGE.format(clinic.ref) + f"shadow/{shadow.ref}/promote/"
    response = _post(admin_web, url, htmx=True, key="promote-1")
    assert response.status_code == 200 and response["HX-Retarget"] == "#controls-panel"
    policy = services.policy_current(clinic=clinic)
    assert policy.version == before + 1 and policy.weekly_offer_cap == 1
    audit = AuditEntry.objects.get(action="waitlist.shadow_policy_promote")
    assert audit.actor == admin and audit.reason == "because of the drill" and audit.target_ref == shadow.ref
    html = response.content.decode()
    assert 'data-code="PROMOTED"><code class="code">PROMOTED</code>' in html
    assert "promote/" not in html  # decided: no more buttons
    _post(admin_web, url, htmx=True, key="promote-1")  # a double submit replays, nothing runs again
    assert services.policy_current(clinic=clinic).version == before + 1
    assert AuditEntry.objects.filter(action="waitlist.shadow_policy_promote").count() == 1


def test_an_admin_discards_the_shadow_and_the_policy_stays(clinic, admin, admin_web):
    shadow = _shadow(clinic, admin)
    before = services.policy_current(clinic=clinic).version
    _post(admin_web, PAGE.format(clinic.ref) + f"shadow/{shadow.ref}/discard/", htmx=True)
    shadow.refresh_from_db()
    assert shadow.status == "DISCARDED" and services.policy_current(clinic=clinic).version == before
    assert AuditEntry.objects.get(action="waitlist.shadow_policy_discard").reason == "because of the drill"


def test_promote_needs_admin_a_reason_and_the_confirmation(clinic, admin, staff_web, admin_web):
    shadow = _shadow(clinic, admin)
    url = PAGE.format(clinic.ref) + f"shadow/{shadow.ref}/promote/"
    assert _post(staff_web, url).status_code == 403
    unconfirmed = admin_web.post(url, {"reason": "because of the drill", "idempotency_key": "k"})
    assert "field-error" in unconfirmed.content.decode()
    assert admin_web.post(url, {"reason": "", "confirm": "on", "idempotency_key": "k2"}).status_code == 200
    shadow.refresh_from_db()
    decided = ("waitlist.shadow_policy_promote", "waitlist.shadow_policy_discard")
    assert shadow.status == "SHADOW" and not AuditEntry.objects.filter(action__in=decided).exists()


def test_a_second_decision_is_a_refusal_toast(clinic, admin, admin_web):
    shadow = _shadow(clinic, admin)
    services.shadow_discard(clinic=clinic, shadow_ref=shadow.ref, actor=admin, reason="no")
    response = _post(admin_web, PAGE.format(clinic.ref) + f"shadow/{shadow.ref}/promote/", htmx=True)
    toast = json.loads(response["HX-Trigger"])["console-toast"]
    assert toast["level"] == "error" and "SHADOW_NOT_ACTIVE" in toast["message"]

"""Contact consent: an opted-out or unconsented patient is never offered; no notice on a revoked channel; the
opt-out link works without signing in, is recorded as history (never deleted) and shown to staff as a state."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from common.models import DeliveryOutcome, OutboxMessage
from scheduling.models import ConsentSource, ConsentState, ContactChannel, ContactConsent
from scheduling.services import consent_current, consent_record
from tests.conftest import assert_no_pii, seoul, token_client
from tests.support.servers import smtp_sink
from tests.waitlist.loop_helpers import deliver, mail_text, make_offer, open_vacancy, page_client, submit
from waitlist import services
from waitlist.dispatch import matcher
from waitlist.offers.tokens import optout_link

OPTOUT = re.compile(r"https?://[^\s]+(/optout/[^/\s]+/)")


def _revoke(patient, channels=ContactChannel.values):
    consent_record(patient=patient, channels=channels, state=ConsentState.REVOKED, source=ConsentSource.STAFF,
                   actor_label="staff-user")


def _optout_path(patient) -> str:
    return OPTOUT.search(optout_link(patient)).group(1)


def test_an_opted_out_patient_is_never_offered(world):
    opted_out = world.patient()
    top = world.waiting(opted_out, priority_rank=9)
    other = world.waiting(priority_rank=1)
    submit(page_client(), _optout_path(opted_out), "stop")
    vacancy = open_vacancy(world, seoul(3, 10))
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.offer.entry_id == other.pk
    assert (top.ref, "NO_CONTACT_CONSENT") in [p[1:] for p in result.stats.passed_over]


def test_a_patient_who_never_consented_is_passed_over_with_a_reason(world):
    entry = world.waiting(world.patient(consent=False))
    vacancy = open_vacancy(world, seoul(3, 10))
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "NO_CANDIDATE"
    assert [p[1:] for p in result.stats.passed_over] == [(entry.ref, "NO_CONTACT_CONSENT")]
    from waitlist.models import DispatchNote

    note = DispatchNote.objects.get(vacancy=vacancy)  # recorded, so the vacancy panel can say why
    assert (note.entry_id, note.reason_code) == (entry.pk, "NO_CONTACT_CONSENT")


def test_promotion_recheck_names_missing_consent(world):
    entry = world.waiting()
    vacancy = open_vacancy(world, seoul(3, 10))
    _revoke(entry.patient)
    policy = services.policy_current(clinic=world.clinic)
    assert matcher.ineligibility(entry=entry, vacancy=vacancy, policy=policy, now=seoul(1, 9)) == "NO_CONTACT_CONSENT"


def test_an_email_clinic_needs_email_consent(world):
    world.clinic.settings = {"notification": {"provider": "email"}}
    world.clinic.save(update_fields=["settings"])
    sms_only = world.waiting(world.patient(consent=[ContactChannel.SMS]), priority_rank=9)
    emailable = world.waiting(world.patient(consent=[ContactChannel.EMAIL]))
    vacancy = open_vacancy(world, seoul(3, 10))
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.offer.entry_id == emailable.pk
    assert (sms_only.ref, "NO_CONTACT_CONSENT") in [p[1:] for p in result.stats.passed_over]


def test_no_notice_is_sent_on_a_channel_revoked_after_the_offer(world):
    offer = make_offer(world)
    _revoke(offer.patient)
    assert deliver() == {DeliveryOutcome.SENT: 1}  # finished as skipped, not sent
    assert OutboxMessage.objects.get().last_error_code == "CONSENT_REVOKED"


@pytest.fixture
def smtp(settings):
    with smtp_sink() as (host, port, sink):
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
        yield sink


def test_every_notice_carries_an_opt_out_link_that_works_without_signing_in(world, smtp):
    world.clinic.settings = {"notification": {"provider": "email"}}
    world.clinic.save(update_fields=["settings"])
    patient = world.patient(email="mina@patients.example", language="ko")
    make_offer(world, patient)
    assert deliver() == {DeliveryOutcome.SENT: 1}
    assert smtp.received.wait(5)
    path = OPTOUT.search(mail_text(smtp.messages[0]["data"])).group(1)
    client = page_client()
    page = client.get(path)
    assert page.status_code == 200 and page["Content-Language"] == "ko"
    assert ContactConsent.objects.filter(state=ConsentState.REVOKED).count() == 0  # a GET changes nothing
    done = submit(client, path, "stop")
    assert done.status_code == 200
    assert_no_pii(page.content.decode() + done.content.decode(), [patient])
    assert consent_current(patient.pk) == {"EMAIL": "REVOKED", "SMS": "REVOKED"}


def test_opting_out_appends_history_and_keeps_the_earlier_rows(world):
    patient = world.patient()
    path = _optout_path(patient)
    client = page_client()
    submit(client, path, "stop")
    assert "no more messages" in client.get(path).content.decode()  # the page now shows the state
    client.cookies.clear()
    assert Client().post(path).status_code == 200  # again (no CSRF checks here): no new rows
    rows = list(ContactConsent.objects.filter(patient=patient).order_by("id").values_list("state", "source"))
    assert rows == [("GRANTED", "IMPORT")] * 2 + [("REVOKED", "OPT_OUT_LINK")] * 2
    with pytest.raises(TypeError):
        ContactConsent.objects.filter(patient=patient).delete()


def test_a_forged_opt_out_token_is_a_plain_404(world):
    assert page_client().get("/optout/forged-token/").status_code == 404


def test_staff_see_consent_as_a_state_without_contact_data(world):
    patient = world.patient()
    _revoke(patient, [ContactChannel.SMS])
    body = token_client(world.staff).get(f"/api/v1/clinics/{world.clinic.ref}/patients/{patient.ref}/consent")
    assert body.status_code == 200
    assert body.json()["current"] == {"EMAIL": "GRANTED", "SMS": "REVOKED"}
    assert body.json()["history"][0]["source"] == "STAFF"
    assert_no_pii(body.content.decode(), [patient])


def test_the_consent_api_records_a_change_with_source_api(world):
    patient = world.patient(consent=False)
    response = token_client(world.staff).post(
        f"/api/v1/clinics/{world.clinic.ref}/patients/{patient.ref}/consent",
        {"channels": ["EMAIL"], "state": "GRANTED"}, format="json")
    assert response.status_code == 200 and response.json()["current"]["EMAIL"] == "GRANTED"
    row = ContactConsent.objects.get(patient=patient)
    assert row.source == "API" and row.actor == world.staff.username


def test_another_tenants_patient_consent_is_404_like_a_missing_one(world, other_tenant_clinic):
    from tests import factories as f

    foreign = f.PatientFactory(clinic=other_tenant_clinic)
    client = token_client(world.staff)
    base = f"/api/v1/clinics/{world.clinic.ref}/patients/"
    assert client.get(base + f"{foreign.ref}/consent").status_code == 404
    assert client.get(base + "pt_missing/consent").status_code == 404
    response = client.post(base + f"{foreign.ref}/consent", {"channels": ["SMS"], "state": "REVOKED"}, format="json")
    assert response.status_code == 404
    assert consent_current(foreign.pk)["SMS"] == "GRANTED"


def test_an_opt_out_link_older_than_its_horizon_is_410_and_opts_nobody_out(world, settings, frozen_clock):
    from datetime import timedelta

    settings.WAITLIST_OPTOUT_TOKEN_MAX_AGE_DAYS = 90
    patient = world.patient()
    path = _optout_path(patient)
    frozen_clock.shift(timedelta(days=91))
    assert page_client().get(path).status_code == 410
    assert Client().post(path).status_code == 410
    assert consent_current(patient.pk) == {"EMAIL": "GRANTED", "SMS": "GRANTED"}


def _opt_out_by_link(patient) -> None:
    consent_record(patient=patient, channels=ContactChannel.values, state=ConsentState.REVOKED,
                   source=ConsentSource.OPT_OUT_LINK, actor_label="patient")


def _grant(world, patient, body: dict):
    return token_client(world.staff).post(f"/api/v1/clinics/{world.clinic.ref}/patients/{patient.ref}/consent",
                                          body, format="json", HTTP_IDEMPOTENCY_KEY=str(sorted(body.items())))


def test_staff_cannot_grant_again_over_the_patients_own_opt_out(world):
    patient = world.patient()
    _opt_out_by_link(patient)
    response = _grant(world, patient, {"channels": ["EMAIL", "SMS"], "state": "GRANTED"})
    assert response.status_code == 409 and response.json()["code"] == "CONSENT_OPTED_OUT"
    assert sorted(response.json()["fields"]["channels"]) == ["EMAIL", "SMS"]
    assert consent_current(patient.pk) == {"EMAIL": "REVOKED", "SMS": "REVOKED"}


def test_the_patients_new_consent_with_evidence_grants_again_and_is_recorded_as_such(world):
    patient = world.patient()
    _opt_out_by_link(patient)
    response = _grant(world, patient, {"channels": ["EMAIL"], "state": "GRANTED", "source": "PATIENT_CONSENT",
                                       "evidence": "signed form F-2031"})
    assert response.status_code == 200, response.content
    assert consent_current(patient.pk) == {"EMAIL": "GRANTED", "SMS": "REVOKED"}
    row = ContactConsent.objects.filter(patient=patient).latest("id")
    assert (row.source, row.evidence, row.actor) == ("PATIENT_CONSENT", "signed form F-2031", world.staff.username)
    assert response.json()["history"][0]["evidence"] == "signed form F-2031"


def test_the_patients_new_consent_needs_evidence(world):
    patient = world.patient()
    _opt_out_by_link(patient)
    response = _grant(world, patient, {"channels": ["SMS"], "state": "GRANTED", "source": "PATIENT_CONSENT"})
    assert response.status_code == 400 and "evidence" in response.json()["fields"]
    assert consent_current(patient.pk)["SMS"] == "REVOKED"


def test_a_staff_revocation_can_still_be_undone_by_staff(world):
    patient = world.patient()
    _revoke(patient, [ContactChannel.SMS])
    assert _grant(world, patient, {"channels": ["SMS"], "state": "GRANTED"}).status_code == 200
    assert consent_current(patient.pk)["SMS"] == "GRANTED"


def test_the_current_consent_is_the_newest_row_of_each_channel_as_the_orm_reads_it(world):
    patient = world.patient()
    _revoke(patient, [ContactChannel.SMS])
    consent_record(patient=patient, channels=[ContactChannel.SMS], state=ConsentState.GRANTED,
                   source=ConsentSource.STAFF, actor_label="staff-user")
    _revoke(patient, [ContactChannel.EMAIL])
    orm = dict(ContactConsent.objects.filter(patient_id=patient.pk).order_by("channel", "-id")
               .distinct("channel").values_list("channel", "state"))
    assert consent_current(patient.pk) == {**dict.fromkeys(ContactChannel.values), **orm}
    assert (orm[ContactChannel.SMS], orm[ContactChannel.EMAIL]) == (ConsentState.GRANTED, ConsentState.REVOKED)

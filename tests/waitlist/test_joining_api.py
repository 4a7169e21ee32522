"""The public join contract: request, code, entry (issue 40)."""

from __future__ import annotations

import pytest
import time_machine
from django.core import mail
from rest_framework.test import APIClient

from scheduling.models import ConsentState, ContactConsent, JoinRequest, Patient
from tests.conftest import seoul
from tests.waitlist.factories import NOW
from tests.waitlist.joining_helpers import body, delivered_code, open_joining, url
from waitlist.joining import availability as av
from waitlist.models import EntryStatus, WaitlistEntry

pytestmark = pytest.mark.django_db


@pytest.fixture
def client():
    return APIClient()


def submit(client, world, key="k-1", **overrides):
    return client.post(url(world), body(world, **overrides), format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_verified_request_becomes_a_waiting_entry_with_its_availability(world, client):
    open_joining(world)
    answer = submit(client, world)
    assert answer.status_code == 202, answer.content
    ref = answer.json()["request"]
    verified = client.post(url(world, f"/{ref}/verify"), {"code": delivered_code()}, format="json")
    assert verified.status_code == 200, verified.content
    entry = WaitlistEntry.objects.get(ref=verified.json()["entry"])
    assert entry.status == EntryStatus.WAITING
    assert entry.patient.email == "minji@example.com" and entry.patient.display_name == "Kim Minji"
    assert entry.availability == av.mask_of(av.DAYS[:5], ("MORNING", "AFTERNOON"))
    assert verified.json()["status_link"].startswith("http")
    assert not JoinRequest.objects.exists()  # the unproven contact is gone once it is the patient's


def test_a_verified_request_records_the_patients_own_consent_with_the_request_as_evidence(world, client):
    open_joining(world)
    ref = submit(client, world).json()["request"]
    client.post(url(world, f"/{ref}/verify"), {"code": delivered_code()}, format="json")
    consent = ContactConsent.objects.get(patient__email="minji@example.com")
    assert consent.state == ConsentState.GRANTED and consent.channel == "EMAIL" and ref in consent.evidence


def test_a_verified_contact_of_a_known_patient_joins_that_patient(world, client):
    open_joining(world)
    known = world.patient(email="minji@example.com")
    ref = submit(client, world).json()["request"]
    verified = client.post(url(world, f"/{ref}/verify"), {"code": delivered_code()}, format="json")
    assert WaitlistEntry.objects.get(ref=verified.json()["entry"]).patient_id == known.pk
    assert Patient.objects.filter(clinic=world.clinic).count() == 1


def test_an_unverified_request_changes_nothing_but_its_own_row(world, client):
    open_joining(world)
    submit(client, world)
    assert not Patient.objects.filter(clinic=world.clinic).exists()
    assert not WaitlistEntry.objects.exists()
    assert JoinRequest.objects.count() == 1


def test_a_known_and_an_unknown_contact_get_the_same_answer(world, client):
    open_joining(world)
    world.patient(email="known@example.com")
    known = submit(client, world, key="a", email="known@example.com")
    unknown = submit(client, world, key="b", email="unknown@example.com")
    assert known.status_code == unknown.status_code == 202
    first, second = known.json()["request"], unknown.json()["request"]
    assert known.content.replace(first.encode(), b"REF") == unknown.content.replace(second.encode(), b"REF")
    assert sorted(known.headers) == sorted(unknown.headers)


def test_the_same_key_twice_answers_the_same_and_records_one_request(world, client):
    open_joining(world)
    first, second = submit(client, world), submit(client, world)
    assert first.content == second.content
    assert second.headers["Idempotent-Replayed"] == "true"
    assert JoinRequest.objects.count() == 1


def test_a_wrong_code_is_refused_and_counted(world, client):
    open_joining(world)
    ref = submit(client, world).json()["request"]
    code = delivered_code()
    wrong = "000000" if code != "000000" else "111111"
    answer = client.post(url(world, f"/{ref}/verify"), {"code": wrong}, format="json")
    assert answer.status_code == 400 and answer.json()["code"] == "CODE_INVALID"
    assert JoinRequest.objects.get(ref=ref).code_attempts == 1
    assert not WaitlistEntry.objects.exists()


def test_an_expired_code_is_refused(world, client):
    open_joining(world)
    ref = submit(client, world).json()["request"]
    code = delivered_code()
    with time_machine.travel(NOW.timestamp() + 11 * 60, tick=False):
        answer = client.post(url(world, f"/{ref}/verify"), {"code": code}, format="json")
    assert answer.status_code == 410 and answer.json()["code"] == "CODE_EXPIRED"
    assert not WaitlistEntry.objects.exists()


def test_after_five_wrong_codes_even_the_right_one_is_refused(world, client):
    open_joining(world)
    ref = submit(client, world).json()["request"]
    code = delivered_code()
    wrong = "000000" if code != "000000" else "111111"
    for _ in range(5):
        client.post(url(world, f"/{ref}/verify"), {"code": wrong}, format="json")
    answer = client.post(url(world, f"/{ref}/verify"), {"code": code}, format="json")
    assert answer.status_code == 429 and answer.json()["code"] == "CODE_EXHAUSTED"
    assert not WaitlistEntry.objects.exists()


def test_a_resend_makes_a_new_code_and_the_old_one_stops_working(world, client):
    open_joining(world)
    ref = submit(client, world).json()["request"]
    old = delivered_code()
    with time_machine.travel(NOW.timestamp() + 61, tick=False):
        assert client.post(url(world, f"/{ref}/resend"), format="json").status_code == 202
        new = delivered_code()
        if new != old:
            refused = client.post(url(world, f"/{ref}/verify"), {"code": old}, format="json")
            assert refused.json()["code"] == "CODE_INVALID"
        assert client.post(url(world, f"/{ref}/verify"), {"code": new}, format="json").status_code == 200


def test_a_resend_sooner_than_a_minute_is_refused(world, client):
    open_joining(world)
    ref = submit(client, world).json()["request"]
    delivered_code()
    answer = client.post(url(world, f"/{ref}/resend"), format="json")
    assert answer.status_code == 429 and answer.json()["code"] == "CODE_RESEND_LIMITED"


def test_a_clinic_that_has_not_switched_joining_on_is_not_found(world, client):
    assert submit(client, world).status_code == 404
    assert not JoinRequest.objects.exists()


def test_a_switched_off_clinic_is_not_found(world, client):
    open_joining(world, enabled=False)
    assert submit(client, world).status_code == 404


def test_a_treatment_not_offered_online_is_refused(world, client):
    open_joining(world)
    answer = submit(client, world, treatment=world.other_treatment.ref)
    assert answer.status_code == 400 and answer.json()["code"] == "TREATMENT_NOT_OFFERED"
    assert not JoinRequest.objects.exists()


def test_a_phone_is_stored_as_e164_in_the_clinics_region(world, client):
    open_joining(world)
    submit(client, world, email=None, phone="010-1234-5678", consents=["SMS"])
    assert JoinRequest.objects.get().phone == "+821012345678"


def test_an_invalid_phone_is_refused(world, client):
    open_joining(world)
    answer = submit(client, world, email=None, phone="12", consents=["SMS"])
    assert answer.status_code == 400 and answer.json()["code"] == "PHONE_INVALID"


def test_requests_over_the_address_limit_are_throttled(world, client, settings):
    settings.JOIN_THROTTLE_RATES = {**settings.JOIN_THROTTLE_RATES, "address": "2/hour"}
    open_joining(world)
    answers = [submit(client, world, key=f"k{i}", email=f"p{i}@example.com").status_code for i in range(3)]
    assert answers == [202, 202, 429]
    assert JoinRequest.objects.count() == 2


def test_requests_over_the_contact_limit_are_throttled(world, client, settings):
    settings.JOIN_THROTTLE_RATES = {**settings.JOIN_THROTTLE_RATES, "contact": "1/hour"}
    open_joining(world)
    first = submit(client, world, key="a")
    second = submit(client, world, key="b", REMOTE_ADDR="10.0.0.9")
    assert (first.status_code, second.status_code) == (202, 429)


def test_requests_over_the_clinic_limit_are_throttled(world, client, settings):
    settings.JOIN_THROTTLE_RATES = {**settings.JOIN_THROTTLE_RATES, "clinic": "1/hour"}
    open_joining(world)
    first = submit(client, world, key="a")
    second = client.post(url(world), body(world, email="other@example.com"), format="json",
                         HTTP_IDEMPOTENCY_KEY="b", REMOTE_ADDR="10.0.0.7")
    assert (first.status_code, second.status_code) == (202, 429)


def test_an_origin_the_clinic_does_not_list_is_refused_without_cors_headers(world, client):
    open_joining(world, allowed_origins=["https://gangnam-clinic.example"])
    answer = client.post(url(world), body(world), format="json", HTTP_IDEMPOTENCY_KEY="k",
                         HTTP_ORIGIN="https://evil.example")
    assert answer.status_code == 403 and answer.json()["code"] == "ORIGIN_NOT_ALLOWED"
    assert "Access-Control-Allow-Origin" not in answer.headers
    assert not JoinRequest.objects.exists()


def test_a_listed_origin_gets_cors_headers(world, client):
    open_joining(world, allowed_origins=["https://gangnam-clinic.example"])
    answer = client.post(url(world), body(world), format="json", HTTP_IDEMPOTENCY_KEY="k",
                         HTTP_ORIGIN="https://gangnam-clinic.example")
    assert answer.status_code == 202
    assert answer.headers["Access-Control-Allow-Origin"] == "https://gangnam-clinic.example"


def test_a_preflight_from_a_listed_origin_allows_the_idempotency_key(world, client):
    open_joining(world, allowed_origins=["https://gangnam-clinic.example"])
    answer = client.options(url(world), HTTP_ORIGIN="https://gangnam-clinic.example",
                            HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
                            HTTP_ACCESS_CONTROL_REQUEST_HEADERS="content-type, idempotency-key")
    assert answer.headers.get("Access-Control-Allow-Origin") == "https://gangnam-clinic.example"
    assert "idempotency-key" in answer.headers.get("Access-Control-Allow-Headers", "")


def accept_captcha(token, *, address, clinic_ref):
    return token == "human"


def test_with_the_captcha_hook_on_a_request_without_a_passing_token_is_refused(world, client, settings):
    settings.JOIN_CAPTCHA_VERIFIER = f"{__name__}.accept_captcha"
    open_joining(world)
    refused = submit(client, world, key="a", captcha_token="bot")
    accepted = submit(client, world, key="b", captcha_token="human")
    assert refused.status_code == 400 and refused.json()["code"] == "CAPTCHA_FAILED"
    assert accepted.status_code == 202


def test_the_code_goes_by_email_only_to_the_given_address(world, client):
    open_joining(world)
    submit(client, world)
    delivered_code()
    assert mail.outbox[-1].to == ["minji@example.com"]


def test_unverified_requests_are_deleted_after_a_day(world, client):
    from waitlist.joining.tasks import purge_join_requests

    open_joining(world)
    submit(client, world)
    with time_machine.travel(NOW.timestamp() + 24 * 3600 + 1, tick=False):
        assert purge_join_requests() == 1
    assert not JoinRequest.objects.exists()


def test_joining_settings_are_admin_only(world):
    from common.errors import PermissionDenied
    from waitlist.joining.services import join_settings_set

    with pytest.raises(PermissionDenied):
        join_settings_set(clinic=world.clinic, actor=world.staff, reason="x", enabled=True)


def test_with_approval_required_a_verified_request_waits_for_staff(world, client):
    from waitlist.joining.services import join_request_approve

    open_joining(world, approval_required=True)
    ref = submit(client, world).json()["request"]
    verified = client.post(url(world, f"/{ref}/verify"), {"code": delivered_code()}, format="json")
    assert verified.json()["status"] == "AWAITING_APPROVAL" and not WaitlistEntry.objects.exists()
    joined = join_request_approve(clinic=world.clinic, ref=ref, actor=world.staff)
    assert joined.entry is not None and joined.entry.status == EntryStatus.WAITING
    assert not JoinRequest.objects.exists()


def test_join_verify_wait_offer_and_book_through_the_api(world, client):
    from tests.conftest import token_client
    from tests.waitlist.factories import decide
    from tests.waitlist.loop_helpers import open_vacancy
    from waitlist import services

    open_joining(world)
    ref = submit(client, world).json()["request"]
    entry_ref = client.post(url(world, f"/{ref}/verify"), {"code": delivered_code()}, format="json").json()["entry"]
    entry = WaitlistEntry.objects.get(ref=entry_ref)
    decide(entry.patient)  # the booking-reliability feed knows the new patient
    closed_day = open_vacancy(world, starts_at=seoul(7, 10))  # a Saturday: the patient said weekdays only
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=closed_day.ref).outcome != "OFFERED"
    vacancy = open_vacancy(world, starts_at=seoul(3, 10))  # a Tuesday morning
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == entry.pk
    staff = token_client(world.staff)
    base = f"/api/v1/clinics/{world.clinic.ref}"
    claimed = staff.post(f"{base}/offers/{result.offer.ref}/claim", {"expected_version": result.offer.version},
                         format="json", HTTP_IDEMPOTENCY_KEY="c1")
    assert claimed.status_code == 200, claimed.content
    booked = staff.post(f"{base}/holds/{claimed.json()['hold']}/book", {}, format="json", HTTP_IDEMPOTENCY_KEY="b1")
    assert booked.status_code in (200, 201), booked.content
    entry.refresh_from_db()
    assert entry.status == EntryStatus.BOOKED


def test_the_management_command_switches_joining_on_for_an_admin_and_audits_it(world):
    from io import StringIO

    from django.core.management import call_command

    from common.models import AuditEntry
    from scheduling.models import Role
    from tests import factories

    admin = factories.user_with_role(world.clinic, Role.ADMIN, username="join-admin")
    out = StringIO()
    call_command("waitlist_join_settings", "--clinic", world.clinic.ref, "--on", "--treatment", world.treatment.ref,
                 "--reason", "self-service pilot", "--actor-username", "join-admin", stdout=out)
    assert '"enabled": true' in out.getvalue() and world.treatment.ref in out.getvalue()
    assert AuditEntry.objects.filter(action="waitlist.join_settings", actor=admin).exists()


def test_the_management_command_refuses_staff(world):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError):
        call_command("waitlist_join_settings", "--clinic", world.clinic.ref, "--on", "--reason", "x",
                     "--actor-username", world.staff.username)


def test_join_settings_over_the_api_are_admin_writes(world):
    from tests.conftest import token_client

    answer = token_client(world.staff).post(f"/api/v1/clinics/{world.clinic.ref}/join-settings",
                                            {"enabled": True, "reason": "x"}, format="json")
    assert answer.status_code == 403


def test_the_console_provider_logs_the_code_outside_production(world, client, caplog):
    import logging

    open_joining(world)
    world.clinic.settings = {**world.clinic.settings, "notification": {"provider": "console"}}
    world.clinic.save(update_fields=["settings"])
    submit(client, world, email=None, phone="010-2222-3333", consents=["SMS"])
    with caplog.at_level(logging.INFO):
        from common.outbox import outbox_deliver_due

        outbox_deliver_due(worker="t")
    ref = JoinRequest.objects.get().ref
    assert any(ref in r.getMessage() and "code=" in r.getMessage() for r in caplog.records)
    assert not any("010-2222-3333" in r.getMessage() or "+821022223333" in r.getMessage() for r in caplog.records)


def test_joining_sends_the_status_link_by_the_patients_channel(world, client):
    open_joining(world)
    ref = submit(client, world).json()["request"]
    client.post(url(world, f"/{ref}/verify"), {"code": delivered_code()}, format="json")
    from common.outbox import outbox_deliver_due

    outbox_deliver_due(worker="t")
    assert "/join/status/" in mail.outbox[-1].body and mail.outbox[-1].to == ["minji@example.com"]

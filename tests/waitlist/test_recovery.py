"""Recovery: API endpoints (roles, scope, idempotency) and the management command, with their records."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from common.models import AuditEntry
from scheduling.models import AppointmentStatus, HoldStatus, Role
from tests import factories as f
from tests.conftest import race, seoul, token_client
from tests.waitlist.loop_helpers import make_offer, open_vacancy
from waitlist import services
from waitlist.models import EntryStatus, OfferEvent, OfferStatus, VacancyStatus


@pytest.fixture
def admin(world):
    return f.user_with_role(world.clinic, Role.ADMIN, username="wl-admin")


@pytest.fixture
def admin_api(admin):
    return token_client(admin)


def post(client, url, body=None, key=None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return client.post(url, body if body is not None else {}, format="json", **headers)


def base(world):
    return f"/api/v1/clinics/{world.clinic.ref}"


def test_admin_closes_a_vacancy_and_its_offer_is_withdrawn_with_the_reason_recorded(
    world, admin_api, admin, on_commit, queued_dispatches
):
    offer = make_offer(world)
    url = f"{base(world)}/vacancies/{offer.vacancy.ref}/close"
    with on_commit(execute=True):
        response = post(admin_api, url, {"reason": "doctor sick"}, key="close-1")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "CLOSED" and body["withdrawn_offer"] == offer.ref and body["correlation_id"]
    assert queued_dispatches == []  # a closed vacancy does not cascade
    offer.refresh_from_db()
    assert offer.status == OfferStatus.WITHDRAWN and offer.hold.status == HoldStatus.RELEASED
    assert offer.entry.status == EntryStatus.WAITING
    event = OfferEvent.objects.get(offer=offer, reason_code="VACANCY_CLOSED")
    assert event.actor == "wl-admin" and event.correlation_id == body["correlation_id"]
    audit = AuditEntry.objects.get(action="waitlist.vacancy_close")
    assert audit.actor == admin and audit.reason == "doctor sick" and audit.correlation_id == body["correlation_id"]
    replay = post(admin_api, url, {"reason": "doctor sick"}, key="close-1")
    assert replay.content == response.content and replay["Idempotent-Replayed"] == "true"


def test_recovery_permissions(world, staff_api, admin_api):
    offer = make_offer(world)
    vacancy_url = f"{base(world)}/vacancies/{offer.vacancy.ref}"
    for action in ("close", "reopen"):
        assert post(staff_api, f"{vacancy_url}/{action}", {"reason": "x"}).status_code == 403
        assert post(token_client(), f"{vacancy_url}/{action}", {"reason": "x"}).status_code == 401
    assert post(staff_api, f"{base(world)}/offers/{offer.ref}/withdraw", {"reason": "x"}).status_code == 403
    outsider = token_client(f.user_with_role(f.ClinicFactory(), Role.ADMIN))
    assert post(outsider, f"{vacancy_url}/close", {"reason": "x"}).status_code == 404
    assert post(admin_api, f"{base(world)}/vacancies/vac_nope/close", {"reason": "x"}).status_code == 404
    response = post(admin_api, f"{vacancy_url}/close", {})
    assert response.status_code == 400 and "reason" in response.json()["fields"]
    offer.vacancy.refresh_from_db()
    assert offer.vacancy.status == VacancyStatus.OPEN  # nothing changed by any refusal
    assert admin_api.get(f"{vacancy_url}/close").status_code == 405


def test_reopen_a_closed_vacancy_dispatches_again(world, admin_api, on_commit, queued_dispatches):
    offer = make_offer(world)
    vacancy = offer.vacancy
    services.vacancy_close(clinic=world.clinic, vacancy_ref=vacancy.ref, actor=None, reason="x")
    with on_commit(execute=True):
        response = post(admin_api, f"{base(world)}/vacancies/{vacancy.ref}/reopen", {"reason": "doctor back"})
    assert response.status_code == 200 and response.json()["status"] == "OPEN"
    assert queued_dispatches == [vacancy.pk]
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    # The close withdrew its offer (VACANCY_CLOSED): that does not bar the entry after the reopen.
    assert result.outcome == "OFFERED" and result.offer.entry_id == offer.entry_id


def test_filled_and_started_vacancies_cannot_be_closed_or_reopened(world, admin_api, frozen_clock):
    offer = make_offer(world)
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)
    services.offer_book(clinic=world.clinic, hold_ref=offer.hold.ref)
    url = f"{base(world)}/vacancies/{offer.vacancy.ref}"
    assert post(admin_api, f"{url}/close", {"reason": "x"}).json()["code"] == "VACANCY_NOT_CLOSABLE"
    assert post(admin_api, f"{url}/reopen", {"reason": "x"}).json()["code"] == "VACANCY_NOT_REOPENABLE"
    other = open_vacancy(world, seoul(1, 13))
    services.vacancy_close(clinic=world.clinic, vacancy_ref=other.ref, actor=None, reason="x")
    frozen_clock.move_to(seoul(1, 13))
    response = post(admin_api, f"{base(world)}/vacancies/{other.ref}/reopen", {"reason": "x"})
    assert response.status_code == 409 and response.json()["code"] == "VACANCY_STARTED"


def test_staff_retry_booking_confirms_a_stuck_hold(world, staff_api):
    offer = make_offer(world)
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)
    url = f"{base(world)}/holds/{offer.hold.ref}/retry-booking"
    response = post(staff_api, url, {"reason": "booking service was down"}, key="r1")
    assert response.status_code == 201, response.content
    assert response.json()["status"] == AppointmentStatus.CONFIRMED
    booked = OfferEvent.objects.get(offer=offer, reason_code="BOOKED")
    assert booked.correlation_id == response.json()["correlation_id"]
    again = post(staff_api, url, {"reason": "again"}, key="r2")
    assert again.status_code == 201 and again.json()["appointment"] == response.json()["appointment"]
    assert post(staff_api, f"{base(world)}/holds/hld_nope/retry-booking", {"reason": "x"}).status_code == 404


def test_a_failed_retry_is_recorded_and_answers_409(world, staff_api, frozen_clock):
    offer = make_offer(world)
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)
    offer.hold.refresh_from_db()
    frozen_clock.move_to(offer.hold.expires_at)
    response = post(staff_api, f"{base(world)}/holds/{offer.hold.ref}/retry-booking", {"reason": "try"})
    assert response.status_code == 409 and response.json()["code"] == "HOLD_NOT_BOOKABLE"
    event = OfferEvent.objects.get(offer=offer, reason_code="BOOKING_RETRY_FAILED")
    assert event.actor == world.staff.username and event.detail["code"] == "HOLD_NOT_BOOKABLE"


def run(*args):
    out = StringIO()
    call_command("waitlist_recover", *args, stdout=out)
    return out.getvalue()


def test_recover_command_runs_each_action_and_prints_the_correlation_id(world, admin):
    common = ["--clinic", world.clinic.ref, "--reason", "runbook 7", "--actor-username", admin.username]
    offer = make_offer(world)
    out = run("withdraw-offer", "--ref", offer.ref, *common)
    assert "WITHDRAWN" in out
    correlation = out.strip().splitlines()[-1].split(": ")[1]
    assert OfferEvent.objects.get(offer=offer, reason_code="STAFF_WITHDRAWN").correlation_id == correlation
    assert "CLOSED" in run("close-vacancy", "--ref", offer.vacancy.ref, *common)
    assert "OPEN" in run("reopen-vacancy", "--ref", offer.vacancy.ref, *common)
    second = make_offer(world, starts_at=seoul(4, 10))
    services.offer_claim(clinic=world.clinic, offer_ref=second.ref, expected_version=1)
    assert "CONFIRMED" in run("retry-booking", "--ref", second.hold.ref, *common)
    assert AuditEntry.objects.filter(reason="runbook 7", actor=admin).count() == 4


def test_recover_command_refuses_non_admins_and_unknown_refs(world):
    common = ["--clinic", world.clinic.ref, "--reason", "x"]
    with pytest.raises(CommandError, match="not an ADMIN"):
        run("close-vacancy", "--ref", "vac_x", *common, "--actor-username", world.staff.username)
    offer = make_offer(world)
    with pytest.raises(CommandError, match="not an ADMIN"):  # withdraw is ADMIN in every front end
        run("withdraw-offer", "--ref", offer.ref, *common, "--actor-username", world.staff.username)
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED
    admin = f.user_with_role(world.clinic, Role.ADMIN)
    with pytest.raises(CommandError, match="NOT_FOUND"):
        run("close-vacancy", "--ref", "vac_x", *common, "--actor-username", admin.username)


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_closing_a_vacancy_while_the_patient_accepts_leaves_one_consistent_outcome():
    import time_machine

    from common.errors import DomainError
    from scheduling.models import Appointment, CapacityAllocation
    from tests.waitlist.factories import NOW
    from tests.worlds import waitlist_world
    from waitlist.models import Offer, Vacancy

    with time_machine.travel(NOW, tick=False):
        world = waitlist_world()
        offer = make_offer(world)

        def work(i):
            try:
                if i == 0:
                    return services.vacancy_close(clinic=world.clinic, vacancy_ref=offer.vacancy.ref, actor=None,
                                                  reason="race")[0].status
                receipt = services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1)
                return services.offer_book(clinic=world.clinic, hold_ref=receipt.hold_ref)[0].status
            except DomainError as exc:
                return exc.code

        results = race(work, 2)
    vacancy = Vacancy.objects.get(pk=offer.vacancy_id)
    offer = Offer.objects.select_related("hold").get(pk=offer.pk)
    confirmed = Appointment.objects.filter(patient=offer.patient, status=AppointmentStatus.CONFIRMED).count()
    if vacancy.status == VacancyStatus.FILLED:
        assert results[0] == "VACANCY_NOT_CLOSABLE" and confirmed == 1, results
        assert offer.status == OfferStatus.ACCEPTED and offer.hold.status == HoldStatus.CONSUMED
    else:
        assert vacancy.status == VacancyStatus.CLOSED and confirmed == 0, results
        assert offer.status == OfferStatus.WITHDRAWN and offer.hold.status == HoldStatus.RELEASED
        assert not CapacityAllocation.objects.filter(hold=offer.hold, active=True).exists()

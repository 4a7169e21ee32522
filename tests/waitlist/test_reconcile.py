"""Beat jobs as services, tasks and commands: expiry, reconcile findings, stuck bookings, the cursor."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

from django.conf import settings as django_settings
from django.core.management import call_command

from common.taskwiring import periodic_schedule
from scheduling.models import Appointment, AppointmentStatus, HoldStatus
from scheduling.services import hold_release
from tests.conftest import seoul
from tests.waitlist.loop_helpers import make_offer, open_vacancy
from waitlist import services, tasks
from waitlist.figures.queue import ops_action_queue
from waitlist.models import JobRun, Offer, OfferEvent, OfferStatus, VacancyStatus, WaitlistEntry


def claim(world, offer, **kw):
    return services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=offer.version, **kw)


def test_beat_schedule_has_the_waitlist_jobs():
    tasks_scheduled = {entry["task"] for entry in periodic_schedule().values()}
    assert {"waitlist.tasks.expire_offers", "waitlist.tasks.reconcile", "common.tasks.deliver_outbox",
            "common.tasks.reclaim_outbox"} <= tasks_scheduled


def test_expire_task_and_command_are_bounded_and_record_their_run(world, frozen_clock):
    offers = [make_offer(world, starts_at=seoul(3, 9 + i)) for i in range(3)]
    due = max(o.expires_at for o in offers)
    frozen_clock.move_to(due)
    assert tasks.expire_offers.run(limit=2) == 2
    out = StringIO()
    call_command("waitlist_expire", "--limit", "5", stdout=out)
    assert "'expired': 1" in out.getvalue()
    assert tasks.expire_offers.run() == 0  # idempotent
    assert Offer.objects.filter(status=OfferStatus.EXPIRED).count() == 3
    run = JobRun.objects.get(name="expire")
    assert run.last_run_at == due and run.last_result == {"expired": 0}


def test_reconcile_expires_stale_offers(world, frozen_clock):
    offer = make_offer(world)
    frozen_clock.move_to(offer.expires_at + timedelta(minutes=5))  # the expiry job was missed
    assert tasks.reconcile.run()["expired"] == 1
    offer.refresh_from_db()
    assert offer.status == OfferStatus.EXPIRED


def test_reconcile_withdraws_an_offer_whose_hold_lost_its_slot(world, on_commit, queued_dispatches):
    offer = make_offer(world)
    hold_release(hold=offer.hold, reason="CORRUPTED")  # invariant 2 broken behind the service's back
    queue = ops_action_queue(clinic=world.clinic)
    assert [(i["kind"], i["reason_code"]) for i in queue["items"]] == [("OFFER_WITHOUT_HOLD", "HOLD_RELEASED")]
    with on_commit(execute=True):
        result = services.reconcile_run()
    assert result["withdrawn_no_hold"] == 1
    offer.refresh_from_db()
    assert offer.status == OfferStatus.WITHDRAWN and offer.reason_code == "NO_ACTIVE_HOLD"
    assert queued_dispatches == [offer.vacancy_id]
    assert OfferEvent.objects.filter(offer=offer, actor="system:reconcile", reason_code="NO_ACTIVE_HOLD").exists()


def test_reconcile_finishes_a_booking_command_that_started_and_did_not_finish(world, frozen_clock):
    offer = make_offer(world)
    # The claim page's accept under ON_ACCEPT is the booking command; the booking step never ran.
    claim(world, offer, request_booking=True)
    assert services.reconcile_run()["booked"] == 0  # not yet N minutes
    frozen_clock.move_to(seoul(1, 9) + timedelta(minutes=django_settings.WAITLIST_BOOKING_RETRY_MINUTES))
    assert services.reconcile_run()["booked"] == 1
    assert Appointment.objects.get(patient=offer.patient).status == AppointmentStatus.CONFIRMED


def test_reconcile_never_books_an_accept_nobody_asked_to_book(world, frozen_clock):
    offer = make_offer(world)
    claim(world, offer)  # an API client's claim: ACCEPTED waits for its booking command
    frozen_clock.move_to(seoul(1, 9) + timedelta(minutes=django_settings.WAITLIST_BOOKING_RETRY_MINUTES))
    result = services.reconcile_run()
    assert result["booked"] == 0 and result["flagged_stuck"] == 0
    assert not Appointment.objects.filter(patient=offer.patient).exists()
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED and offer.hold.status == HoldStatus.ACCEPTED


def test_an_unbooked_accepted_hold_expires_releases_and_cascades(world, frozen_clock, on_commit, queued_dispatches):
    offer = make_offer(world, waiting_since=seoul(1, 7))
    second = world.waiting(waiting_since=seoul(1, 8))
    claim(world, offer)
    offer.refresh_from_db()
    frozen_clock.move_to(offer.hold.expires_at)
    with on_commit(execute=True):
        assert services.expire_run() == {"expired": 1}
    offer.refresh_from_db()
    offer.hold.refresh_from_db()
    assert (offer.status, offer.reason_code) == (OfferStatus.EXPIRED, "HOLD_EXPIRED")
    assert offer.hold.status == HoldStatus.RELEASED  # released in the same transaction
    assert not offer.hold.allocations.filter(active=True).exists()
    assert offer.entry.status == "WAITING"
    event = OfferEvent.objects.get(offer=offer, reason_code="HOLD_EXPIRED")
    assert (event.from_status, event.to_status) == ("ACCEPTED", "EXPIRED")
    assert queued_dispatches == [offer.vacancy_id]
    result = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=offer.vacancy.ref)
    assert result.outcome == "OFFERED" and result.offer.entry_id == second.pk


def test_a_booking_that_keeps_failing_is_flagged_once_for_staff(world, frozen_clock):
    offer = make_offer(world)
    claim(world, offer, request_booking=True)
    offer.refresh_from_db()
    WaitlistEntry.objects.filter(pk=offer.entry_id).update(status="WAITING")  # broken behind the services
    frozen_clock.move_to(seoul(1, 9) + timedelta(minutes=django_settings.WAITLIST_BOOKING_RETRY_MINUTES))
    assert services.reconcile_run()["flagged_stuck"] == 1
    assert services.reconcile_run()["flagged_stuck"] == 0  # flagged once, not every run
    event = OfferEvent.objects.get(offer=offer, reason_code="BOOKING_STUCK")
    assert event.detail == {"hold": offer.hold.ref, "code": "HOLD_NOT_BOOKABLE"}
    items = ops_action_queue(clinic=world.clinic)["items"]
    assert [(i["kind"], i["ref"], i["reason_code"]) for i in items] == [
        ("BOOKING_STUCK", offer.hold.ref, "HOLD_NOT_BOOKABLE")]
    assert items[0]["policy_version"] == 1 and items[0]["decision_ref"] == offer.decision_ref
    offer.hold.refresh_from_db()
    assert offer.hold.status == HoldStatus.ACCEPTED  # nothing destructive without staff


def test_reconcile_dispatches_vacancies_that_should_have_an_offer_with_a_resuming_cursor(world, frozen_clock):
    vacancies = [open_vacancy(world, seoul(3, 9 + i)) for i in range(3)]  # opened with nobody waiting
    for _ in range(3):
        world.waiting()
    first = services.reconcile_run(limit=2)
    assert first["dispatch"] == {"OFFERED": 2}
    assert JobRun.objects.get(name="reconcile").cursor == vacancies[1].pk
    second = services.reconcile_run(limit=2)
    assert second["dispatch"] == {"OFFERED": 1}  # resumed after the cursor (then wrapped: nothing left)
    assert all(v.offers.filter(status=OfferStatus.OFFERED).count() == 1 for v in vacancies)


def test_reconcile_closes_vacancies_whose_time_started(world, frozen_clock):
    vacancy = open_vacancy(world, seoul(1, 13))
    frozen_clock.move_to(seoul(1, 13))
    out = StringIO()
    call_command("waitlist_reconcile", stdout=out)
    assert "CLOSED" in out.getvalue()
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.CLOSED and vacancy.close_reason == "STARTED"

"""The thin Celery wrappers call the services with ids only."""

from __future__ import annotations

from tests.conftest import seoul
from waitlist import services, tasks
from waitlist.models import OfferStatus


def test_dispatch_task_and_expiry_task(world, frozen_clock):
    world.waiting()
    appointment = world.confirmed(seoul(3, 10))
    _, vacancy = services.appointment_cancel_with_vacancy(
        clinic=world.clinic, appointment_ref=appointment.ref, reason="x"
    )
    assert tasks.dispatch_vacancy.run(vacancy.pk) == "OFFERED"
    assert tasks.dispatch_vacancy.run(vacancy.pk) == "ALREADY_OFFERED"  # a re-run is a no-op
    assert tasks.dispatch_vacancy.run(10**9) == "MISSING"
    offer = vacancy.offers.get()
    frozen_clock.move_to(offer.expires_at)
    assert tasks.expire_offers.run() == 1
    offer.refresh_from_db()
    assert offer.status == OfferStatus.EXPIRED

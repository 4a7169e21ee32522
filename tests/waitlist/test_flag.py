"""The waitlist flag: off stops new offers and notices; housekeeping keeps running; on again → one offer."""

from __future__ import annotations

import pytest

from common.models import OutboxMessage
from scheduling.services.features import feature_set
from tests import factories as f
from tests.conftest import race, seoul
from tests.waitlist.loop_helpers import deliver, make_offer, open_vacancy
from waitlist import services
from waitlist.models import ACTIVE_OFFER_STATUSES, Offer, OfferStatus, VacancyStatus


def flag(**kw):
    kw.setdefault("reason", "test")
    return feature_set(name="waitlist", actor=None, **kw)


def test_flag_off_opens_the_vacancy_but_offers_and_sends_nothing(world, frozen_clock, on_commit, queued_dispatches):
    earlier = make_offer(world, starts_at=seoul(4, 10))  # made while the flag was on
    flag(enabled=False)
    world.waiting()
    vacancy = open_vacancy(world, seoul(3, 10))
    assert vacancy.status == VacancyStatus.OPEN  # the cancellation still opens it
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "DISABLED"
    assert not Offer.objects.filter(vacancy=vacancy).exists()
    assert OutboxMessage.objects.count() == 1  # only the earlier offer's notice
    # Housekeeping keeps running while off: the earlier offer still expires (and cascades to DISABLED).
    frozen_clock.move_to(earlier.expires_at)
    with on_commit(execute=True):
        assert services.expire_run()["expired"] == 1
    earlier.refresh_from_db()
    assert earlier.status == OfferStatus.EXPIRED and earlier.hold.status == "RELEASED"
    result = services.reconcile_run()
    assert result["dispatch"] == {"DISABLED": 2}
    assert not Offer.objects.filter(status__in=ACTIVE_OFFER_STATUSES).exists()
    assert deliver() == {"SENT": 1}  # the old notice is finished as skipped, never sent
    assert OutboxMessage.objects.get().last_error_code == "OFFER_CLOSED"

    flag(enabled=True, all_tenants=True)
    first = services.reconcile_run()
    second = services.reconcile_run()
    assert first["dispatch"] == {"OFFERED": 2}  # both vacancies, one offer each
    assert "OFFERED" not in second["dispatch"]
    for v in (vacancy, earlier.vacancy):
        assert Offer.objects.filter(vacancy=v, status__in=ACTIVE_OFFER_STATUSES).count() == 1


def test_tenant_allowlist_and_clinic_switch(world):
    world.waiting()
    vacancy = open_vacancy(world)
    other_tenant = f.TenantGroupFactory()
    flag(enabled=True, all_tenants=False, allow_tenants=[other_tenant])
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "DISABLED"
    flag(allow_tenants=[world.clinic.tenant_group])
    flag(clinic=world.clinic, clinic_enabled=False)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "DISABLED"
    flag(clinic=world.clinic, clinic_enabled=True)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"


def test_dispatch_api_answers_disabled(world, staff_api):
    world.waiting()
    vacancy = open_vacancy(world)
    flag(enabled=False)
    response = staff_api.post(f"/api/v1/clinics/{world.clinic.ref}/vacancies/{vacancy.ref}/dispatch")
    body = response.json()
    assert response.status_code == 200 and (body["outcome"], body["offer"]) == ("DISABLED", None)


@pytest.mark.race
@pytest.mark.django_db(transaction=True)
def test_re_enabling_with_racing_reconcilers_and_dispatchers_makes_exactly_one_offer():
    import time_machine

    from tests.waitlist.factories import NOW
    from tests.worlds import waitlist_world

    with time_machine.travel(NOW, tick=False):
        world = waitlist_world()
        flag(enabled=False)
        for _ in range(3):
            world.waiting()
        vacancy = open_vacancy(world)
        flag(enabled=True, all_tenants=True)

        def work(i):
            if i % 2:
                return services.reconcile_run()
            return services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome

        results = race(work, 6)
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert Offer.objects.filter(vacancy=vacancy, status__in=ACTIVE_OFFER_STATUSES).count() == 1
    assert Offer.objects.count() == 1 and OutboxMessage.objects.count() == 1

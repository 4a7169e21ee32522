"""A hypothesis state machine over cancel/dispatch/claim/decline/expire/withdraw/book.

The starting state (four waiting patients, one slot OFFERED, another ACCEPTED) is built once; each
example runs inside a savepoint on top of it that is rolled back at teardown, so examples are
independent, start from the same rows and are fast; the invariants are checked against the database
after every step.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import Prefetch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from common.errors import DomainError
from scheduling.models import (
    Appointment,
    AppointmentStatus,
    CapacityAllocation,
    CapacityHold,
    Clinic,
    HoldStatus,
    Patient,
    Practitioner,
    Treatment,
)
from scheduling.services import appointment_book
from tests import factories as f
from tests.conftest import seoul
from tests.waitlist.factories import NOW, decide
from tests.worlds import waitlist_world
from waitlist import services
from waitlist.models import (
    ACTIVE_OFFER_STATUSES,
    EntryStatus,
    Offer,
    OfferStatus,
    Vacancy,
    VacancyStatus,
    WaitlistEntry,
)

SLOTS = [seoul(3, 10), seoul(3, 11), seoul(4, 10)]
SEEN: Counter = Counter()  # which command outcomes the run reached (so it is not vacuous)


class WaitlistMachine(RuleBasedStateMachine):
    #: The starting state every example begins from (:func:`_initial_state`), built once per test run:
    #: each example runs in a savepoint on top of it and is rolled back at teardown.
    initial: dict = {}

    def __init__(self):
        super().__init__()
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        self.now = NOW

    @initialize()
    def world(self):
        """Fresh copies of the starting state's rows (a step may have changed an in-memory copy)."""
        initial = self.initial
        self.clinic = Clinic.objects.get(pk=initial["clinic"])
        self.doctor = Practitioner.objects.get(pk=initial["doctor"])
        self.treatment = Treatment.objects.get(pk=initial["treatment"])
        patients = Patient.objects.in_bulk(initial["patients"])
        self.patients = [patients[pk] for pk in initial["patients"]]

    @classmethod
    def build_initial_state(cls) -> None:
        """Four waiting patients with decisions; one slot OFFERED, another ACCEPTED (claim, decline and
        book have a target in every example, whichever rules hypothesis enables)."""
        machine = object.__new__(cls)  # only the helpers are used: no hypothesis state, no savepoint
        machine.now = NOW
        world = waitlist_world()
        machine.clinic, machine.doctor, machine.treatment = world.clinic, world.doctor, world.treatment
        machine.patients = [world.patient() for _ in range(4)]
        for i, patient in enumerate(machine.patients):
            world.waiting(
                patient,
                fresh=False,
                practitioner=machine.doctor if i % 2 else None,
                priority_rank=i % 3,
                waiting_since=NOW - timedelta(hours=i),
            )
            decide(patient)  # rank 0: the decision's rank becomes the entry's
        for slot in (0, 1):
            machine.cancel(slot, 5)
            machine.dispatch_vacancy(slot)
        first = Offer.objects.filter(clinic=machine.clinic).order_by("pk").first()
        if first is not None:
            machine._try(services.offer_claim, offer_ref=first.ref, expected_version=first.version)
        cls.initial = {
            "clinic": machine.clinic.pk,
            "doctor": machine.doctor.pk,
            "treatment": machine.treatment.pk,
            "patients": [p.pk for p in machine.patients],
        }

    def teardown(self):
        transaction.set_rollback(True)
        self._atomic.__exit__(None, None, None)

    # --- helpers ---------------------------------------------------------------------------

    def _pick(self, queryset, index):
        rows = list(queryset.order_by("pk"))
        return rows[index % len(rows)] if rows else None

    def _try(self, command, **kwargs):
        try:
            result = command(clinic=self.clinic, now=self.now, **kwargs)
        except DomainError as exc:
            SEEN[f"{command.__name__}: {exc.code}"] += 1
            return None
        SEEN[f"{command.__name__}: {getattr(result, 'outcome', 'ok')}"] += 1
        return result

    # --- rules -----------------------------------------------------------------------------

    @rule(slot=st.integers(0, len(SLOTS) - 1), who=st.integers(0, 5))
    def cancel(self, slot, who):
        patient = self.patients[who] if who < len(self.patients) else f.PatientFactory(clinic=self.clinic)
        try:
            appointment = appointment_book(
                clinic=self.clinic,
                patient=patient,
                practitioner=self.doctor,
                treatment=self.treatment,
                starts_at=SLOTS[slot],
                status=AppointmentStatus.CONFIRMED,
            )
        except DomainError:
            return  # the slot is taken (booked, held or offered)
        self._try(services.appointment_cancel_with_vacancy, appointment_ref=appointment.ref, reason="x")

    @rule(index=st.integers(0, 10))
    def dispatch_vacancy(self, index):
        vacancy = self._pick(Vacancy.objects.filter(clinic=self.clinic), index)
        if vacancy is not None:
            self._try(services.vacancy_dispatch, vacancy_ref=vacancy.ref)

    @rule(index=st.integers(0, 10), stale=st.booleans())
    def claim(self, index, stale):
        offer = self._pick(Offer.objects.filter(clinic=self.clinic), index)
        if offer is not None:
            version = offer.version - 1 if stale else offer.version
            self._try(services.offer_claim, offer_ref=offer.ref, expected_version=max(version, 1))

    @rule(index=st.integers(0, 10))
    def decline(self, index):
        offer = self._pick(Offer.objects.filter(clinic=self.clinic), index)
        if offer is not None:
            self._try(services.offer_decline, offer_ref=offer.ref)

    @rule(minutes=st.integers(0, 30))
    def expire(self, minutes):
        self.now += timedelta(minutes=minutes)
        SEEN["expired"] += services.offers_expire_due(now=self.now)

    @rule(index=st.integers(0, 10))
    def withdraw_offer(self, index):
        offer = self._pick(Offer.objects.filter(clinic=self.clinic), index)
        if offer is not None:
            self._try(services.offer_withdraw, offer_ref=offer.ref, actor=None, reason="staff")

    @rule(index=st.integers(0, 10))
    def withdraw_entry(self, index):
        entry = self._pick(WaitlistEntry.objects.filter(clinic=self.clinic), index)
        if entry is not None:
            self._try(services.entry_withdraw, entry_ref=entry.ref, actor=None, reason="staff")

    @rule(index=st.integers(0, 10))
    def book(self, index):
        offer = self._pick(Offer.objects.filter(clinic=self.clinic).select_related("hold"), index)
        if offer is not None:
            self._try(services.offer_book, hold_ref=offer.hold.ref)

    # --- invariants ------------------------------------------------------------------------

    # Each invariant reads its rows in a few statements (not one per row): it runs after every step.

    def _offers(self) -> list[Offer]:
        """The clinic's offers with their hold, the hold's appointment and its active allocations."""
        live = Prefetch("hold__allocations", CapacityAllocation.objects.filter(active=True), to_attr="live")
        return list(
            Offer.objects.filter(clinic=self.clinic).select_related("hold__appointment").prefetch_related(live)
        )

    @invariant()
    def at_most_one_active_offer_per_vacancy(self):
        active = Counter(
            Offer.objects.filter(clinic=self.clinic, status__in=ACTIVE_OFFER_STATUSES).values_list(
                "vacancy_id", flat=True
            )
        )
        assert all(n <= 1 for n in active.values()), active

    @invariant()
    def every_active_offer_has_an_active_hold(self):
        for offer in self._offers():
            hold, live = offer.hold, offer.hold.live
            if offer.status == OfferStatus.OFFERED:
                assert hold.status == HoldStatus.ACTIVE and len(live) == 1
            elif offer.status == OfferStatus.ACCEPTED and hold.status == HoldStatus.ACCEPTED:
                assert len(live) == 1 and live[0].appointment_id is None
            elif offer.status == OfferStatus.ACCEPTED:
                # Booked: the hold's allocation moved to the CONFIRMED appointment in place.
                assert hold.status == HoldStatus.CONSUMED
                assert hold.appointment.status == AppointmentStatus.CONFIRMED
                assert len(live) == 1 and live[0].appointment_id == hold.appointment_id
            else:
                assert hold.status == HoldStatus.RELEASED and not live

    @invariant()
    def no_overlapping_allocations(self):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM scheduling_capacityallocation a JOIN scheduling_capacityallocation b"
                " ON a.id < b.id AND a.clinic_id = b.clinic_id AND a.practitioner_id = b.practitioner_id"
                " AND a.period && b.period WHERE a.active AND b.active AND a.clinic_id = %s",
                [self.clinic.pk],
            )
            assert cursor.fetchone()[0] == 0

    @invariant()
    def entry_and_offer_states_agree(self):
        active_by_entry: dict[int, list[Offer]] = {}
        for offer in Offer.objects.filter(clinic=self.clinic, status__in=ACTIVE_OFFER_STATUSES).select_related(
            "hold"
        ):
            active_by_entry.setdefault(offer.entry_id, []).append(offer)
        for entry in WaitlistEntry.objects.filter(clinic=self.clinic):
            active = active_by_entry.get(entry.pk, [])
            assert len(active) <= 1
            if entry.status == EntryStatus.OFFERED:
                assert [o.status for o in active] == [OfferStatus.OFFERED]
            elif entry.status == EntryStatus.ACCEPTED:
                assert [(o.status, o.hold.status) for o in active] == [
                    (OfferStatus.ACCEPTED, HoldStatus.ACCEPTED)
                ]
            elif entry.status == EntryStatus.BOOKED:
                assert [(o.status, o.hold.status) for o in active] == [
                    (OfferStatus.ACCEPTED, HoldStatus.CONSUMED)
                ]
            else:
                assert active == []

    @invariant()
    def filled_vacancies_are_booked(self):
        filled = set(
            Vacancy.objects.filter(clinic=self.clinic, status=VacancyStatus.FILLED).values_list("pk", flat=True)
        )
        accepted = [
            o for o in Offer.objects.filter(vacancy_id__in=filled, status=OfferStatus.ACCEPTED).select_related("hold")
        ]
        assert sorted(o.vacancy_id for o in accepted) == sorted(filled)  # exactly one ACCEPTED offer each
        assert all(o.hold.status == HoldStatus.CONSUMED for o in accepted)
        assert not CapacityHold.objects.filter(
            clinic=self.clinic, status=HoldStatus.CONSUMED, appointment=None
        )
        assert Appointment.objects.filter(
            clinic=self.clinic, status=AppointmentStatus.CONFIRMED
        ).count() <= len(SLOTS)


@pytest.mark.django_db
def test_waitlist_state_machine():
    # The starting state is built once (it was built again for every example: a third of the run);
    # each example starts from exactly it and is rolled back to it.
    WaitlistMachine.build_initial_state()
    initial = _database_state(WaitlistMachine.initial["clinic"])
    assert initial["offers"] == [OfferStatus.ACCEPTED, OfferStatus.OFFERED], initial  # the interesting start
    run_state_machine_as_test(
        WaitlistMachine,
        settings=settings(
            max_examples=30,
            stateful_step_count=15,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
            database=None,
        ),
    )
    assert _database_state(WaitlistMachine.initial["clinic"]) == initial  # every example was rolled back
    print(sorted(SEEN.items()))
    for reached in ("vacancy_dispatch: OFFERED", "offer_claim: ok", "offer_book: ok"):
        assert SEEN[reached], (reached, SEEN)


def _database_state(clinic_id: int) -> dict:
    return {
        "offers": sorted(Offer.objects.filter(clinic_id=clinic_id).values_list("status", flat=True)),
        "entries": sorted(WaitlistEntry.objects.filter(clinic_id=clinic_id).values_list("status", "version")),
        "vacancies": sorted(Vacancy.objects.filter(clinic_id=clinic_id).values_list("status", "version")),
        "appointments": sorted(Appointment.objects.filter(clinic_id=clinic_id).values_list("status", flat=True)),
    }

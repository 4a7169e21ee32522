"""Availability (issue 40): the matcher never yields an entry for a time its patient said they cannot come, and
the API stores and shows what the patient said. Real PostgreSQL; hypothesis draws days, parts of the day and
slot times."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import seoul
from tests.waitlist.factories import NOW
from waitlist import services
from waitlist.dispatch import matcher
from waitlist.joining import availability as av
from waitlist.models import Vacancy
from waitlist.reliability.feed import StoredDecisionProvider

SEOUL = ZoneInfo("Asia/Seoul")
choices = st.fixed_dictionaries({
    "days": st.sets(st.sampled_from(av.DAYS), min_size=1),
    "parts": st.sets(st.sampled_from(av.PARTS), min_size=1),
})


def can_come(days, parts, starts_at) -> bool:
    """The specification, in words: the slot's weekday is one of the days and its start hour in one of the parts
    (morning before 12, afternoon 12 to 17, evening from 17), clinic time."""
    local = starts_at.astimezone(SEOUL)
    part = "MORNING" if local.hour < 12 else "AFTERNOON" if local.hour < 17 else "EVENING"
    return local.strftime("%a").upper()[:3] in days and part in parts


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(patients=st.lists(choices, min_size=1, max_size=5), day=st.integers(2, 8), half_hour=st.integers(14, 41))
def test_the_matcher_never_offers_a_time_outside_the_patients_availability(world, patients, day, half_hour):
    starts = seoul(day, 0) + timedelta(minutes=30 * half_hour)  # 07:00 to 20:30, any day of a week
    with transaction.atomic():
        entries = {world.waiting(availability=av.mask_of(p["days"], p["parts"]), earliest=seoul(2, 0),
                                 latest=seoul(10, 0)).pk: p for p in patients}
        vacancy = Vacancy.objects.create(
            vacancy_key=f"availability:{Vacancy.objects.count()}", clinic=world.clinic,
            tenant_group=world.clinic.tenant_group, practitioner=world.doctor, treatment=world.treatment,
            starts_at=starts, ends_at=starts + timedelta(minutes=30))
        vacancy = Vacancy.objects.select_related("clinic", "resource").get(pk=vacancy.pk)
        policy = services.policy_current(clinic=world.clinic)
        yielded = {c.entry_id for c in matcher.candidates(vacancy=vacancy, policy=policy,
                                                          provider=StoredDecisionProvider(), now=NOW)}
        assert yielded == {pk for pk, p in entries.items() if can_come(p["days"], p["parts"], starts)}
        transaction.set_rollback(True)


def test_staff_set_availability_on_create_and_read_it_back(world, staff_api):
    patient = world.patient()
    answer = staff_api.post(f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/", {
        "patient": patient.ref, "treatment": world.treatment.ref, "earliest": "2030-12-02", "latest": "2030-12-09",
        "availability": {"days": ["SAT"], "parts": ["MORNING"]}}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["availability"] == {"any_time": False, "slots": ["SAT:MORNING"]}


def test_an_entry_without_availability_can_come_any_time(world, staff_api):
    answer = staff_api.post(f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/", {
        "patient": world.patient().ref, "treatment": world.treatment.ref, "earliest": "2030-12-02",
        "latest": "2030-12-09"}, format="json")
    assert answer.json()["availability"]["any_time"] is True


def test_an_empty_availability_is_refused(world, staff_api):
    answer = staff_api.post(f"/api/v1/clinics/{world.clinic.ref}/waitlist-entries/", {
        "patient": world.patient().ref, "treatment": world.treatment.ref, "earliest": "2030-12-02",
        "latest": "2030-12-09", "availability": {"slots": []}}, format="json")
    assert answer.status_code == 400 and "availability" in answer.json()["fields"]

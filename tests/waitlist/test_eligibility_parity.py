"""One definition of hard eligibility, three readers (issue 11): for generated entries and vacancies, the
matcher's page SQL returns exactly the entries ``matcher.ineligibility`` calls eligible (and passes over,
with the same reason, exactly those it names NO_CONTACT_CONSENT/PATIENT_OVERLAP), and the console's review
evidence fails exactly the checks the explanation fails. The expected outcome of every rule comes from
the generated case itself (the spec below), not from the code under test. Real PostgreSQL; each example
runs in a savepoint that is rolled back."""

from __future__ import annotations

from datetime import timedelta

from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.models import CapacityHold, ConsentState
from scheduling.services.consent import consent_record
from tests import factories as f
from tests.conftest import seoul
from tests.waitlist.factories import NOW, WaitlistEntryFactory
from tests.worlds import waitlist_world
from waitlist import services
from waitlist.dispatch import matcher
from waitlist.figures.panels import review_vacancies
from waitlist.joining import availability as av
from waitlist.models import Offer, Vacancy, VacancySkip, WaitlistEntry
from waitlist.reliability.feed import StoredDecisionProvider
from waitlist.rules import eligibility

SLOT = (seoul(3, 10), seoul(3, 10, 30))
WINDOWS = {
    "fits": (seoul(2, 0), seoul(9, 0)),
    "exact": SLOT,  # inclusive at both ends
    "starts_late": (seoul(3, 10, 1), seoul(9, 0)),
    "ends_early": (seoul(2, 0), seoul(3, 10, 29)),
}
PASSED_OVER = {rule.code for rule in eligibility.RULES if rule.passed_over}
# The slot is a Tuesday morning in Seoul: availabilities that include it, and two that do not.
AVAILABILITY = {
    "any": av.ANY_TIME,
    "slot": av.mask_of(["TUE"], ["MORNING"]),
    "other_part": av.mask_of(["TUE"], ["AFTERNOON", "EVENING"]),
    "other_day": av.mask_of(["MON", "WED"], ["MORNING"]),
}

patients = st.fixed_dictionaries({
    "consent": st.sampled_from(["GRANTED", "GRANTED", "REVOKED", "NONE"]),
    "overlap": st.booleans(),
    "recent_offers": st.integers(0, 2),
})
entries = st.fixed_dictionaries({
    "patient": st.integers(0, 2),
    "foreign": st.sampled_from([False] * 7 + [True]),
    "status": st.sampled_from(["WAITING", "WAITING", "WAITING", "OFFERED"]),
    "practitioner": st.sampled_from(["any", "doctor", "other"]),
    "treatment": st.sampled_from(["same", "same", "other"]),
    "window": st.sampled_from(sorted(WINDOWS)),
    "availability": st.sampled_from(["any", "any", "slot", "other_part", "other_day"]),
    "paused": st.sampled_from([None, None, "past", "future"]),
    "resource_kind": st.sampled_from(["", "", "XRAY", "MRI"]),
    "suppressed": st.sampled_from([None, None, "past", "future"]),
    "offered": st.sampled_from([None, None, "DECLINED", "WITHDRAWN_NON_BARRING", "WITHDRAWN_BARRING"]),
    "skipped": st.sampled_from([False, False, False, True]),
    "rank": st.integers(0, 2),
    "age_minutes": st.integers(0, 3),
})
cases = st.fixed_dictionaries({
    "patients": st.lists(patients, min_size=3, max_size=3),
    "entries": st.lists(entries, min_size=1, max_size=7),
    "resource": st.sampled_from([None, "XRAY"]),
    "excluded": st.sampled_from([None, 0, 1]),
    "cap": st.sampled_from([None, 1, 2]),
    "page_size": st.sampled_from([1, 2, 50]),
})


def expected_rules(case, spec) -> dict[str, bool]:
    """Each rule's outcome for one generated entry, read off the case (the specification)."""
    if spec["foreign"]:  # another tenant's entry (the factory's defaults): the clinic and treatment differ
        return {rule.code: rule.code not in ("SCOPE", "TREATMENT") for rule in eligibility.RULES}
    patient = case["patients"][spec["patient"]]
    recent = patient["recent_offers"]
    return {
        "ENTRY_NOT_WAITING": spec["status"] == "WAITING",
        "SCOPE": True,
        "TREATMENT": spec["treatment"] == "same",
        "PRACTITIONER": spec["practitioner"] in ("any", "doctor"),
        "WINDOW": spec["window"] in ("fits", "exact"),
        "UNAVAILABLE": spec["availability"] in ("any", "slot"),
        "PAUSED": spec["paused"] != "future",
        "RESOURCE": spec["resource_kind"] in ("", case["resource"]),
        "CANCELLING_PATIENT": spec["patient"] != case["excluded"],
        "SUPPRESSED": spec["suppressed"] != "future",
        "ALREADY_OFFERED": spec["offered"] not in ("DECLINED", "WITHDRAWN_BARRING"),
        "SKIPPED_BY_STAFF": not spec["skipped"],
        "NO_CONTACT_CONSENT": patient["consent"] == "GRANTED",
        "PATIENT_OVERLAP": not patient["overlap"],
        "WEEKLY_CAP": case["cap"] is None or recent < case["cap"],
    }


def first_failed(rules: dict[str, bool]) -> str | None:
    return next((rule.code for rule in eligibility.RULES if not rules[rule.code]), None)


class _Setup:
    def __init__(self, world, elsewhere):
        self.world, self.elsewhere = world, elsewhere

    def patient(self, spec):
        clinic = self.world.clinic
        patient = f.PatientFactory(clinic=clinic, consent=spec["consent"] != "NONE")
        if spec["consent"] == "REVOKED":
            consent_record(patient=patient, channels=["EMAIL", "SMS"], state=ConsentState.REVOKED, source="STAFF",
                           actor_label="test")
        if spec["overlap"]:  # an appointment of the patient's own at 10:15 (another practitioner)
            self.world.confirmed(seoul(3, 10, 15), patient=patient, practitioner=f.PractitionerFactory(clinic=clinic))
        return patient

    def offer(self, vacancy, entry, policy, *, status, reason_code="", created_at):
        hold = CapacityHold.objects.create(
            clinic=vacancy.clinic, practitioner=vacancy.practitioner, treatment=vacancy.treatment,
            patient=entry.patient, starts_at=vacancy.starts_at, ends_at=vacancy.ends_at, status="RELEASED",
            expires_at=vacancy.starts_at,
        )
        return Offer.objects.create(
            clinic=vacancy.clinic, tenant_group=vacancy.tenant_group, vacancy=vacancy, entry=entry,
            patient=entry.patient, hold=hold, status=status, reason_code=reason_code, expires_at=vacancy.starts_at,
            policy=policy, policy_version=policy.version, policy_digest="x", decision_ref="d", decision_status="FRESH",
            slot_fit=0, correlation_id="test", created_at=created_at,
        )

    def vacancy(self, case, patients, suffix=""):
        world = self.world
        resource = f.ResourceFactory(clinic=world.clinic, kind=case["resource"]) if case["resource"] else None
        return Vacancy.objects.create(
            vacancy_key=f"parity:{Vacancy.objects.count()}{suffix}", clinic=world.clinic,
            tenant_group=world.clinic.tenant_group, practitioner=world.doctor, treatment=world.treatment,
            resource=resource, starts_at=SLOT[0], ends_at=SLOT[1],
            excluded_patient=patients[case["excluded"]] if case["excluded"] is not None else None,
        )

    def build(self, case):
        world = self.world
        policy = services.policy_current(clinic=world.clinic)
        policy.pk, policy.ref, policy.version = None, "", policy.version + 1
        policy.weekly_offer_cap, policy.page_size = case["cap"], case["page_size"]
        policy.save()
        patients = [self.patient(spec) for spec in case["patients"]]
        vacancy = self.vacancy(case, patients)
        for patient, spec in zip(patients, case["patients"], strict=True):
            for i in range(spec["recent_offers"]):  # offers of other vacancies this week (the weekly cap)
                other = WaitlistEntryFactory(clinic=world.clinic, patient=patient, treatment=world.treatment,
                                             status="WITHDRAWN")
                elsewhere = Vacancy.objects.create(
                    vacancy_key=f"parity-other:{other.pk}:{i}", clinic=world.clinic,
                    tenant_group=world.clinic.tenant_group, practitioner=world.doctor, treatment=world.treatment,
                    starts_at=seoul(5, 10), ends_at=seoul(5, 10, 30))
                self.offer(elsewhere, other, policy, status="DECLINED", created_at=NOW - timedelta(days=1))
        made = []
        for spec in case["entries"]:
            if spec["foreign"]:
                entry = WaitlistEntryFactory(clinic=self.elsewhere.clinic, treatment=self.elsewhere.treatment)
            else:
                earliest, latest = WINDOWS[spec["window"]]
                doctor = {"any": None, "doctor": world.doctor, "other": world.other_doctor}[spec["practitioner"]]
                suppressed = {None: None, "past": NOW - timedelta(hours=1), "future": NOW + timedelta(hours=1)}
                entry = WaitlistEntryFactory(
                    clinic=world.clinic, patient=patients[spec["patient"]], practitioner=doctor,
                    treatment=world.treatment if spec["treatment"] == "same" else world.other_treatment,
                    earliest=earliest, latest=latest, resource_kind=spec["resource_kind"],
                    availability=AVAILABILITY[spec["availability"]], paused_until=suppressed[spec["paused"]],
                    suppressed_until=suppressed[spec["suppressed"]], status=spec["status"],
                    priority_rank=spec["rank"], waiting_since=NOW - timedelta(minutes=spec["age_minutes"]),
                )
            if spec["offered"] and not spec["foreign"]:  # older than a week: not counted by the cap
                status, reason = {"DECLINED": ("DECLINED", ""), "WITHDRAWN_BARRING": ("WITHDRAWN", "STAFF"),
                                  "WITHDRAWN_NON_BARRING": ("WITHDRAWN", "VACANCY_CLOSED")}[spec["offered"]]
                self.offer(vacancy, entry, policy, status=status, reason_code=reason,
                           created_at=NOW - timedelta(days=10))
            if spec["skipped"] and not spec["foreign"]:
                VacancySkip.objects.create(clinic=world.clinic, vacancy=vacancy, entry=entry, actor="test")
            made.append(entry)
        return policy, Vacancy.objects.select_related("clinic", "resource").get(pk=vacancy.pk), made


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=cases)
def test_page_sql_explanation_and_review_evidence_agree(world, case):
    from tests.waitlist.factories import lift_entry_window_guard

    lift_entry_window_guard()  # generated cases give one patient overlapping entries (rolled back with the test)
    elsewhere = waitlist_world() if not hasattr(world, "_elsewhere") else world._elsewhere
    world._elsewhere = elsewhere
    with transaction.atomic():
        policy, vacancy, made = _Setup(world, elsewhere).build(case)
        expected = {e.pk: expected_rules(case, spec) for e, spec in zip(made, case["entries"], strict=True)}

        # The explanation: the first failed rule, in RULES order.
        for entry in made:
            assert matcher.ineligibility(entry=entry, vacancy=vacancy, policy=policy, now=NOW) == first_failed(
                expected[entry.pk]), (entry.pk, expected[entry.pk])

        # The matcher's page SQL (both tiers, keyset pages of 1, 2 or 50): eligible entries are yielded,
        # entries failing only a passed-over rule are named with that rule's code, nothing else is read.
        stats = matcher.MatchStats()
        yielded = {c.entry_id for c in matcher.candidates(
            vacancy=vacancy, policy=policy, provider=StoredDecisionProvider(), now=NOW, stats=stats)}
        assert stats.exhausted
        assert yielded == {pk for pk, rules in expected.items() if all(rules.values())}
        passed_over = {
            pk: first_failed(rules) for pk, rules in expected.items()
            if not all(rules.values()) and all(ok for code, ok in rules.items() if code not in PASSED_OVER)
        }
        assert {pk: reason for pk, _ref, reason in stats.passed_over} == passed_over

        # The console's review evidence: the same checks fail.
        names = {rule.code: rule.check for rule in eligibility.RULES}
        for entry in made:
            Vacancy.objects.filter(pk=vacancy.pk).update(review_entry=entry)
            checks = review_vacancies(world.clinic, NOW).filter(pk=vacancy.pk).values_list(
                "review_checks", flat=True).get()
            assert dict(zip(eligibility.CHECK_NAMES, checks, strict=True)) == {
                names[code]: ok for code, ok in expected[entry.pk].items()}, entry.pk
        transaction.set_rollback(True)
    assert not WaitlistEntry.objects.filter(pk__in=[e.pk for e in made]).exists()

"""The waitlist console page: readiness, metrics, action queue with evidence, vacancy panel, commands, roles."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from common.models import AuditEntry, CommandReceipt
from scheduling.models import AppointmentStatus, HoldStatus
from tests.conftest import seoul
from tests.operations.waitlist_helpers import (
    bulk_reviews,
    bulk_vacancies,
    dead_delivery_offer,
    make_offer,
    review_vacancy,
)
from waitlist import services
from waitlist.models import EntryStatus, Offer, OfferEvent, OfferStatus, VacancyStatus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]
HX = {"HTTP_HX_REQUEST": "true"}


def page_url(clinic, **params) -> str:
    url = reverse("console:waitlist", kwargs={"clinic_ref": clinic.ref})
    return url + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def url(name: str, clinic, **kwargs) -> str:
    return reverse(f"console:{name}", kwargs={"clinic_ref": clinic.ref, **kwargs})


def queue_refs(html: str) -> list[str]:
    return re.findall(r'<tr data-queue-ref="([^"]+)"', html)


def cursor(html: str) -> str | None:
    match = re.search(r'hx-get="[^"]*\?after=([^"&]+)"', html)
    return match.group(1) if match else None


def command(web, name, clinic, *, key="k-1", reason="patient asked by phone", **kwargs):
    data = {"reason": reason, "confirm": "on", "idempotency_key": key, **kwargs.pop("data", {})}
    return web.post(url(f"waitlist-{name}", clinic, **kwargs), data, **HX)


# --- the page -------------------------------------------------------------------------------------


def test_nav_slot_is_a_link_now(staff_web, clinic):
    html = staff_web.get(url("clinic-home", clinic)).content.decode()
    assert f'href="{page_url(clinic)}"' in html


def test_staff_sees_readiness_metrics_queue_evidence_and_no_withdraw(staff_web, world):
    offer = dead_delivery_offer(world)  # first: the review's stale candidate would be eligible for it too
    vacancy, entry = review_vacancy(world)
    html = staff_web.get(page_url(world.clinic)).content.decode()
    # Readiness and metrics
    assert 'data-testid="flag-state" title="the feature flag">On<' in html and 'data-testid="policy-version">1<' in html
    freshness = re.search(r'data-testid="decision-freshness">(.*?)</dd>', html, re.S).group(1)
    assert re.search(r'data-code="STALE">Out of date .*?</span>\s*1 ', freshness), freshness
    assert 'data-testid="outbox"' in html and "1 could not be delivered" in html
    for metric in ("fill_rate", "time_to_fill", "offers_per_vacancy", "acceptance_per_offer", "expired_vs_declined",
                   "exhausted", "delivery_failures"):
        assert f'data-metric="{metric}"' in html
    assert 'hx-trigger="every 15s, waitlist-changed from:body"' in html
    # The queue with evidence: the review candidate's ordering key, policy, decision and checks.
    refs = queue_refs(html)
    assert vacancy.ref in refs and len(refs) == 2
    assert entry.ref in html and "DECISION_STALE" in html and "SMTP_UNAVAILABLE" in html
    assert "any practitioner · priority" in html and 'data-code="NORMAL"><code class="code">NORMAL</code>' in html
    assert '✓ <span class="code-label" title="TREATMENT: ' in html and "checked now" in html
    assert "checked when offered" in html and offer.ref in html and " KST" in html
    # STAFF: mark reviewed and re-dispatch, never withdraw.
    assert 'data-command="review"' in html and 'data-command="withdraw"' not in html
    panel = staff_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref=offer.vacancy.ref), **HX).content.decode()
    assert url("waitlist-withdraw", world.clinic, offer_ref=offer.ref) not in panel
    assert 'data-testid="admin-only"' in panel


def test_admin_sees_withdraw(admin_web, world):
    offer = dead_delivery_offer(world)
    html = admin_web.get(page_url(world.clinic)).content.decode()
    assert 'data-command="withdraw"' in html
    panel = admin_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref=offer.vacancy.ref), **HX).content.decode()
    assert url("waitlist-withdraw", world.clinic, offer_ref=offer.ref) in panel
    assert panel.count('id="withdraw_reason"') == 1


def test_readiness_poll_and_queue_refresh_return_fragments(staff_web, world):
    vacancy, _ = review_vacancy(world)
    poll = staff_web.get(page_url(world.clinic), HTTP_HX_TARGET="wl-readiness", **HX).content.decode()
    assert poll.lstrip().startswith('<section id="wl-readiness"') and "<html" not in poll
    rows = staff_web.get(page_url(world.clinic), HTTP_HX_TARGET="wl-queue-rows", **HX).content.decode()
    assert "<html" not in rows and "wl-readiness" not in rows and queue_refs(rows) == [vacancy.ref]


def test_queue_load_more_walks_every_row_once(staff_web, world, settings):
    settings.CONSOLE_WAITLIST_PAGE_SIZE = 4
    expected = sorted(v.ref for v in bulk_reviews(world, 10))  # same review time: ordered by ref
    html = staff_web.get(page_url(world.clinic)).content.decode()
    seen, after = queue_refs(html), cursor(html)
    while after:
        with CaptureQueriesContext(connection) as ctx:
            fragment = staff_web.get(page_url(world.clinic, after=after), **HX).content.decode()
        assert "<html" not in fragment
        assert not any("OFFSET" in q["sql"].upper() for q in ctx.captured_queries)
        seen += queue_refs(fragment)
        after = cursor(fragment)
    assert seen == expected


def test_detail_panel_fragment_full_page_and_scope(staff_web, world, other_tenant_clinic):
    vacancy, entry = review_vacancy(world)
    response = staff_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref=vacancy.ref), **HX)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert 'data-testid="review-evidence"' in html and entry.ref in html and "STALE" in html
    assert url("waitlist-review", world.clinic, vacancy_ref=vacancy.ref) in html and 'name="resolution"' in html
    assert "<html" in staff_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref=vacancy.ref)).content.decode()
    assert staff_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref="vac_nope")).status_code == 404


def test_outsider_anonymous_and_methods(outsider_web, client, staff_web, world):
    vacancy, _ = review_vacancy(world)
    assert outsider_web.get(page_url(world.clinic)).status_code == 404
    assert outsider_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref=vacancy.ref)).status_code == 404
    assert command(outsider_web, "review", world.clinic, vacancy_ref=vacancy.ref,
                   data={"resolution": "PROMOTE"}).status_code == 404
    assert client.get(page_url(world.clinic)).status_code == 302
    assert staff_web.post(page_url(world.clinic)).status_code == 405
    assert staff_web.get(url("waitlist-review", world.clinic, vacancy_ref=vacancy.ref)).status_code == 405
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.REVIEW
    assert not AuditEntry.objects.filter(action="waitlist.vacancy_review_resolve").exists()


def test_a_bad_cursor_is_400(staff_web, world):
    assert staff_web.get(page_url(world.clinic, after="x" * 300), **HX).status_code == 400


# --- commands -------------------------------------------------------------------------------------


def test_staff_cannot_withdraw_even_by_posting(staff_web, world):
    offer = dead_delivery_offer(world)
    response = command(staff_web, "withdraw", world.clinic, offer_ref=offer.ref)
    assert response.status_code == 403
    offer.refresh_from_db()
    assert offer.status == OfferStatus.OFFERED
    assert not AuditEntry.objects.filter(action="waitlist.offer_withdraw").exists()
    assert not CommandReceipt.objects.exists()


def test_admin_withdraws_with_toast_refresh_audit_and_replay(admin_web, admin, world):
    offer = dead_delivery_offer(world)
    response = command(admin_web, "withdraw", world.clinic, offer_ref=offer.ref, key="wd-1")
    assert response.status_code == 200, response.content
    html = response.content.decode()
    assert 'data-testid="command-result"' in html and "WITHDRAWN" in html
    events = json.loads(response["HX-Trigger"])
    assert "waitlist-changed" in events and events["console-toast"]["level"] == "success"
    offer.refresh_from_db()
    assert offer.status == OfferStatus.WITHDRAWN and offer.hold.status == HoldStatus.RELEASED
    audit = AuditEntry.objects.get(action="waitlist.offer_withdraw")
    assert audit.actor == admin and audit.reason == "patient asked by phone" and audit.correlation_id
    event = OfferEvent.objects.get(offer=offer, reason_code="STAFF_WITHDRAWN")
    assert event.actor == admin.username and event.correlation_id == audit.correlation_id
    again = command(admin_web, "withdraw", world.clinic, offer_ref=offer.ref, key="wd-1")
    assert again.status_code == 200 and "replayed" in again.content.decode()
    assert AuditEntry.objects.filter(action="waitlist.offer_withdraw").count() == 1
    reused = command(admin_web, "withdraw", world.clinic, offer_ref=offer.ref, key="wd-1", reason="other reason")
    assert reused.status_code == 422 and reused["HX-Reswap"] == "none"
    # The row left the queue (its offer is no longer open: DELIVERY_DEAD rows stay, but no withdraw command).
    page = admin_web.get(page_url(world.clinic)).content.decode()
    assert 'data-command="withdraw"' not in page
    audit_page = admin_web.get(url("audit", world.clinic)).content.decode()
    assert "waitlist.offer_withdraw" in audit_page


def test_another_clinics_refs_are_404_and_change_nothing(admin_web, world, other_tenant_clinic):
    from tests import factories as f
    from tests.operations.waitlist_helpers import waitlist_world as other_world

    foreign = dead_delivery_offer(other_world(other_tenant_clinic, f.UserFactory()))
    for name, kwargs in (("withdraw", {"offer_ref": foreign.ref}), ("retry-booking", {"hold_ref": foreign.hold.ref}),
                         ("redispatch", {"vacancy_ref": foreign.vacancy.ref})):
        response = command(admin_web, name, world.clinic, key=f"f-{name}", **kwargs)
        assert response.status_code == 404 and response["HX-Reswap"] == "none", name
    response = command(admin_web, "review", world.clinic, key="f-review", vacancy_ref=foreign.vacancy.ref,
                       data={"resolution": "PROMOTE"})
    assert response.status_code == 404
    assert admin_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref=foreign.vacancy.ref)).status_code == 404
    foreign.refresh_from_db()
    assert foreign.status == OfferStatus.OFFERED
    assert not AuditEntry.objects.filter(action__in=["waitlist.offer_withdraw", "waitlist.vacancy_redispatch",
                                                      "waitlist.booking_retry"]).exists()


def test_staff_marks_a_review_promoted(staff_web, staff, world):
    vacancy, entry = review_vacancy(world)
    response = command(staff_web, "review", world.clinic, vacancy_ref=vacancy.ref, key="rv-1",
                       data={"resolution": "PROMOTE"})
    assert response.status_code == 200, response.content
    assert "PROMOTE" in response.content.decode() and "OFFERED" in response.content.decode()
    offer = Offer.objects.get(vacancy=vacancy)
    assert offer.entry_id == entry.pk
    audit = AuditEntry.objects.get(action="waitlist.vacancy_review_resolve")
    assert audit.actor == staff and audit.idempotency_key == "rv-1"
    assert queue_refs(staff_web.get(page_url(world.clinic), HTTP_HX_TARGET="wl-queue-rows", **HX)
                      .content.decode()) == []  # the review row is gone


def test_staff_skips_a_review_and_redispatches(staff_web, world):
    vacancy, entry = review_vacancy(world)
    response = command(staff_web, "review", world.clinic, vacancy_ref=vacancy.ref, data={"resolution": "SKIP"})
    assert response.status_code == 200 and "NO_CANDIDATE" in response.content.decode()
    vacancy.refresh_from_db()
    assert vacancy.status == VacancyStatus.OPEN
    redispatch = command(staff_web, "redispatch", world.clinic, vacancy_ref=vacancy.ref, key="rd-1")
    assert redispatch.status_code == 200  # the standard dispatch may come back to the skipped entry
    assert AuditEntry.objects.filter(action="waitlist.vacancy_redispatch", idempotency_key="rd-1").count() == 1


def test_a_domain_refusal_is_a_toast_and_changes_nothing(staff_web, world):
    offer = make_offer(world)
    response = command(staff_web, "review", world.clinic, vacancy_ref=offer.vacancy.ref, data={"resolution": "SKIP"})
    assert response.status_code == 409 and response["HX-Reswap"] == "none"
    assert "VACANCY_NOT_IN_REVIEW" in json.loads(response["HX-Trigger"])["console-toast"]["message"]
    assert not AuditEntry.objects.filter(action="waitlist.vacancy_review_resolve").exists()


def test_staff_retries_a_stuck_booking(staff_web, world, frozen_clock, settings):
    offer = make_offer(world)
    # The claim page's accept under ON_ACCEPT (a booking command) whose booking never finished.
    services.offer_claim(clinic=world.clinic, offer_ref=offer.ref, expected_version=1, request_booking=True)
    frozen_clock.shift(60 * 11)
    html = staff_web.get(page_url(world.clinic)).content.decode()
    assert "BOOKING_STUCK" in html and 'data-command="retry_booking"' in html
    response = command(staff_web, "retry-booking", world.clinic, hold_ref=offer.hold.ref)
    assert response.status_code == 200 and AppointmentStatus.CONFIRMED in response.content.decode()
    offer.entry.refresh_from_db()
    assert offer.entry.status == EntryStatus.BOOKED


def test_invalid_form_is_shown_again(staff_web, world):
    vacancy, _ = review_vacancy(world)
    response = staff_web.post(url("waitlist-review", world.clinic, vacancy_ref=vacancy.ref),
                              {"reason": "x", "idempotency_key": "iv"}, **HX)
    assert response.status_code == 200 and response.content.decode().count('class="field-error"') >= 2
    assert not AuditEntry.objects.filter(action="waitlist.vacancy_review_resolve").exists()


def test_actor_in_the_body_changes_nothing(admin_web, admin, staff, world):
    offer = dead_delivery_offer(world)
    forged = {"actor": staff.username, "actor_label": "someone-else", "actor_id": staff.pk}
    assert command(admin_web, "withdraw", world.clinic, offer_ref=offer.ref, data=forged).status_code == 200
    # Outside the withdrawn entry's window, so that entry (WAITING again, FRESH) is not a candidate.
    vacancy, _ = review_vacancy(world, starts_at=seoul(12, 10), earliest=seoul(12, 0), latest=seoul(13, 0))
    command(admin_web, "review", world.clinic, vacancy_ref=vacancy.ref, key="k-2",
            data={"resolution": "PROMOTE", **forged})
    rows = AuditEntry.objects.filter(action__in=["waitlist.offer_withdraw", "waitlist.vacancy_review_resolve"])
    assert rows.count() == 2 and {r.actor_id for r in rows} == {admin.pk}
    assert set(OfferEvent.objects.filter(reason_code__in=["STAFF_WITHDRAWN", "STAFF_REVIEWED"])
               .values_list("actor", flat=True)) == {admin.username}


# --- query counts ---------------------------------------------------------------------------------


def _count(web, path, **headers) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert web.get(path, **headers).status_code == 200
    return len(ctx.captured_queries)


def test_page_queries_do_not_grow_with_queue_rows_or_vacancies(staff_web, world, settings):
    settings.CONSOLE_WAITLIST_PAGE_SIZE = 50
    settings.WAITLIST_FAIRNESS_CACHE_SECONDS = 0  # every load computes fairness (its cache: test_fairness_cache)
    settings.WAITLIST_READINESS_CACHE_SECONDS = 0  # ... and the figures kept a few seconds
    settings.WAITLIST_DECISION_FRESHNESS_CACHE_SECONDS = 0  # ... and the decision freshness counts
    dead_delivery_offer(world)
    bulk_reviews(world, 3)
    bulk_vacancies(world, 5)
    small = _count(staff_web, page_url(world.clinic))
    bulk_reviews(world, 27, start=3)
    bulk_vacancies(world, 45, start=200)
    assert len(queue_refs(staff_web.get(page_url(world.clinic)).content.decode())) == 31
    big = _count(staff_web, page_url(world.clinic))
    assert small == big
    poll = _count(staff_web, page_url(world.clinic), HTTP_HX_TARGET="wl-readiness", **HX)
    assert poll < big


def test_exact_query_counts(staff_web, world, settings, django_assert_num_queries):
    settings.CONSOLE_WAITLIST_PAGE_SIZE = 3
    offer = dead_delivery_offer(world)
    bulk_reviews(world, 8)
    # session, user, clinic scope, switcher; snapshot: policy, jobs, flag, freshness (the provider's SQL
    # expression per waiting patient, counted in SQL), outbox x2, metrics x2, fairness x3, shadow x1 (none
    # published), queue x11 (one per source, texts' two included, plus the policy's lead time for waiting
    # vacancies) + the review rows' decisions; evidence x2 (review vacancies, offers: only for kinds on the page) +
    # the review candidates' decisions; warnings; the open vacancies of today and tomorrow; the offers in flight.
    # Decisions are one DecisionProvider batch each. Issue 44 §5 and issue 40: + the upkeep questions by outcome,
    # fill over time, fairness over time (one grouped query each; the two series kept per clinic after).
    with django_assert_num_queries(37):
        html = staff_web.get(page_url(world.clinic)).content.decode()
    # session, user, clinic scope, queue x10 (the provider's failure streak is kept from the first load) +
    # decisions, evidence (reviews only here) + decisions
    with django_assert_num_queries(16):
        staff_web.get(page_url(world.clinic, after=cursor(html)), **HX)
    # session, user, clinic scope, vacancy, offers, events, dispatch notes, pass-over counts, EHR identifiers
    with django_assert_num_queries(9):
        staff_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref=offer.vacancy.ref), **HX)


def test_the_fill_metrics_outbox_health_and_provider_streak_are_kept_a_few_seconds_per_clinic(
        staff_web, world, settings):
    settings.WAITLIST_READINESS_CACHE_SECONDS = 10

    def figures() -> list[str]:
        with CaptureQueriesContext(connection) as ctx:
            assert staff_web.get(page_url(world.clinic)).status_code == 200
        return [q["sql"] for q in ctx.captured_queries if "WITH v AS" in q["sql"]
                or ("common_outboxattempt" in q["sql"] and "interop_subscription" not in q["sql"])]

    assert len(figures()) >= 3  # fill metrics, outbox health, the provider's streak
    assert figures() == []


def test_the_decision_freshness_counts_are_kept_a_minute_per_clinic(staff_web, world, settings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.WAITLIST_READINESS_CACHE_SECONDS = 0  # the other figures are read on every load: not these
    world.waiting()
    first = staff_web.get(page_url(world.clinic), HTTP_HX_TARGET="wl-readiness", **HX)
    with CaptureQueriesContext(connection) as again:
        second = staff_web.get(page_url(world.clinic), HTTP_HX_TARGET="wl-readiness", **HX)
    assert first.status_code == second.status_code == 200
    assert not any("WITH waiting AS MATERIALIZED" in q["sql"] for q in again.captured_queries)
    assert first.content == second.content


def test_decision_freshness_is_one_query_whatever_the_waiting_patients(world, django_assert_num_queries):
    """Each WAITING patient counted once, by the effective status of the newest decision (a FRESH one
    past its expiry is STALE; none is MISSING), in one statement however many patients wait."""
    from datetime import timedelta

    from django.utils import timezone

    from tests.waitlist.factories import decide
    from waitlist.figures.metrics import decision_freshness
    from waitlist.models import DecisionStatus

    now = timezone.now()
    later, earlier = now + timedelta(days=1), now - timedelta(minutes=1)
    fresh, expired, renewed, unavailable, missing = (world.patient() for _ in range(5))
    for patient in (fresh, expired, renewed, unavailable, missing):
        world.waiting(patient, fresh=False)
    world.waiting(fresh, fresh=False, earliest=seoul(10, 0), latest=seoul(17, 0))  # a second entry: still one patient
    decide(fresh, DecisionStatus.FRESH, expires_at=later)
    decide(expired, DecisionStatus.FRESH, expires_at=later, ref="expired-old")
    decide(expired, DecisionStatus.FRESH, expires_at=earlier, ref="expired-new")  # newest wins, and it has expired
    decide(renewed, DecisionStatus.STALE, expires_at=later, ref="renewed-old")
    decide(renewed, DecisionStatus.FRESH, expires_at=later, ref="renewed-new")
    decide(unavailable, DecisionStatus.UNAVAILABLE, expires_at=later)
    gone = world.patient()  # not waiting any more: not counted
    left = world.waiting(gone, fresh=False)
    type(left).objects.filter(pk=left.pk).update(status=EntryStatus.WITHDRAWN)
    with django_assert_num_queries(1):
        counts = decision_freshness(clinic=world.clinic, now=now)
    assert counts == {"FRESH": 2, "STALE": 1, "UNAVAILABLE": 1, "MISSING": 1}
    for _ in range(30):
        world.waiting(world.patient(), fresh=False)
    with django_assert_num_queries(1):
        assert decision_freshness(clinic=world.clinic, now=now) == {**counts, "MISSING": 31}


def test_the_vacancy_panel_shows_a_kept_late_yes_and_the_booking_it_became(staff_web, world, frozen_clock):
    """Staff see that a patient said yes after their window (issue 22's late accept), and which offer it became."""
    from tests.conftest import assert_no_pii, seoul
    from tests.waitlist.loop_helpers import let_expire, open_vacancy

    services.policy_publish(clinic=world.clinic, contact_cap_per_day=None, weekly_offer_cap=None,
                            decline_suppression_hours=0)
    first, second = world.waiting(priority_rank=5), world.waiting(priority_rank=1)
    vacancy = open_vacancy(world, seoul(3, 10))
    late = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer
    let_expire(late, frozen_clock)
    other = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).offer
    assert services.offer_late_accept(clinic=world.clinic, offer_ref=late.ref, patient=late.patient).kept
    staff_web.force_login(world.staff)  # the clock moved past the console's idle timeout
    panel = staff_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref=vacancy.ref), **HX).content.decode()
    assert 'data-testid="late-yes-kept"' in panel and late.ref in panel and "Late yes</span>" not in panel
    services.offer_decline(clinic=world.clinic, offer_ref=other.ref, patient=other.patient, reason="PATIENT_DECLINED")
    taken = services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref)
    assert taken.outcome == "BOOKED" and first.pk == taken.offer.entry_id and second.pk == other.entry_id
    panel = staff_web.get(url("waitlist-vacancy", world.clinic, vacancy_ref=vacancy.ref), **HX).content.decode()
    assert 'data-testid="late-yes-kept"' not in panel and "Late yes</span>" in panel
    assert_no_pii(panel, [first.patient, second.patient])

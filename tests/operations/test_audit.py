"""The audit log page: scope, order, the clinic's time zone, keyset "load more", filter, query counts."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from common.models import AuditEntry
from tests.operations.conftest import make_audit

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def audit_url(clinic, **params) -> str:
    url = reverse("console:audit", kwargs={"clinic_ref": clinic.ref})
    if params:
        url += "?" + "&".join(f"{k}={v}" for k, v in params.items())
    return url


def shown_refs(html: str) -> list[str]:
    return re.findall(r'<tr data-ref="([^"]+)"', html)


def next_cursor(html: str) -> str | None:
    match = re.search(r'hx-get="[^"]*after=([^"&]+)"', html)
    return match.group(1) if match else None


def test_staff_and_admin_read_the_clinics_entries_newest_first(
    staff_web, admin_web, clinic, other_tenant_clinic
):
    entries = make_audit(clinic, 3)
    make_audit(other_tenant_clinic, 2, action="foreign.action")
    for web in (staff_web, admin_web):
        response = web.get(audit_url(clinic))
        assert response.status_code == 200
        html = response.content.decode()
        assert shown_refs(html) == [e.ref for e in reversed(entries)]
        assert "foreign.action" not in html


def test_each_row_shows_actor_time_in_clinic_zone_action_target_reason_key_and_result(
    staff_web, staff, clinic
):
    (entry,) = make_audit(clinic, 1, actor=staff, target_ref="off_abc123", reason="patient asked by phone")
    AuditEntry.objects.filter(pk=entry.pk).update(created_at=datetime(2030, 12, 3, 1, 2, 3, tzinfo=UTC))
    html = staff_web.get(audit_url(clinic)).content.decode()
    row = html.split(f'<tr data-ref="{entry.ref}">', 1)[1].split("</tr>", 1)[0]
    # 01:02 UTC is 10:02 in Asia/Seoul; the time wraps only between its date and its clock.
    assert '2030-12-03</span> <span class="nw">10:02:03 KST' in row
    assert "staff-user" in row
    assert "offer.withdraw" in row and "off_abc123" in row and "patient asked by phone" in row
    assert "idem-offer.withdraw-0000" in row
    # the result as readable fields, not raw JSON, a state in words
    assert '<dt>status</dt><dd><span class="code-label"' in row and 'data-code="WITHDRAWN"' in row


def test_a_result_time_is_shown_in_the_clinic_zone(staff_web, clinic):
    (entry,) = make_audit(clinic, 1)
    result = {"expires_at": "2030-12-03T01:02:03+00:00", "jobs": ["a", "b"]}
    AuditEntry.objects.filter(pk=entry.pk).update(result=result)
    html = staff_web.get(audit_url(clinic)).content.decode()
    row = html.split(f'<tr data-ref="{entry.ref}">', 1)[1].split("</tr>", 1)[0]
    assert "<dt>expires at</dt><dd>2030-12-03 10:02 KST</dd>" in row and "<dt>jobs</dt><dd>a, b</dd>" in row


def test_load_more_walks_every_entry_once_with_keyset_cursors(staff_web, clinic, settings):
    settings.CONSOLE_AUDIT_PAGE_SIZE = 4
    entries = make_audit(clinic, 10)
    # Several rows share one timestamp: the id tiebreaker must still give a total order.
    same = datetime(2030, 1, 1, tzinfo=UTC)
    AuditEntry.objects.filter(pk__in=[e.pk for e in entries[3:8]]).update(created_at=same)
    expected = list(
        AuditEntry.objects.filter(clinic_ref=clinic.ref)
        .order_by("-created_at", "-id")
        .values_list("ref", flat=True)
    )

    html = staff_web.get(audit_url(clinic)).content.decode()
    seen, cursor = shown_refs(html), next_cursor(html)
    pages = 1
    while cursor:
        response = staff_web.get(audit_url(clinic, after=cursor), **HX)
        fragment = response.content.decode()
        assert "<html" not in fragment  # a partial, appended in place of the "load more" row
        seen += shown_refs(fragment)
        cursor = next_cursor(fragment)
        pages += 1
    assert seen == expected
    assert pages == 3
    assert (
        json.loads(response.headers["HX-Trigger"])["console-toast"]["message"] == "That is the oldest entry."
    )


def test_load_more_without_htmx_renders_a_full_page(staff_web, clinic, settings):
    settings.CONSOLE_AUDIT_PAGE_SIZE = 2
    entries = make_audit(clinic, 3)
    response = staff_web.get(audit_url(clinic, after=entries[1].ref))
    assert "<html" in response.content.decode()
    assert shown_refs(response.content.decode()) == [entries[0].ref]


def test_a_cursor_from_another_clinic_yields_nothing(staff_web, clinic, other_tenant_clinic):
    make_audit(clinic, 3)
    (foreign,) = make_audit(other_tenant_clinic, 1)
    response = staff_web.get(audit_url(clinic, after=foreign.ref), **HX)
    assert response.status_code == 200
    assert shown_refs(response.content.decode()) == []


def test_filter_by_action(staff_web, clinic):
    make_audit(clinic, 2, action="offer.withdraw")
    kept = make_audit(clinic, 2, action="job.redrive")
    response = staff_web.get(audit_url(clinic, action="job.redrive"))
    assert shown_refs(response.content.decode()) == [e.ref for e in reversed(kept)]
    # htmx filter form: only the results block comes back.
    fragment = staff_web.get(audit_url(clinic, action="job.redrive"), HTTP_HX_TARGET="audit-results", **HX)
    html = fragment.content.decode()
    assert html.lstrip().startswith('<div id="audit-results">') and "<html" not in html
    assert shown_refs(html) == [e.ref for e in reversed(kept)]


def test_an_invalid_filter_is_a_400(staff_web, clinic):
    assert staff_web.get(audit_url(clinic, action="x" * 81)).status_code == 400


def test_outsider_gets_404_and_anonymous_is_sent_to_sign_in(outsider_web, client, clinic):
    make_audit(clinic, 1)
    assert outsider_web.get(audit_url(clinic)).status_code == 404
    assert client.get(audit_url(clinic)).status_code == 302


def test_audit_page_is_read_only(staff_web, clinic):
    assert staff_web.post(audit_url(clinic)).status_code == 405


@pytest.mark.parametrize("rows", [3, 60])
def test_query_count_does_not_grow_with_rows(staff_web, clinic, rows, django_assert_num_queries):
    make_audit(clinic, rows)
    # session, user, clinic_for_user, switcher clinics, one audit page
    with django_assert_num_queries(5):
        response = staff_web.get(audit_url(clinic))
    assert len(shown_refs(response.content.decode())) == min(rows, 50)


@pytest.mark.parametrize("rows", [53, 120])
def test_next_page_query_count_is_constant_and_never_uses_offset(
    staff_web, clinic, rows, django_assert_num_queries
):
    make_audit(clinic, rows)
    cursor = next_cursor(staff_web.get(audit_url(clinic)).content.decode())
    with CaptureQueriesContext(connection) as ctx, django_assert_num_queries(4):
        # session, user, clinic_for_user, one audit page (a fragment needs no switcher)
        staff_web.get(audit_url(clinic, after=cursor), **HX)
    assert not any("OFFSET" in q["sql"].upper() for q in ctx.captured_queries)


def test_first_page_sql_has_no_offset(staff_web, clinic):
    make_audit(clinic, 5)
    with CaptureQueriesContext(connection) as ctx:
        staff_web.get(audit_url(clinic))
    audit_sql = [q["sql"] for q in ctx.captured_queries if "common_auditentry" in q["sql"]]
    assert len(audit_sql) == 1 and "OFFSET" not in audit_sql[0].upper() and "LIMIT 51" in audit_sql[0]


def test_entries_outside_every_clinic_are_not_shown(staff_web, clinic):
    make_audit(clinic, 1)
    make_audit(None, 1, action="system.only")
    assert "system.only" not in staff_web.get(audit_url(clinic)).content.decode()


def test_recent_timestamps_sort_before_older_ones(staff_web, clinic):
    old, new = make_audit(clinic, 2)
    AuditEntry.objects.filter(pk=new.pk).update(created_at=old.created_at - timedelta(days=1))
    assert shown_refs(staff_web.get(audit_url(clinic)).content.decode()) == [old.ref, new.ref]


def test_filter_by_actor_and_partial_action(staff_web, clinic, staff):
    by_staff = make_audit(clinic, 1, action="waitlist.offer_withdraw", actor=staff)
    make_audit(clinic, 2, action="reevaluation.mode_set")
    html = staff_web.get(audit_url(clinic, action="WITHDRAW")).content.decode()
    assert shown_refs(html) == [by_staff[0].ref]
    html = staff_web.get(audit_url(clinic, actor=staff.username[:4])).content.decode()
    assert shown_refs(html) == [by_staff[0].ref]


def test_filter_by_date_range_in_the_clinics_zone(staff_web, clinic):
    old, recent = make_audit(clinic, 2)
    # 2030-12-01 23:30 in Seoul is still 14:30 UTC that day; 2030-12-03 09:00 Seoul.
    AuditEntry.objects.filter(pk=old.pk).update(created_at=datetime(2030, 12, 1, 14, 30, tzinfo=UTC))
    AuditEntry.objects.filter(pk=recent.pk).update(created_at=datetime(2030, 12, 3, 0, 0, tzinfo=UTC))
    html = staff_web.get(audit_url(clinic, date_from="2030-12-02", date_to="2030-12-03")).content.decode()
    assert shown_refs(html) == [recent.ref]
    html = staff_web.get(audit_url(clinic, date_to="2030-12-01")).content.decode()
    assert shown_refs(html) == [old.ref]


def test_previews_are_marked_and_can_be_shown_apart(staff_web, clinic):
    (preview,) = make_audit(clinic, 1, action="reevaluation.redrive_preview")
    (change,) = make_audit(clinic, 1, action="reevaluation.redrive_execute")
    html = staff_web.get(audit_url(clinic)).content.decode()
    assert f'<tr data-ref="{preview.ref}" class="preview">' in html and f'<tr data-ref="{change.ref}">' in html
    assert shown_refs(staff_web.get(audit_url(clinic, kind="previews")).content.decode()) == [preview.ref]
    assert shown_refs(staff_web.get(audit_url(clinic, kind="changes")).content.decode()) == [change.ref]


def test_load_more_keeps_every_filter(staff_web, clinic, settings):
    settings.CONSOLE_AUDIT_PAGE_SIZE = 2
    kept = make_audit(clinic, 3, action="waitlist.offer_withdraw")
    make_audit(clinic, 2, action="reevaluation.mode_set")
    html = staff_web.get(audit_url(clinic, action="withdraw", kind="changes")).content.decode()
    assert "action=withdraw&amp;kind=changes&amp;after=" in html
    cursor = next_cursor(html)
    more = staff_web.get(audit_url(clinic, action="withdraw", kind="changes", after=cursor), **HX).content.decode()
    assert shown_refs(html) + shown_refs(more) == [e.ref for e in reversed(kept)]

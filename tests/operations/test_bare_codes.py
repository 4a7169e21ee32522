"""No bare code on a console page: every code a person reads (a state, reason, failure class, warning, mode)
is shown through the ``{% code %}`` tag, in words with the code beside them (issue 44 §4).

Each console page is rendered with one of everything it can show and its visible text (not attributes, not
scripts, not the tag's own output) is scanned for codes: an UPPER_SNAKE word, or any word the glossary knows.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from operations.labels import GLOSSARY

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]

HX = {"HTTP_HX_REQUEST": "true"}
#: An UPPER_SNAKE word (``NO_CANDIDATE``), or an upper-case word the glossary knows (``REVIEW``, ``DRAINED``).
WORD = re.compile(r"(?<![\w/.-])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*(?![\w/.-])")
#: Upper-case words that are not codes a clinic needs words for: acronyms, HTTP verbs, the zone, the roles'
#: names (printed as "an ADMIN", the role a person is given).
NOT_CODES = {"ADMIN", "STAFF", "OWNER", "POST", "GET", "CSV", "API", "EHR", "FHIR", "SMS", "KST", "UTC", "OK", "ID",
             "CRM", "HTTP", "URL", "SQL", "PDF", "SVG", "CSP", "MFA", "FIFO", "ALL", "OTHER"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _VisibleText(HTMLParser):
    """The text a person reads, without script/style and without what the code tag already labelled."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip: list[str] = []  # the open elements inside a skipped one (their tag names)
        self._glue = False  # after <wbr>: the next text continues the word

    def handle_starttag(self, tag, attrs):
        if tag in VOID:
            self._glue = tag == "wbr"
            return
        classes = (dict(attrs).get("class") or "").split()
        if self._skip or tag in ("script", "style", "template") or "code-label" in classes:
            self._skip.append(tag)

    def handle_endtag(self, tag):
        if self._skip and tag in self._skip:
            while self._skip and self._skip.pop() != tag:
                pass

    def handle_data(self, data):
        if self._skip:
            return
        if self._glue and self.parts:
            self.parts[-1] += data
        else:
            self.parts.append(data)
        self._glue = False


def bare_codes(html: str) -> set[str]:
    parser = _VisibleText()
    parser.feed(html)
    text = " ".join(parser.parts)
    return {w for w in WORD.findall(text) if w not in NOT_CODES and ("_" in w or w in GLOSSARY or len(w) >= 3)}


def test_the_scanner_finds_a_bare_code_and_passes_a_labelled_one():
    labelled = ('<span class="code-label" title="x" data-code="NO_CANDIDATE">No candidate '
                '<code>NO_<wbr>CANDIDATE</code></span>')
    assert bare_codes(f"<p>{labelled} and REVIEW, <code>DRY_RUN</code></p>") == {"REVIEW", "DRY_RUN"}
    assert bare_codes(f'<p data-kind="OPEN">{labelled}<script>var A_B = 1</script></p>') == set()
    assert bare_codes("<p><code>pt_<wbr>97kMqQ-O_<wbr>NWM4UMV</code> and <code>GN-7KQ3</code></p>") == set()


@pytest.fixture
def seeded(world, admin):
    """One of everything (``console_seeded``, with reviews), a shadow policy and a job that needs staff."""
    from reevaluation.models import ClinicReevaluationSettings, JobState, ReevaluationJob
    from tests.operations.waitlist_helpers import bulk_reviews, console_seeded
    from tests.reevaluation import factories as rf
    from tests.reevaluation.conftest import post_event
    from waitlist import services

    services.shadow_publish(clinic=world.clinic, actor=admin, reason="try a shorter hold",
                            changes={"hold_minutes": 10})
    data = console_seeded(world, reviews=lambda w: bulk_reviews(w, 2, start=40))
    reeval = data["reeval"]
    staff_job = post_event(reeval, rf.fingerprint(f"{reeval.crm_ref}-2"), 1).job_ref
    ReevaluationJob.objects.filter(ref=staff_job).update(state=JobState.COMPLETED, needs_staff=True)
    return {**data, "settings": ClinicReevaluationSettings.objects.get(clinic=world.clinic)}


def _pages(data) -> dict[str, str]:
    c = data["clinic"].ref
    base = f"/console/c/{c}"
    return {
        "overview": f"{base}/",
        "waitlist": f"{base}/waitlist/",
        "vacancies": f"{base}/waitlist/lists/vacancies/",
        "reviews": f"{base}/waitlist/lists/vacancies/?status=REVIEW",
        "offers": f"{base}/waitlist/lists/offers/",
        "entries": f"{base}/waitlist/lists/entries/",
        "vacancy": f"{base}/waitlist/vacancies/{data['offer'].vacancy.ref}/",
        "booked-vacancy": f"{base}/waitlist/vacancies/{data['booked'].vacancy.ref}/",
        "no-candidate": f"{base}/waitlist/vacancies/{data['empty'].ref}/",
        "review-vacancy": f"{base}/waitlist/vacancies/{data['reviews'][0].ref}/",
        "reevaluation": f"{base}/reevaluation/",
        "finished-jobs": f"{base}/reevaluation/finished/",
        "job": f"{base}/reevaluation/jobs/{data['job']}/",
        "rollback": f"{base}/reevaluation/rollback/",
        "controls": f"{base}/controls/",
        "desk": f"{base}/desk/",
        "audit": f"{base}/audit/",
        "entry-page": f"{base}/ref/{data['entry'].ref}/",
        "offer-page": f"{base}/ref/{data['offer'].ref}/",
        "booked-appointment": f"{base}/ref/{data['appointment'].ref}/",
        "cancelled-appointment": f"{base}/ref/{data['offer'].vacancy.source_appointment.ref}/",
        "access-log": f"{base}/patients/access-log/",
        "search": f"/console/search/?q={data['offer'].ref}",
    }


def _found(web, pages: dict[str, str]) -> dict[str, list[str]]:
    """page → each bare code with the words around it (what a failure shows)."""
    found = {}
    for name, path in pages.items():
        response = web.get(path, follow=True)
        assert response.status_code == 200, (name, path, response.status_code)
        html = response.content.decode()
        codes = bare_codes(html)
        if codes:
            parser = _VisibleText()
            parser.feed(html)
            text = re.sub(r"\s+", " ", " ".join(parser.parts))
            found[name] = sorted({f"{m.group(0)} in '…{text[max(0, m.start() - 40):m.end() + 20]}…'"
                                  for m in WORD.finditer(text) if m.group(0) in codes})
    return found


@pytest.mark.parametrize("who", ["admin", "staff"])
def test_no_console_page_shows_a_bare_code(seeded, admin_web, staff_web, who):
    web = admin_web if who == "admin" else staff_web
    pages = _pages(seeded)
    if who == "staff":
        del pages["access-log"]  # ADMIN only
    found = _found(web, pages)
    assert found == {}, "\n".join(f"{name}: {codes}" for name, codes in found.items())


@pytest.mark.parametrize("cause", ["PRIVACY_BOUNDARY", "QUARANTINE_REPEATED"])
def test_the_reevaluation_stop_banners_show_no_bare_code(seeded, staff_web, cause):
    from django.utils import timezone

    from reevaluation.models import ClinicReevaluationSettings

    ClinicReevaluationSettings.objects.filter(pk=seeded["settings"].pk).update(
        drain_state="DRAINED", drain_cause=cause, drain_changed_at=timezone.now(),
        drain_detail={"source": "ASSESSMENT", "latest_case": "qc_1", "latest_reason_code": "SIGNATURE_INVALID",
                      "quarantine_count": 5, "window_minutes": 10, "threshold": 5})
    html = staff_web.get(reverse("console:reevaluation", kwargs={"clinic_ref": seeded["clinic"].ref})).content.decode()
    assert "stop-banner" in html or "auto-drain-banner" in html
    assert sorted(bare_codes(html)) == []


def test_the_bulk_review_results_show_no_bare_code(seeded, staff_web):
    refs = [v.ref for v in seeded["reviews"]] + [seeded["empty"].ref]
    url = reverse("console:waitlist-review-bulk", kwargs={"clinic_ref": seeded["clinic"].ref})
    data = {"vacancies": refs, "resolution": "PROMOTE", "reason": "checked by phone", "idempotency_key": "b-1"}
    summary = staff_web.post(url, data, **HX).content.decode()
    done = staff_web.post(url, {**data, "confirm": "on"}, **HX).content.decode()
    assert 'data-ok="false"' in done
    assert (bare_codes(summary), bare_codes(done)) == (set(), set())

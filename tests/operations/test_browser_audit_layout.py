"""The audit log's Result column at 1280 px (issue 44 §6): values wrap between words (and after a code's
underscores, where the page offers a break), never inside a word. Measured in Chromium: every word's text range
must lie on one line."""

from __future__ import annotations

import re

import pytest

from tests.operations.browser_support import shot, sign_in
from tests.operations.conftest import make_audit

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 900}

# What real rows carry (a review's and a cancellation's results): refs, codes, times and numbers.
REVIEW_RESULT = {
    "status": "OPEN", "version": 4, "resolution": "PROMOTE", "entry": "wle_Kq3N0bT7xYv2LmPa",
    "reviewed_decision_ref": "dec-2030-12-01-reliability-feed-7731", "reviewed_decision_status": "UNAVAILABLE",
    "policy_version": 3, "standing": "MIN_NOTICE", "outcome": "OFFERED", "offer": "off_XothUvHLoZgoGpjN",
}
CANCEL_RESULT = {
    "status": "CANCELLED", "version": 2, "previous_status": "CONFIRMED", "reason_code": "PRACTITIONER_UNAVAILABLE",
    "cancelled_by": "integration:ehr-gangnam-production", "vacancy": "vac_CsFiVcyu065l8Wkg",
}

# For each text node of the Result cells, each word (split at spaces and after hyphens, where text may wrap): the
# distinct line tops of its range. A word on more than one line was broken inside it. (A code's <wbr> splits it
# into separate text nodes, so a break there is between two "words".)
SPLIT_WORDS_JS = """
() => {
  const split = [];
  for (const cell of document.querySelectorAll('#audit-rows td[data-label="Result"]')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent;
      const re = /[^\\s-]+-?/g;
      let m;
      while ((m = re.exec(text)) !== null) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) split.push(m[0]);
      }
    }
  }
  return split;
}
"""


def test_the_result_column_never_breaks_a_word_at_1280_px(open_page, staff, clinic):
    make_audit(clinic, 2, action="waitlist.vacancy_review_resolve", actor=staff, result=REVIEW_RESULT,
               reason="decision service is lagging; the patient confirmed by phone that the time suits them")
    make_audit(clinic, 2, action="appointment.cancel", actor=staff, result=CANCEL_RESULT,
               reason="the practitioner is away at a conference all week")
    page = open_page(DESKTOP)
    sign_in(page, staff.username)
    page.goto(f"/console/c/{clinic.ref}/audit/")
    page.wait_for_url(re.compile(r"/audit/$"))
    page.locator('#audit-rows td[data-label="Result"] dd').first.wait_for()
    shot(page, "audit-result-1280")
    assert page.evaluate(SPLIT_WORDS_JS) == []
    # And nothing is cut off instead: the table fits the page without scrolling sideways.
    assert page.evaluate("() => { const w = document.querySelector('#audit-results .table-wrap');"
                         " return w.scrollWidth <= w.clientWidth; }")
    assert page.errors == []

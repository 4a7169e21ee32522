"""The reevaluation proposal page in Chromium at 390 px (issue 44 §6): every new time is its own tappable choice
(a block at least 44 px high, one under the other, none overlapping), in Korean names, and axe-core finds no
critical or serious violation."""

from __future__ import annotations

import re

import pytest
import time_machine

from tests.conftest import seoul
from tests.operations.browser_support import shot
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import crm, post_event, run_round  # noqa: F401  (crm: the loopback CRM fixture)
from tests.support.axe import blocking_violations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_broker")]
pytest.importorskip("axe_playwright_python.sync_playwright")

PHONE = {"width": 390, "height": 844}
LINK = re.compile(r"https?://[^/\s]+(/claim/rp-[^/\s]+/)")

# Each choice's box: its top, bottom, height and width, and the width of the fieldset holding it.
BOXES_JS = """
() => [...document.querySelectorAll('label.option')].map(label => {
  const r = label.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, height: r.height, width: r.width,
          fieldset: label.closest('fieldset').getBoundingClientRect().width};
})
"""


@pytest.fixture
def proposal_path(clinic, crm):  # noqa: F811
    from reevaluation.proposals.models import AppointmentProposal
    from reevaluation.proposals.tokens import proposal_link
    from scheduling.services import display_name_set
    from tests.worlds import ReevaluationWorld

    world = ReevaluationWorld(clinic)
    world.patient.language = "ko"
    world.patient.save(update_fields=["language"])
    for kind, ref, name in (("clinic", clinic.ref, "강남 클리닉"), ("treatment", world.treatment.ref, "물리치료"),
                            ("practitioner", world.dr_a.ref, "김지훈 원장"),
                            ("practitioner", world.dr_b.ref, "서지원 원장")):
        display_name_set(clinic=clinic, kind=kind, ref=ref, language="ko", name=name)
    with time_machine.travel(seoul(4, 9), tick=True):  # the day before the visit: the proposal lives 24 h
        rf.enable(clinic, "APPLY_PROPOSED")
        world.book("CONFIRMED", 14)
        post_event(world, world.fp, 1, crm, constraints={"requiredPractitioner": world.dr_b.ref})
        assert run_round() == ["COMPLETED"]
        yield LINK.search(proposal_link(AppointmentProposal.objects.get())).group(1)


def test_the_proposal_page_at_390_px_shows_each_time_as_its_own_tappable_choice(open_page, proposal_path):
    page = open_page(PHONE)
    page.goto(proposal_path)
    page.locator("label.option").first.wait_for()
    shot(page, "proposal-ko-390")
    boxes = page.evaluate(BOXES_JS)
    assert len(boxes) == 3
    for box in boxes:
        assert box["height"] >= 44 and box["width"] >= box["fieldset"] * 0.8, box
    for above, below in zip(boxes, boxes[1:], strict=False):
        assert below["top"] >= above["bottom"], (above, below)
    text = page.locator("fieldset.options").inner_text()
    assert "서지원 원장" in text and "물리치료" in text
    assert blocking_violations(page) == []
    # Tapping a choice's text selects it.
    page.locator("label.option").nth(2).locator(".option-what").click()
    assert page.locator("label.option input").nth(2).is_checked()
    assert page.errors == []

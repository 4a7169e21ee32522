"""The opt-out page tells the patient how to reach the clinic (issue 44 §6): its name in the patient's language
and its phone, a tap-to-call link, both before and after opting out."""

from __future__ import annotations

import re

from scheduling.services import display_name_set
from tests.waitlist.loop_helpers import page_client, submit
from waitlist.offers.tokens import optout_link

OPTOUT = re.compile(r"https?://[^\s]+(/optout/[^/\s]+/)")


def _with_phone(world):
    world.clinic.settings = {"contact": {"phone": "+82 2-555-0100"}}
    world.clinic.save(update_fields=["settings"])
    display_name_set(clinic=world.clinic, kind="clinic", ref=world.clinic.ref, language="ko", name="강남 클리닉")


def _contact(html: str) -> str:
    return html.split('data-testid="contact"', 1)[1].split("</dl>", 1)[0]


def test_the_opted_out_page_shows_the_clinics_name_and_phone(world):
    _with_phone(world)
    patient = world.patient(language="ko")
    path = OPTOUT.search(optout_link(patient)).group(1)
    done = submit(page_client(), path, "stop").content.decode()
    assert "no more messages" in done or "메시지" in done
    contact = _contact(done)
    assert "강남 클리닉" in contact and 'href="tel:+822-555-0100"' in contact and "+82 2-555-0100" in contact


def test_the_opt_out_form_shows_the_phone_too(world):
    _with_phone(world)
    path = OPTOUT.search(optout_link(world.patient(language="en"))).group(1)
    contact = _contact(page_client().get(path).content.decode())
    assert world.clinic.name in contact and "+82 2-555-0100" in contact


def test_a_clinic_without_a_phone_shows_no_empty_contact(world):
    path = OPTOUT.search(optout_link(world.patient(language="en"))).group(1)
    html = page_client().get(path).content.decode()
    assert 'data-testid="contact"' not in html and "tel:" not in html

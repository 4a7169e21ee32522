"""The join page, the code page and the status page (issue 40), through Django's test client."""

from __future__ import annotations

import re

import pytest
import time_machine
from django.test import Client

from scheduling.models import JoinRequest
from tests.waitlist.factories import NOW
from tests.waitlist.joining_helpers import delivered_code, open_joining
from waitlist.joining import availability as av
from waitlist.joining.tokens import status_link
from waitlist.models import EntryStatus, WaitlistEntry

pytestmark = pytest.mark.django_db

FORM = {"name": "Lee Jun", "email": "jun@example.com", "consents": ["EMAIL"], "earliest": "2030-12-02",
        "latest": "2030-12-20", "days": ["MON", "WED"], "parts": ["EVENING"]}


def join(world, client, **overrides):
    data = {**FORM, "treatment": world.treatment.ref, **overrides}
    return client.post(f"/join/{world.clinic.ref}/", data)


def joined_entry(world, client) -> tuple[WaitlistEntry, str]:
    answer = join(world, client)
    code_path = answer["Location"].split("?")[0]
    verified = client.post(code_path, {"code": delivered_code(), "action": "verify"})
    assert verified.status_code == 302, verified.content
    return WaitlistEntry.objects.get(), verified["Location"].split("?")[0].lstrip("/")


def test_the_join_page_names_the_clinic_its_address_and_phone(world):
    open_joining(world)
    page = Client().get(f"/join/{world.clinic.ref}/")
    text = page.content.decode()
    assert page.status_code == 200
    assert world.clinic.name in text and "1 Teheran-ro, Seoul" in text and "+82 2 555 0100" in text
    assert world.treatment.name in text and world.other_treatment.name not in text


def test_the_join_page_speaks_korean(world):
    open_joining(world)
    page = Client().get(f"/join/{world.clinic.ref}/?lang=ko")
    assert page["Content-Language"] == "ko" and 'lang="ko"' in page.content.decode()
    assert "인증 번호 받기" in page.content.decode()  # "Send me a code"


def test_a_clinic_without_joining_has_no_join_page(world):
    assert Client().get(f"/join/{world.clinic.ref}/").status_code == 404


def test_joining_from_the_page_makes_a_waiting_entry_with_the_chosen_times(world):
    open_joining(world)
    entry, _status = joined_entry(world, Client())
    assert entry.status == EntryStatus.WAITING
    assert entry.availability == av.mask_of(["MON", "WED"], ["EVENING"])


def test_the_status_page_shows_the_entry_and_a_band_never_a_position(world):
    open_joining(world)
    client = Client()
    _entry, status_path = joined_entry(world, client)
    page = client.get("/" + status_path)
    text = page.content.decode()
    assert page.status_code == 200 and "Waiting" in text and "Near the front" in text
    assert not re.search(r"#\s*\d|\bposition\b", text, re.I)


def test_a_forged_status_link_is_not_found():
    assert Client().get("/join/status/not-a-token/").status_code == 404


def test_the_patient_edits_availability_and_dates_from_the_status_page(world):
    open_joining(world)
    client = Client()
    entry, status_path = joined_entry(world, client)
    answer = client.post("/" + status_path, {"entry": entry.ref, "action": "edit", "first": "2030-12-05",
                                            "last": "2030-12-12", "slots": ["SAT:MORNING"]})
    assert answer.status_code == 200, answer.content
    entry.refresh_from_db()
    assert entry.availability == av.mask_of(["SAT"], ["MORNING"])
    assert entry.earliest.date().isoformat() <= "2030-12-05" and entry.latest.date().isoformat() == "2030-12-12"


def test_the_patient_pauses_and_resumes_from_the_status_page(world):
    open_joining(world)
    client = Client()
    entry, status_path = joined_entry(world, client)
    client.post("/" + status_path, {"entry": entry.ref, "action": "pause", "weeks": "2"})
    entry.refresh_from_db()
    assert entry.paused_until is not None and entry.paused_until > NOW
    client.post("/" + status_path, {"entry": entry.ref, "action": "resume"})
    entry.refresh_from_db()
    assert entry.paused_until is None


def test_the_patient_leaves_with_their_words_recorded(world):
    from common.models import AuditEntry

    open_joining(world)
    client = Client()
    entry, status_path = joined_entry(world, client)
    client.post("/" + status_path, {"entry": entry.ref, "action": "leave", "words": "found another clinic"})
    entry.refresh_from_db()
    assert entry.status == EntryStatus.WITHDRAWN
    audit = AuditEntry.objects.filter(target_ref=entry.ref).order_by("-id").first()
    assert "found another clinic" in audit.reason


def test_another_patients_entry_cannot_be_changed_with_a_status_link(world):
    open_joining(world)
    client = Client()
    _entry, status_path = joined_entry(world, client)
    other = world.waiting()
    answer = client.post("/" + status_path, {"entry": other.ref, "action": "leave"})
    assert answer.status_code == 404
    other.refresh_from_db()
    assert other.status == EntryStatus.WAITING


def test_a_wrong_code_on_the_page_says_so_and_joins_nothing(world):
    open_joining(world)
    client = Client()
    code_path = join(world, client)["Location"].split("?")[0]
    code = delivered_code()
    page = client.post(code_path, {"code": "000000" if code != "000000" else "111111", "action": "verify"})
    assert page.status_code == 400 and "not right" in page.content.decode()
    assert not WaitlistEntry.objects.exists() and JoinRequest.objects.exists()


def test_the_status_link_expires(world, settings):
    open_joining(world)
    patient = world.patient()
    link = status_link(patient).split("://", 1)[1].split("/", 1)[1]
    with time_machine.travel(NOW.timestamp() + 91 * 86400, tick=False):
        assert Client().get("/" + link).status_code == 404

"""Issue 16: a full offer → claim flow leaves no claim token in any log record."""

from __future__ import annotations

import logging

from common.redaction import token_digest
from tests.waitlist.loop_helpers import LINK, deliver, make_offer, page_client, submit
from waitlist.models import OfferStatus
from waitlist.offers.tokens import claim_link


def _record_texts(record: logging.LogRecord) -> list[str]:
    texts = [record.getMessage(), record.exc_text or ""]
    texts += [value for value in vars(record).values() if isinstance(value, str)]
    return texts


def test_offer_delivery_and_claim_log_only_token_digests(world, caplog):
    caplog.set_level(logging.DEBUG)
    patient = world.patient(language="en")  # the clinic's default provider: console (logs the notice)
    offer = make_offer(world, patient)
    assert deliver() == {"SENT": 1}
    token = LINK.search(claim_link(offer)).group(1)  # the clock is frozen: the link that was sent
    path = f"/claim/{token}/"

    client = page_client()
    assert client.post(path, {"action": "accept"}).status_code == 403  # no CSRF: logged by Django
    assert submit(client, path, "accept").status_code == 200
    assert client.get(path).status_code == 200
    assert page_client().get(f"/claim/{token[:-2]}xx/").status_code == 404  # forged: django.request
    offer.refresh_from_db()
    assert offer.status == OfferStatus.ACCEPTED

    texts = [text for record in caplog.records for text in _record_texts(record)]
    assert caplog.records, "the flow logged nothing; the scan would prove nothing"
    assert not [text for text in texts if token in text or token[:-2] + "xx" in text]
    assert any(f"/claim/{token_digest(token)}/" in text for text in texts)  # the notice, as a digest
    assert any(record.name == "django.request" for record in caplog.records)


def test_encoded_claim_and_opt_out_paths_leave_no_token_in_any_log_record(world, caplog):
    from waitlist.offers.tokens import optout_link

    caplog.set_level(logging.DEBUG)
    patient = world.patient(language="en")
    offer = make_offer(world, patient)
    token = LINK.search(claim_link(offer)).group(1)
    optout = optout_link(patient).rstrip("/").rsplit("/", 1)[1]
    client = page_client()
    assert client.get(f"/cl%61im/{token}/").status_code == 200  # decoded once by the server: the claim page
    assert client.get(f"/cl%2561im/{token}/").status_code == 404  # double encoded: logged as Not Found
    client.get(f"/claim%2F{token}/")  # WSGI decodes %2F too: served or not, it must not be logged in clear
    assert client.post(f"/opt%6Fut/{optout}/").status_code == 403  # no CSRF: Django's CSRF warning

    texts = [text for record in caplog.records for text in _record_texts(record)]
    assert any(record.name in ("django.request", "django.security.csrf") for record in caplog.records)
    for secret in (token, optout):
        head = secret.split(":")[0]
        assert not [text for text in texts if head in text], secret

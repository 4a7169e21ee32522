"""Helpers of the self-service joining tests: a clinic that takes requests, and the code a request was sent."""

from __future__ import annotations

import re

from django.core import mail

from common.outbox import outbox_deliver_due
from scheduling.models import Role
from tests import factories as f
from waitlist.joining.services import join_settings_set


def open_joining(world, **changes):
    """The world's clinic takes self-service requests for its treatment, its codes going by e-mail."""
    world.clinic.settings = {**(world.clinic.settings or {}), "notification": {"provider": "email"},
                             "contact": {"address": "1 Teheran-ro, Seoul", "phone": "+82 2 555 0100"}}
    world.clinic.save(update_fields=["settings"])
    admin = f.user_with_role(world.clinic, Role.ADMIN)
    changes.setdefault("enabled", True)
    changes.setdefault("treatments", [world.treatment])
    return join_settings_set(clinic=world.clinic, actor=admin, reason="test", **changes)


def body(world, **overrides) -> dict:
    data = {"name": "Kim Minji", "email": "minji@example.com", "consents": ["EMAIL"],
            "treatment": world.treatment.ref, "earliest": "2030-12-02", "latest": "2030-12-20",
            "availability": {"days": ["MON", "TUE", "WED", "THU", "FRI"], "parts": ["MORNING", "AFTERNOON"]},
            "language": "en", "source": "website"}
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def delivered_code() -> str:
    """Send due notices, then the code of the last e-mail sent."""
    outbox_deliver_due(worker="test")
    assert mail.outbox, "no code was sent"
    match = re.search(r"\b(\d{6})\b", mail.outbox[-1].body)
    assert match, mail.outbox[-1].body
    return match.group(1)


def url(world, tail: str = "") -> str:
    return f"/api/v1/public/clinics/{world.clinic.ref}/waitlist-requests{tail}"

"""The clinic's integration settings an attacker could point inward: the webhook notice provider's URL and
the egress allowlist (``common.egress``). ADMIN only, audited, checked by the egress guard before they are
stored (issue 43)."""

from __future__ import annotations

from django.db import transaction

from common import egress
from common.errors import ValidationFailed
from common.services import audit_record

from ..models import Clinic
from ..scoping import require_command_role

PROVIDERS = ("console", "email", "webhook", "sms")


def clinic_integration_set(*, clinic: Clinic, actor, reason: str, allowlist: list[str] | None = None,
                           provider: str | None = None, webhook_url: str | None = None) -> dict:
    """Set any of the allowlist (host names and CIDRs; ``[]`` empties it), the notice provider and the webhook
    URL; the URL is checked against the allowlist it will be sent with. Returns the integration settings."""
    require_command_role(actor, clinic, "clinic_integration_set")
    if not reason.strip():
        raise ValidationFailed("Give a reason.", fields={"reason": ["required"]})
    if provider is not None and provider not in PROVIDERS:
        raise ValidationFailed(f"provider is one of {', '.join(PROVIDERS)}.", fields={"provider": ["invalid"]})
    with transaction.atomic():
        locked = Clinic.objects.select_for_update(no_key=True).get(pk=clinic.pk)
        settings = dict(locked.settings or {})
        if allowlist is not None:
            settings[egress.ALLOWLIST_KEY] = [str(entry) for entry in egress.parse_allowlist(allowlist)]
        notification = dict(settings.get("notification") or {})
        if provider is not None:
            notification["provider"] = provider
        if webhook_url is not None:
            notification["webhook_url"] = webhook_url
        if notification.get("provider") == "webhook" or webhook_url is not None:
            egress.check_url(notification.get("webhook_url", ""), egress.allowlist_for(settings), field="webhook_url")
        settings["notification"] = notification
        Clinic.objects.filter(pk=locked.pk).update(settings=settings)
        result = {"allowlist": settings.get(egress.ALLOWLIST_KEY, []), "provider": notification.get("provider", ""),
                  "webhook_url_set": bool(notification.get("webhook_url"))}
        audit_record(actor=actor, action="clinic_integration_set", clinic=locked, reason=reason, result=result)
    clinic.settings = settings
    return result

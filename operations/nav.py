"""The console's navigation: one slot per clinic section.

A slot whose URL name is not routed yet renders as a disabled "soon" item, so a later page plugs in
by adding its route (with that name) to ``operations/console_urls.py`` and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse


@dataclass(frozen=True)
class NavSlot:
    key: str
    label: str
    url_name: str


CLINIC_NAV: tuple[NavSlot, ...] = (
    NavSlot("home", "Overview", "console:clinic-home"),
    NavSlot("waitlist", "Waitlist", "console:waitlist"),
    NavSlot("desk", "Front desk", "console:desk"),
    NavSlot("reevaluation", "Reevaluation", "console:reevaluation"),
    NavSlot("audit", "Audit log", "console:audit"),
    NavSlot("controls", "Controls", "console:controls"),
)


@dataclass(frozen=True)
class NavItem:
    key: str
    label: str
    url: str | None
    current: bool


def clinic_nav(clinic_ref: str, current: str) -> list[NavItem]:
    items = []
    for slot in CLINIC_NAV:
        try:
            url = reverse(slot.url_name, kwargs={"clinic_ref": clinic_ref})
        except NoReverseMatch:
            url = None
        items.append(NavItem(slot.key, slot.label, url, slot.key == current))
    return items


def section_url(clinic_ref: str, section: str) -> str:
    """The same section in another clinic (for the switcher), or that clinic's overview."""
    for slot in CLINIC_NAV:
        if slot.key == section:
            try:
                return reverse(slot.url_name, kwargs={"clinic_ref": clinic_ref})
            except NoReverseMatch:
                break
    return reverse("console:clinic-home", kwargs={"clinic_ref": clinic_ref})

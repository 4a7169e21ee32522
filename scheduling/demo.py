"""Demo data for `make run`, built through the services so every invariant holds."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import cast
from zoneinfo import ZoneInfo

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from common.errors import SlotOccupied
from common.tokens import token_fresh

from .models import (
    Appointment,
    Clinic,
    ConsentSource,
    ContactChannel,
    Patient,
    Practitioner,
    Resource,
    Role,
    TenantGroup,
    Treatment,
)
from .services import appointment_book, clinic_grant_operate, clinic_grant_role, display_name_set, patient_create

DEMO_USERS = {
    "staff": ("staff-demo-password", "STAFF at Gangnam Clinic (Asia/Seoul)"),
    "admin": ("admin-demo-password", "ADMIN at Gangnam Clinic and Lisbon Clinic; reads the Django admin"),
    "outsider": ("outsider-demo-password", "STAFF at another tenant's clinic (sees none of the above)"),
}

CLINICS = [
    # ref, name, zone, practitioners, treatments (name, minutes), resources
    ("cl_demo_gangnam", "Gangnam Clinic", "Asia/Seoul", ["Dr. Seo", "Dr. Park"],
     [("Physiotherapy", 30), ("Consultation", 20)], ["Room 1", "Ultrasound"]),
    ("cl_demo_lisbon", "Lisbon Clinic", "Europe/Lisbon", ["Dr. Almeida", "Dr. Costa"],
     [("Dental check", 30), ("Cleaning", 45)], ["Chair A", "X-ray"]),
]
#: The names Korean-speaking patients read (``DisplayNamed.display_names``); the English ``name`` stays the fallback.
KOREAN_NAMES = {
    "Gangnam Clinic": "강남 클리닉",
    "Dr. Seo": "서지원 원장",
    "Dr. Park": "박민호 원장",
    "Physiotherapy": "물리치료",
    "Consultation": "진료 상담",
    "Lisbon Clinic": "리스본 클리닉",
    "Dr. Almeida": "알메이다 원장",
    "Dr. Costa": "코스타 원장",
    "Dental check": "치과 검진",
    "Cleaning": "스케일링",
    "Harbour Clinic": "하버 클리닉",
    "Dr. Reed": "리드 원장",
    "Check-up": "정기 검진",
}
#: What patients are told in booking confirmations (``clinic.settings["contact"]``); fictional numbers.
CONTACTS = {
    "cl_demo_gangnam": {"address": "123 Teheran-ro, Gangnam-gu, Seoul 06133", "phone": "+82 2-555-0100",
                        "address_ko": "서울특별시 강남구 테헤란로 123 (06133)"},
    "cl_demo_lisbon": {"address": "Avenida da Liberdade 100, 1250-146 Lisboa", "phone": "+351 21 555 0100"},
    "cl_demo_other": {"address": "1 Harbour Street, New York, NY 10004", "phone": "+1 212-555-0100"},
}
OTHER_CLINIC = ("cl_demo_other", "Harbour Clinic", "America/New_York", ["Dr. Reed"], [("Check-up", 30)], ["Room A"])

PATIENTS = {
    "cl_demo_gangnam": [("Kim Minji", "ko"), ("Lee Jiho", "ko"), ("Choi Yuna", "ko"), ("Alex Morgan", "en")],
    "cl_demo_lisbon": [("Ana Silva", "en"), ("João Pereira", "en"), ("Marta Sousa", "en")],
    "cl_demo_other": [("Sam Taylor", "en")],
}


def _clinic(tenant: TenantGroup, spec) -> Clinic:
    ref, name, zone, practitioners, treatments, resources = spec
    clinic, _ = Clinic.objects.get_or_create(
        ref=ref, defaults={"tenant_group": tenant, "name": name, "timezone": zone}
    )
    if ref in CONTACTS and not (clinic.settings or {}).get("contact"):
        clinic.settings = {**(clinic.settings or {}), "contact": CONTACTS[ref]}
        clinic.save(update_fields=["settings"])
    _korean_name(clinic)
    for n in practitioners:
        _korean_name(Practitioner.objects.get_or_create(clinic=clinic, name=n)[0])
    for n, minutes in treatments:
        _korean_name(Treatment.objects.get_or_create(clinic=clinic, name=n, defaults={"duration_minutes": minutes})[0])
    for n in resources:
        Resource.objects.get_or_create(clinic=clinic, name=n)
    for i, (display_name, language) in enumerate(PATIENTS[ref]):
        if not Patient.objects.filter(clinic=clinic, display_name=display_name).exists():
            slug = display_name.lower().replace(" ", ".")
            patient_create(
                clinic=clinic,
                display_name=display_name,
                email=f"{slug}@patients.example",
                phone=f"+8210555{i:04d}",
                language=language,
                crm_patient_ref=f"crm-{ref}-{i}",
                contact_consent=ContactChannel.values,
                consent_source=ConsentSource.IMPORT,
                actor_label="system:seed_demo",
            )
    return clinic


def _korean_name(row: Clinic | Practitioner | Treatment) -> None:
    """The demo's Korean name, unless one was set (``scheduling_display_name``)."""
    if row.name in KOREAN_NAMES and not (row.display_names or {}).get("ko"):
        clinic = row if isinstance(row, Clinic) else row.clinic
        display_name_set(clinic=clinic, kind=type(row).__name__.lower(), ref=row.ref, language="ko",
                         name=KOREAN_NAMES[row.name])


#: The demo ADMIN may open the Django admin to read these apps' rows (never patients: contacts stay out).
ADMIN_SITE_APPS = ("scheduling", "waitlist", "reevaluation", "common")
ADMIN_SITE_HIDDEN = {("scheduling", "patient")}


def _admin_site_reader(user) -> None:
    """Staff status plus ``view_*`` permissions only: the admin shows rows and can change none."""
    from django.contrib.auth.models import Permission

    if not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    views = Permission.objects.filter(content_type__app_label__in=ADMIN_SITE_APPS, codename__startswith="view_")
    user.user_permissions.add(*[p for p in views.select_related("content_type")
                                if (p.content_type.app_label, p.content_type.model) not in ADMIN_SITE_HIDDEN])


def _user(username: str):
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    if created:
        user.set_password(DEMO_USERS[username][0])
        user.save(update_fields=["password"])
    return user


def _appointments(clinic: Clinic) -> None:
    """A day of bookings tomorrow at 09:00-12:00 clinic time, if the clinic has none yet."""
    if Appointment.objects.filter(clinic=clinic).exists():
        return
    zone = ZoneInfo(clinic.timezone)
    tomorrow = timezone.now().astimezone(zone).date() + timedelta(days=1)
    practitioners = list(clinic.practitioners.order_by("pk"))
    treatment = clinic.treatments.order_by("pk").first()
    patients = list(clinic.patients.order_by("pk"))
    statuses = ["CONFIRMED", "CONFIRMED", "HELD", "PROPOSED"]
    for i, patient in enumerate(patients):
        starts_at = datetime.combine(tomorrow, time(9 + i), tzinfo=zone)
        try:
            appointment_book(
                clinic=clinic,
                patient=patient,
                practitioner=practitioners[i % len(practitioners)],
                treatment=cast(Treatment, treatment),  # the demo clinic was given treatments above
                starts_at=starts_at,
                status=statuses[i % len(statuses)],
            )
        except SlotOccupied:
            continue


def seed_scheduling() -> dict:
    with transaction.atomic():
        tenant, _ = TenantGroup.objects.get_or_create(ref="tg_demo", defaults={"name": "Demo Health"})
        other_tenant, _ = TenantGroup.objects.get_or_create(ref="tg_demo_other", defaults={"name": "Other Care"})
        clinics = [_clinic(tenant, spec) for spec in CLINICS]
        other = _clinic(other_tenant, OTHER_CLINIC)
        staff, admin, outsider = _user("staff"), _user("admin"), _user("outsider")
        clinic_grant_role(clinic=clinics[0], user=staff, role=Role.STAFF)
        for clinic in clinics:
            clinic_grant_role(clinic=clinic, user=admin, role=Role.ADMIN)
            clinic_grant_operate(clinic=clinic, user=admin)
        _admin_site_reader(admin)
        clinic_grant_role(clinic=other, user=outsider, role=Role.STAFF)
        for clinic in [*clinics, other]:
            _appointments(clinic)
        # A token too old for ADMIN commands (API_ADMIN_TOKEN_MAX_AGE_HOURS) is reissued.
        tokens = {u.username: token_fresh(u).key for u in (staff, admin, outsider)}
    return {"tenant": tenant, "clinics": clinics, "other_clinic": other, "users": {
        "staff": staff, "admin": admin, "outsider": outsider}, "tokens": tokens}

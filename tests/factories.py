"""Factories for every app's rows. Patient data is fake but recognisable, so privacy scans can find it."""

from __future__ import annotations

from datetime import timedelta

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduling import models as sm
from scheduling.services import clinic_grant_operate, clinic_grant_role


class TenantGroupFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sm.TenantGroup

    name = factory.Sequence(lambda n: f"Tenant {n}")


class ClinicFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sm.Clinic

    tenant_group = factory.SubFactory(TenantGroupFactory)
    name = factory.Sequence(lambda n: f"Clinic {n}")
    timezone = "Asia/Seoul"


class PractitionerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sm.Practitioner

    clinic = factory.SubFactory(ClinicFactory)
    name = factory.Sequence(lambda n: f"Dr. Practitioner {n}")


class TreatmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sm.Treatment

    clinic = factory.SubFactory(ClinicFactory)
    name = factory.Sequence(lambda n: f"Treatment {n}")
    duration_minutes = 30


class ResourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sm.Resource

    clinic = factory.SubFactory(ClinicFactory)
    name = factory.Sequence(lambda n: f"Room {n}")


class PatientFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = sm.Patient
        skip_postgeneration_save = True

    clinic = factory.SubFactory(ClinicFactory)
    tenant_group = factory.SelfAttribute("clinic.tenant_group")
    display_name = factory.Sequence(lambda n: f"Zelda Quixote-{n:04d}")
    email = factory.Sequence(lambda n: f"zelda.quixote{n:04d}@patients.example")
    phone = factory.Sequence(lambda n: f"+82105550{n:04d}")
    language = "en"

    @factory.post_generation
    def consent(obj, create, extracted, **kwargs):
        """Consented to both channels unless ``consent=False`` (or a list of channels) is given."""
        from scheduling.services.consent import consent_record

        channels = list(sm.ContactChannel.values) if extracted is None or extracted is True else extracted or []
        if create and channels:
            consent_record(patient=obj, channels=channels, state=sm.ConsentState.GRANTED,
                           source=sm.ConsentSource.IMPORT, actor_label="system:tests")


class AppointmentFactory(factory.django.DjangoModelFactory):
    """Builds rows directly (no allocation): use the booking service when capacity matters."""

    class Meta:
        model = sm.Appointment

    clinic = factory.SubFactory(ClinicFactory)
    patient = factory.SubFactory(PatientFactory, clinic=factory.SelfAttribute("..clinic"))
    practitioner = factory.SubFactory(PractitionerFactory, clinic=factory.SelfAttribute("..clinic"))
    treatment = factory.SubFactory(TreatmentFactory, clinic=factory.SelfAttribute("..clinic"))
    starts_at = factory.LazyFunction(lambda: timezone.now() + timedelta(days=2))
    ends_at = factory.LazyAttribute(lambda o: o.starts_at + timedelta(minutes=30))
    status = sm.AppointmentStatus.PROPOSED


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "pw-for-tests-1")

    @factory.post_generation
    def save_password(obj, create, extracted, **kwargs):
        if create:
            obj.save(update_fields=["password"])


def user_with_role(clinic: sm.Clinic, role: sm.Role = sm.Role.STAFF, *, operate: bool | None = None, **kwargs):
    """A user with ``role`` at ``clinic``; an ADMIN also gets the operate grant unless ``operate=False``."""
    user = UserFactory(**kwargs)
    clinic_grant_role(clinic=clinic, user=user, role=role)
    if operate if operate is not None else role == sm.Role.ADMIN:
        clinic_grant_operate(clinic=clinic, user=user)
    return user


def waitlist_on(clinic: sm.Clinic) -> None:
    """Switch the waitlist on for ``clinic`` (a new tenant starts with it off): its tenant on the allowlist.
    Written directly, like the other factories, so tests that count audit rows see only their own."""
    flag, _ = sm.FeatureFlag.objects.get_or_create(name="waitlist", defaults={"enabled": True})
    flag.tenant_allowlist.add(clinic.tenant_group)

import hashlib

from django.db import IntegrityError, transaction
from django.db.models import Q

from common.errors import PatientDuplicate, constraint_violated

from ..models import Clinic, ConsentSource, ConsentState, Language, Patient
from ..phones import normalize_phone
from .consent import consent_record

#: The constraints that make one person one patient in a clinic, and the field each one compares.
DUPLICATE_CONSTRAINTS = {
    "patient_one_per_email": "email",
    "patient_one_per_phone": "phone",
    "patient_one_per_crm_fingerprint": "crm_patient_ref",
}


def crm_fingerprint(crm_patient_ref: str) -> str:
    """Lower-case hex SHA-256 of the CRM's patient reference: the only link to the CRM we keep."""
    return hashlib.sha256(crm_patient_ref.encode()).hexdigest()


def patient_create(
    *,
    clinic: Clinic,
    display_name: str,
    email: str = "",
    phone: str = "",
    language: str = Language.EN,
    crm_patient_ref: str | None = None,
    contact_consent: list[str] | tuple[str, ...] = (),
    consent_source: str = ConsentSource.API,
    actor_label: str = "",
) -> Patient:
    """Create a patient; ``contact_consent`` channels are recorded GRANTED (with the source) in the same transaction.

    One person is one patient in a clinic: the same email (any case), phone or CRM patient reference as an
    existing patient is refused with ``PatientDuplicate`` (409 ``PATIENT_DUPLICATE``, ``fields`` naming what
    matched and the existing ref), never merged: merging would move consent and history silently. The
    unique constraints decide under concurrency; the read before them only names the match. The phone is
    stored in E.164 (``scheduling.phones.normalize_phone``: 400 ``PHONE_INVALID`` when it is not a number of
    the clinic's country), so the same number typed two ways is one person."""
    email, phone = (email or "").strip(), normalize_phone(phone, clinic)
    fingerprint = crm_fingerprint(crm_patient_ref) if crm_patient_ref else ""
    _refuse_duplicate(clinic, email, phone, fingerprint)
    with transaction.atomic():
        try:
            with transaction.atomic():
                patient = Patient.objects.create(
                    tenant_group_id=clinic.tenant_group_id,
                    clinic=clinic,
                    display_name=display_name,
                    email=email,
                    phone=phone,
                    language=language,
                    crm_fingerprint=fingerprint,
                )
        except IntegrityError as exc:  # a concurrent twin committed between the read and the insert
            field = DUPLICATE_CONSTRAINTS.get(constraint_violated(exc))
            if field is None:
                raise
            _refuse_duplicate(clinic, email, phone, fingerprint)
            raise PatientDuplicate("A patient with these details exists.", fields={field: ["Already used."]}) from None
        if contact_consent:
            consent_record(patient=patient, channels=contact_consent, state=ConsentState.GRANTED,
                           source=consent_source, actor_label=actor_label or "system:patient_create")
        return patient


def _refuse_duplicate(clinic: Clinic, email: str, phone: str, fingerprint: str) -> None:
    match = Q(pk__in=[])
    if email:
        match |= Q(email__iexact=email)
    if phone:
        match |= Q(phone=phone)
    if fingerprint:
        match |= Q(crm_fingerprint=fingerprint)
    existing = Patient.objects.filter(match, clinic=clinic).only("ref", "email", "phone", "crm_fingerprint").first()
    if existing is None:
        return
    fields: dict[str, list[str]] = {"existing": [existing.ref]}
    for name, same in (("email", bool(email) and existing.email.lower() == email.lower()),
                       ("phone", bool(phone) and existing.phone == phone),
                       ("crm_patient_ref", bool(fingerprint) and existing.crm_fingerprint == fingerprint)):
        if same:
            fields[name] = ["Already used by another patient of this clinic."]
    raise PatientDuplicate("A patient with the same contact or CRM reference exists in this clinic.", fields=fields)

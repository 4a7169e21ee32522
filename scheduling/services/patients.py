import hashlib

from django.db import transaction

from ..models import Clinic, ConsentSource, ConsentState, Language, Patient
from .consent import consent_record


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
    """Create a patient; ``contact_consent`` channels are recorded GRANTED (with the source) in the same transaction."""
    with transaction.atomic():
        patient = Patient.objects.create(
            tenant_group_id=clinic.tenant_group_id,
            clinic=clinic,
            display_name=display_name,
            email=email or "",
            phone=phone or "",
            language=language,
            crm_fingerprint=crm_fingerprint(crm_patient_ref) if crm_patient_ref else "",
        )
        if contact_consent:
            consent_record(patient=patient, channels=contact_consent, state=ConsentState.GRANTED,
                           source=consent_source, actor_label=actor_label or "system:patient_create")
        return patient

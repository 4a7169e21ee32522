import hashlib

from django.db import transaction

from ..models import Clinic, Language, Patient


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
) -> Patient:
    with transaction.atomic():
        return Patient.objects.create(
            tenant_group_id=clinic.tenant_group_id,
            clinic=clinic,
            display_name=display_name,
            email=email or "",
            phone=phone or "",
            language=language,
            crm_fingerprint=crm_fingerprint(crm_patient_ref) if crm_patient_ref else "",
        )

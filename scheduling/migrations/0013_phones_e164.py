"""Existing clinics get the country of their time zone; existing patients' phones are rewritten in E.164
where they parse for that country (a number that does not, or whose E.164 form another patient of the
clinic already has, is left as it was for staff to correct)."""

from django.db import migrations


def forwards(apps, schema_editor):
    from common.errors import PhoneInvalid
    from scheduling.phones import country_for_timezone, normalize_phone

    Clinic = apps.get_model("scheduling", "Clinic")
    Patient = apps.get_model("scheduling", "Patient")
    for clinic in Clinic.objects.filter(country="").iterator():
        country = country_for_timezone(clinic.timezone)
        if country:
            Clinic.objects.filter(pk=clinic.pk).update(country=country)
            clinic.country = country
        taken = set(Patient.objects.filter(clinic=clinic).exclude(phone="").values_list("phone", flat=True))
        for patient in Patient.objects.filter(clinic=clinic).exclude(phone="").only("pk", "phone").iterator():
            try:
                e164 = normalize_phone(patient.phone, clinic)
            except PhoneInvalid:
                continue
            if e164 != patient.phone and e164 not in taken:
                Patient.objects.filter(pk=patient.pk).update(phone=e164)
                taken.discard(patient.phone)
                taken.add(e164)


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0012_clinic_country")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]

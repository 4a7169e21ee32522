"""The integration credential's object permission, on scheduling's Clinic (so guardian and
``clinic_for_grant`` treat it like ``feed_decisions``) without a scheduling migration."""

from django.db import migrations


def create(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    clinic, _ = ContentType.objects.get_or_create(app_label="scheduling", model="clinic")
    Permission.objects.get_or_create(
        content_type=clinic, codename="fhir_integration",
        defaults={"name": "Writes FHIR appointments and subscriptions (EHR integration)"},
    )


def remove(apps, schema_editor):
    apps.get_model("auth", "Permission").objects.filter(
        content_type__app_label="scheduling", codename="fhir_integration").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("interop", "0001_ehr_identifiers"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create, remove)]

"""The "operate" grant (issue 13 part 5). Existing ADMIN holders keep running ADMIN commands: the
migration grants them operate_clinic too; new ADMINs get it only by ``clinic_grant_operate``."""

from django.db import migrations


def grant_operate_to_admins(apps, schema_editor):
    content_type_model = apps.get_model("contenttypes", "ContentType")
    permission_model = apps.get_model("auth", "Permission")
    content_type, _ = content_type_model.objects.get_or_create(app_label="scheduling", model="clinic")
    admin = permission_model.objects.filter(content_type=content_type, codename="admin_clinic").first()
    if admin is None:  # a fresh database: nobody holds ADMIN yet
        return
    operate, _ = permission_model.objects.get_or_create(
        content_type=content_type,
        codename="operate_clinic",
        defaults={"name": "Runs ADMIN commands in the clinic (with the ADMIN role)"},
    )
    for model_name, holder in (("ClinicUserObjectPermission", "user_id"), ("ClinicGroupObjectPermission", "group_id")):
        model = apps.get_model("scheduling", model_name)
        for row in model.objects.filter(permission=admin).values(holder, "content_object_id"):
            model.objects.get_or_create(permission=operate, **row)


class Migration(migrations.Migration):
    dependencies = [
        ("scheduling", "0004_contact_consent"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="clinic",
            options={
                "permissions": [
                    ("staff_clinic", "Works at the clinic as STAFF"),
                    ("admin_clinic", "Administers the clinic as ADMIN"),
                    ("operate_clinic", "Runs ADMIN commands in the clinic (with the ADMIN role)"),
                ]
            },
        ),
        migrations.RunPython(grant_operate_to_admins, migrations.RunPython.noop),
    ]

"""Short human codes for appointments (``common.shortcodes``): the picker, the insert trigger, a code for every
existing appointment, then the per-clinic uniqueness."""

from django.db import migrations, models

from common.shortcodes import PICK_FUNCTION_SQL, drop_trigger_sql, trigger_sql

TABLE = "scheduling_appointment"


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0011_clinic_practitioner_treatment_display_names")]

    operations = [
        migrations.AddField(
            model_name="appointment", name="code",
            field=models.CharField(blank=True, default="", editable=False, max_length=8),
        ),
        migrations.RunSQL(PICK_FUNCTION_SQL + trigger_sql(TABLE), drop_trigger_sql(TABLE)),
        migrations.AddConstraint(
            model_name="appointment",
            constraint=models.UniqueConstraint(fields=("clinic", "code"), name="appointment_code_unique_in_clinic"),
        ),
    ]

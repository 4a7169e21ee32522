"""Short human codes for offers (``common.shortcodes``; the picker is scheduling's 0012): the insert trigger, a
code for every existing offer, then the per-clinic uniqueness."""

from django.db import migrations, models

from common.shortcodes import drop_trigger_sql, trigger_sql

TABLE = "waitlist_offer"


class Migration(migrations.Migration):
    dependencies = [("waitlist", "0015_late_accept"), ("scheduling", "0012_codes_appointment")]

    operations = [
        migrations.AddField(
            model_name="offer", name="code",
            field=models.CharField(blank=True, default="", editable=False, max_length=8),
        ),
        migrations.RunSQL(trigger_sql(TABLE), drop_trigger_sql(TABLE)),
        migrations.AddConstraint(
            model_name="offer",
            constraint=models.UniqueConstraint(fields=("clinic", "code"), name="wl_offer_code_unique_in_clinic"),
        ),
    ]

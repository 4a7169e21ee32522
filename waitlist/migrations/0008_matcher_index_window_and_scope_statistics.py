"""The matcher's index carries the window as trailing key columns (checked on the index tuple, no heap
fetch for an entry whose window does not fit), and extended statistics tell the planner that an entry's
treatment determines its clinic and tenant group: without them it multiplies the three equalities as if
independent, underestimates a clinic's tier by the number of clinics, and sorts the whole tier instead of
reading the index in order (issue 15, docs/waitlist.md "Index and cost")."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0007_clinic_permissions_merged"),
        ("waitlist", "0007_shadow_policy"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="waitlistentry",
            name="wl_entry_match",
        ),
        migrations.AddIndex(
            model_name="waitlistentry",
            index=models.Index(
                condition=models.Q(("status", "WAITING")),
                fields=["clinic", "treatment", "practitioner_key", "priority_key", "waiting_since", "id", "earliest",
                        "latest"],
                name="wl_entry_match",
            ),
        ),
        migrations.RunSQL(
            "CREATE STATISTICS wl_entry_scope (dependencies) ON clinic_id, tenant_group_id, treatment_id "
            "FROM waitlist_waitlistentry",
            "DROP STATISTICS wl_entry_scope",
        ),
    ]

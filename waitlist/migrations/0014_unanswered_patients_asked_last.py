import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    """Patients who leave their offers unanswered are asked after every other candidate until they answer one.

    The entry's ``asked_last_since`` enters the matcher's stored priority key, which PostgreSQL cannot redefine
    in place: the key and its index are dropped and made again (every entry starts in its place). Versions
    published before this migration get the policy field empty (never asked last), the value
    ``WaitlistPolicy.LEGACY_VALUES`` leaves out of the digest; new versions default to 2 (measured:
    docs/simulation.md)."""

    dependencies = [
        ("waitlist", "0013_unanswered_window_off_by_default"),
    ]

    operations = [
        migrations.AddField(
            model_name="waitlistpolicy",
            name="unanswered_ask_last_after",
            field=models.PositiveSmallIntegerField(blank=True, null=True, default=None),
        ),
        migrations.AlterField(
            model_name="waitlistpolicy",
            name="unanswered_ask_last_after",
            field=models.PositiveSmallIntegerField(
                blank=True,
                default=2,
                help_text="a patient whose last this many offers went unanswered is asked after every other "
                "candidate until they answer one; empty = never",
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AddField(
            model_name="waitlistentry",
            name="asked_last_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RemoveIndex(model_name="waitlistentry", name="wl_entry_match"),
        migrations.RemoveField(model_name="waitlistentry", name="priority_key"),
        migrations.AddField(
            model_name="waitlistentry",
            name="priority_key",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Case(
                    models.When(asked_last_since__isnull=False, then=models.Value(1000000)),
                    default=models.Value(0),
                )
                - models.F("priority_rank"),
                output_field=models.IntegerField(),
            ),
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
    ]

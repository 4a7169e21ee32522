import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    """A shorter answer window for a patient whose recent offers went unanswered. Versions published before
    this migration gave every patient the whole window: they get the field empty (no limit), the value
    ``WaitlistPolicy.LEGACY_VALUES`` leaves out of the digest, so their offers' digests stay what they were;
    new versions default to the limit. New versions also default to a weekly cap of 8 and 12 h of decline
    suppression (measured: docs/simulation.md)."""

    dependencies = [
        ("waitlist", "0011_one_person_one_place"),
    ]

    operations = [
        # New versions' contact limits (existing versions keep the values they store).
        migrations.AlterField(
            model_name="waitlistpolicy",
            name="decline_suppression_hours",
            field=models.PositiveIntegerField(
                default=12, help_text="after a decline the entry gets no offer (like the declined one) for this long"
            ),
        ),
        migrations.AlterField(
            model_name="waitlistpolicy",
            name="weekly_offer_cap",
            field=models.PositiveIntegerField(
                blank=True, default=8, help_text="offers per patient in any 7 days; empty = no cap", null=True
            ),
        ),
        migrations.AddField(
            model_name="waitlistpolicy",
            name="answer_window_unanswered_after",
            field=models.PositiveSmallIntegerField(
                default=2,
                help_text="a patient whose last this many offers went unanswered gets the short window below",
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AddField(
            model_name="waitlistpolicy",
            name="answer_window_unanswered_minutes",
            field=models.PositiveIntegerField(blank=True, null=True, default=None),
        ),
        migrations.AlterField(
            model_name="waitlistpolicy",
            name="answer_window_unanswered_minutes",
            field=models.PositiveIntegerField(
                blank=True,
                default=30,
                help_text="the longest answer window of a patient whose recent offers went unanswered; "
                "empty = no limit",
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
    ]

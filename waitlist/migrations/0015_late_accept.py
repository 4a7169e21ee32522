import django.core.validators
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    """A late accept: a patient who answers yes after their offer ended takes the time while it is still free.

    A yes that comes while the time is offered to someone else is kept on the vacancy (``late_yes_offer``): the
    vacancy's next offer goes to that patient if they still fit. The renewed offer names the expired one (``renews``, at most one each) and is left out of the rule that an
    entry is offered a vacancy once (the cascade still never comes back to it by itself). Versions published
    before this migration get ``late_accept`` off, the value ``WaitlistPolicy.LEGACY_VALUES`` leaves out of the
    digest; new versions default to on, to 6 h of decline suppression (was 12) and to a LEAD_TIME share of 10 %
    (was 25): with late accepts, shorter windows ask more patients while a slow yes still counts (measured:
    docs/waitlist.md). The defaults change no stored version."""

    dependencies = [
        ("scheduling", "0011_clinic_practitioner_treatment_display_names"),
        ("waitlist", "0014_unanswered_patients_asked_last"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="offer", name="wl_offer_once_per_entry"),
        migrations.AddField(
            model_name="offer",
            name="renews",
            field=models.OneToOneField(
                blank=True,
                help_text="a late accept: the patient's expired offer of this vacancy that this one takes up again",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="renewal",
                to="waitlist.offer",
            ),
        ),
        migrations.AddField(
            model_name="vacancy",
            name="late_yes_offer",
            field=models.ForeignKey(
                blank=True,
                help_text="an ended offer whose patient said yes late while the time was offered to someone else: "
                "the next offer of this vacancy goes to them (a late accept) if they still fit",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="waitlist.offer",
            ),
        ),
        migrations.AddField(
            model_name="waitlistpolicy",
            name="late_accept",
            field=models.BooleanField(default=False),
        ),
        migrations.AlterField(
            model_name="waitlistpolicy",
            name="late_accept",
            field=models.BooleanField(
                default=True,
                help_text="a patient who answers yes after their offer ended still gets the time while it is free "
                "(no other offer out, the lead time kept)",
            ),
        ),
        migrations.AlterField(
            model_name="waitlistpolicy",
            name="decline_suppression_hours",
            field=models.PositiveIntegerField(
                default=6, help_text="after a decline the entry gets no offer (like the declined one) for this long"
            ),
        ),
        migrations.AlterField(
            model_name="waitlistpolicy",
            name="answer_window_percent",
            field=models.PositiveSmallIntegerField(
                default=10,
                help_text="LEAD_TIME: the share (%) of the time until the slot that the patient gets to answer",
                validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(100)],
            ),
        ),
        migrations.AddConstraint(
            model_name="offer",
            constraint=models.UniqueConstraint(
                condition=models.Q(
                    models.Q(("reason_code__in", ("VACANCY_CLOSED", "NO_ACTIVE_HOLD")), ("status", "WITHDRAWN"),
                             _negated=True),
                    ("renews__isnull", True),
                ),
                fields=("vacancy", "entry"),
                name="wl_offer_once_per_entry",
            ),
        ),
    ]

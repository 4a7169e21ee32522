"""Allocations carry their patient; an exclusion constraint refuses two overlapping active allocations of one
patient (holds for offers and HELD/CONFIRMED appointments alike)."""

import django.contrib.postgres.constraints
import django.db.models.deletion
from django.contrib.postgres.fields.ranges import RangeOperators
from django.db import migrations, models

FILL = """
UPDATE scheduling_capacityallocation a SET patient_id = COALESCE(
    (SELECT h.patient_id FROM scheduling_capacityhold h WHERE h.id = a.hold_id),
    (SELECT p.patient_id FROM scheduling_appointment p WHERE p.id = a.appointment_id))
WHERE a.patient_id IS NULL
"""


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0002_feature_flags'),
    ]

    operations = [
        migrations.AddField(
            model_name='capacityallocation',
            name='patient',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT,
                                    related_name='allocations', to='scheduling.patient'),
        ),
        migrations.RunSQL(FILL, reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name='capacityallocation',
            name='patient',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='allocations',
                                    to='scheduling.patient'),
        ),
        migrations.AddConstraint(
            model_name='capacityallocation',
            constraint=django.contrib.postgres.constraints.ExclusionConstraint(
                condition=models.Q(('active', True)),
                expressions=[('patient', RangeOperators.EQUAL), ('period', RangeOperators.OVERLAPS)],
                name='allocation_no_patient_overlap',
            ),
        ),
    ]

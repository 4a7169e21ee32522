"""Console pieces of issue 13 without a browser: no-op switches refused, queue markers, banner data."""

from __future__ import annotations

import pytest
from django.urls import reverse

from common.models import AuditEntry
from reevaluation.models import ClinicReevaluationSettings, JobState, ReevaluationJob
from tests.reevaluation import factories as rf
from tests.reevaluation.conftest import post_event
from tests.worlds import ReevaluationWorld

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def url(name: str, clinic) -> str:
    return reverse(f"console:{name}", kwargs={"clinic_ref": clinic.ref})


@pytest.mark.parametrize(
    ("name", "field", "value"), [("reevaluation-mode", "mode", "DRY_RUN"), ("reevaluation-drain", "state", "ACTIVE")]
)
def test_a_forged_no_op_switch_is_a_field_error_and_changes_nothing(admin_web, clinic, name, field, value):
    rf.enable(clinic, "DRY_RUN")
    data = {field: value, "reason": "no change", "confirm": "on", "idempotency_key": "k1"}
    response = admin_web.post(url(name, clinic), data, **HX)
    html = response.content.decode()
    assert response.status_code == 200 and "is already" in html
    assert not AuditEntry.objects.exists()
    assert ClinicReevaluationSettings.objects.get(clinic=clinic).version == 1


def test_the_page_marks_needs_staff_jobs_and_counts_them(staff_web, clinic):
    world = ReevaluationWorld(clinic)
    ref = post_event(world, world.fp, 1).job_ref
    ReevaluationJob.objects.filter(ref=ref).update(state=JobState.COMPLETED, needs_staff=True)
    html = staff_web.get(url("reevaluation", clinic)).content.decode()
    assert 'data-testid="needs-staff"' in html and 'data-count="NEEDS_STAFF"' in html


def test_the_queue_fragment_refreshes_after_a_change(staff_web, clinic):
    world = ReevaluationWorld(clinic)
    ref = post_event(world, world.fp, 1).job_ref
    response = staff_web.get(url("reevaluation", clinic), HTTP_HX_TARGET="queue-rows", **HX)
    html = response.content.decode()
    assert f'data-job="{ref}"' in html and "<html" not in html

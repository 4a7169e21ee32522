"""The Django admin reads state-bearing rows and changes none of them (not even for a superuser)."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client

from scheduling import models as sm
from tests import factories as f
from waitlist import models as wm

STATE_BEARING = [sm.Appointment, sm.CapacityHold, sm.CapacityAllocation, sm.FeatureFlag, sm.ClinicFeatureSwitch,
                 wm.WaitlistEntry, wm.Vacancy, wm.Offer, wm.OfferEvent, wm.WaitlistPolicy, wm.JobRun,
                 wm.BookingReliabilityDecision, wm.VacancySkip]


@pytest.fixture
def superuser_web(db):
    user = f.UserFactory(username="root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("model", STATE_BEARING, ids=lambda m: m.__name__)
def test_the_admin_refuses_add_change_and_delete(rf, db, model):
    request = rf.get("/admin/")
    request.user = f.UserFactory(is_staff=True, is_superuser=True)
    model_admin = admin.site._registry[model]
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
    assert model_admin.has_view_permission(request)


def test_a_post_to_the_change_page_of_an_appointment_changes_nothing(superuser_web, clinic, patient, practitioner,
                                                                     treatment):
    appointment = f.AppointmentFactory(clinic=clinic, patient=patient, practitioner=practitioner,
                                       treatment=treatment)
    url = f"/admin/scheduling/appointment/{appointment.pk}/change/"
    assert superuser_web.get(url).status_code == 200  # readable
    response = superuser_web.post(url, {"status": "CANCELLED"})
    assert response.status_code == 403
    appointment.refresh_from_db()
    assert appointment.status != "CANCELLED"
    delete = superuser_web.post(f"/admin/scheduling/appointment/{appointment.pk}/delete/", {"post": "yes"})
    assert delete.status_code == 403
    assert sm.Appointment.objects.filter(pk=appointment.pk).exists()

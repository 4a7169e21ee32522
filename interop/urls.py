"""FHIR routes, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from . import api

F = "clinics/<str:clinic>/fhir/"

urlpatterns = [
    path(F + "Slot", api.SlotSearchView.as_view(), name="fhir-slot-search"),
    path(F + "Slot/<str:resource_id>", api.SlotReadView.as_view(), name="fhir-slot-read"),
    path(F + "Appointment", api.AppointmentSearchView.as_view(), name="fhir-appointment-search"),
    path(F + "Appointment/<str:resource_id>", api.AppointmentReadView.as_view(), name="fhir-appointment-read"),
]

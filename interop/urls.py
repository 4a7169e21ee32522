"""FHIR routes, mounted under /api/v1/ by config/urls.py; one base per clinic."""

from django.urls import path

from . import api

F = "clinics/<str:clinic>/fhir/"

urlpatterns = [
    path(F + "metadata", api.MetadataView.as_view(), name="fhir-metadata"),
    path(F + "Slot", api.SlotSearchView.as_view(), name="fhir-slot-search"),
    path(F + "Slot/<str:resource_id>", api.SlotReadView.as_view(), name="fhir-slot-read"),
    path(F + "Appointment", api.AppointmentSearchView.as_view(), name="fhir-appointment-search"),
    path(F + "Appointment/<str:resource_id>", api.AppointmentReadView.as_view(), name="fhir-appointment-read"),
    path(F + "Schedule", api.ScheduleSearchView.as_view(), name="fhir-schedule-search"),
    path(F + "Schedule/<str:resource_id>", api.ScheduleReadView.as_view(), name="fhir-schedule-read"),
    path(F + "Subscription", api.SubscriptionView.as_view(), name="fhir-subscription"),
    path(F + "Subscription/<str:resource_id>", api.SubscriptionReadView.as_view(), name="fhir-subscription-read"),
    path(F + "<path:rest>", api.UnknownView.as_view(), name="fhir-unknown"),
]

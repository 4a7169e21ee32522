from django.urls import path

from . import views

urlpatterns = [
    path("clinics/", views.ClinicListView.as_view(), name="clinic-list"),
    path(
        "clinics/<str:clinic>/practitioners/", views.PractitionerListView.as_view(), name="practitioner-list"
    ),
    path("clinics/<str:clinic>/treatments/", views.TreatmentListView.as_view(), name="treatment-list"),
    path("clinics/<str:clinic>/resources/", views.ResourceListView.as_view(), name="resource-list"),
    path("clinics/<str:clinic>/patients/", views.PatientCreateView.as_view(), name="patient-create"),
    path("clinics/<str:clinic>/patients/<str:ref>/consent", views.PatientConsentView.as_view(),
         name="patient-consent"),
    path(
        "clinics/<str:clinic>/appointments/", views.AppointmentCreateView.as_view(), name="appointment-create"
    ),
    path(
        "clinics/<str:clinic>/appointments/<str:ref>",
        views.AppointmentDetailView.as_view(),
        name="appointment-detail",
    ),
]

"""operations models."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PatientContactView(models.Model):
    """One look at a patient's name and contact in the console: who looked, whose, when and from which page.

    The console shows a patient's name and contact only on a detail page, to STAFF of the patient's clinic, and
    only when asked (a button): each answer writes one of these first. ADMIN read them in the console. Refs and a
    page name only: the contact itself is never copied here."""

    clinic = models.ForeignKey("scheduling.Clinic", on_delete=models.PROTECT, related_name="+")
    viewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    viewer_label = models.CharField(max_length=150)
    patient = models.ForeignKey("scheduling.Patient", on_delete=models.PROTECT, related_name="+")
    #: The entry, offer or appointment whose page showed it.
    subject_ref = models.CharField(max_length=40)
    page = models.CharField(max_length=40)
    viewed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["clinic", "-viewed_at", "-id"], name="ops_contact_view_recent")]

    def __str__(self) -> str:
        return f"{self.viewer_label} viewed {self.patient_id}"

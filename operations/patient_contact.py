"""A patient's name and contact on the console's detail pages, for STAFF of the patient's clinic, each look
recorded first (``PatientContactView``), and the record for ADMIN.

Never in a list, an export, a log line, an event or a URL: the button asks for it by the ref of the entry,
offer or appointment whose page it is on, and the answer is not cached."""

from __future__ import annotations

from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers

from common.errors import NotFound
from scheduling.models import Appointment, Clinic, Patient, Role
from waitlist.models import Offer, WaitlistEntry

from .decorators import clinic_view
from .models import PatientContactView
from .responses import HtmxHttpRequest, console_error, render_clinic_page

#: The pages that show the button (the access log names them).
PAGES = {"vacancy": "vacancy panel", "ref": "entry or appointment page"}
SUBJECTS = {"wle": WaitlistEntry, "off": Offer, "apt": Appointment}
ACCESS_LOG_SIZE = 200


def patient_contact_read(*, clinic: Clinic, viewer, subject_ref: str, page: str) -> Patient:
    """The patient of ``subject_ref`` (an entry, offer or appointment of ``clinic``), their look recorded in the
    same transaction; NotFound for anything else (another clinic's, unknown, a malformed ref)."""
    model = SUBJECTS.get(subject_ref.split("_", 1)[0]) if "_" in subject_ref else None
    if model is None or page not in PAGES or len(subject_ref) > 40:
        raise NotFound()
    patient_id = model._default_manager.filter(clinic=clinic, ref=subject_ref).values_list(
        "patient_id", flat=True).first()
    if patient_id is None:
        raise NotFound()
    with transaction.atomic():
        patient = Patient.objects.only("ref", "display_name", "email", "phone").get(pk=patient_id, clinic=clinic)
        PatientContactView.objects.create(clinic=clinic, viewer=viewer, viewer_label=viewer.get_username(),
                                          patient=patient, subject_ref=subject_ref, page=page)
    return patient


@clinic_view()
def patient_contact(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    """STAFF (and ADMIN) of the clinic: the name and contact behind ``?of=<ref>`` (recorded, never cached)."""
    try:
        patient = patient_contact_read(clinic=clinic, viewer=request.user, subject_ref=request.GET.get("of", ""),
                                       page=request.GET.get("page", ""))
    except NotFound:
        return console_error(request, 404)
    response = render(request, "operations/partials/patient_contact.html#contact", {"patient": patient})
    add_never_cache_headers(response)
    response["Cache-Control"] += ", no-store"
    return response


@clinic_view(Role.ADMIN)
def patient_access_log(request: HtmxHttpRequest, clinic: Clinic) -> HttpResponse:
    """ADMIN: who looked at which patient's contact, when and from which page; newest first."""
    rows = (PatientContactView.objects.filter(clinic=clinic).select_related("patient").only(
        "viewer_label", "patient__ref", "subject_ref", "page", "viewed_at").order_by("-viewed_at", "-id")
        [:ACCESS_LOG_SIZE])
    return render_clinic_page(request, "operations/patient_access_log.html", clinic, "audit",
                              {"rows": rows, "pages": PAGES, "size": ACCESS_LOG_SIZE})

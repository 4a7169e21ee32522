"""The public join contract (``/api/v1/public/clinics/{clinic}/…``, no sign-in) and the clinic's settings and
approval queue (signed in: ADMIN writes the settings, STAFF works the queue).

Public answers never say whether a contact is known: a request is recorded and answered the same way for any
contact (202, ``{"request", "next", "detail"}``), and only the verification step, which needs the code sent to
that contact, leads to a patient record. Limits per client address, per contact and per clinic come first
(``JOIN_THROTTLE_RATES``: 429 ``THROTTLED``), then the optional CAPTCHA hook, then the idempotent command.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings as django_settings
from django.utils import timezone
from django.utils.module_loading import import_string
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api import ClinicAPIView
from common.api.errors import field_errors
from common.api.views import idempotent_response
from common.clientaddr import client_address
from common.errors import NotFound, PermissionDenied, ValidationFailed
from common.throttling import rate_exceeded
from scheduling.models import Clinic, ContactChannel, JoinRequest, JoinRequestStatus, Language, Practitioner, Treatment
from scheduling.phones import normalize_phone
from waitlist.joining.inputs import availability_of
from waitlist.joining.services import (
    JoinAsk,
    join_code_resend,
    join_request_approve,
    join_request_reject,
    join_request_submit,
    join_request_verify,
    join_settings_for,
    join_settings_set,
    joining_open,
    settings_body,
)
from waitlist.joining.tokens import status_link

#: The one answer to a request (and a resend), whatever the contact: the request id and what to do next.
ACCEPTED_DETAIL = ("If the details are right, a 6-digit code is on its way to the phone or e-mail given. "
                   "Enter it to join the waiting list.")
#: How far ahead a patient may ask to wait.
HORIZON_DAYS = 366


def accepted_body(ref: str) -> dict:
    return {"request": ref, "next": "ENTER_CODE", "detail": ACCEPTED_DETAIL}


class JoinRequestInput(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    phone = serializers.CharField(max_length=40, required=False, allow_blank=True, default="")
    email = serializers.EmailField(max_length=254, required=False, allow_blank=True, default="")
    consents = serializers.ListField(child=serializers.ChoiceField(choices=ContactChannel.values), max_length=2)
    treatment = serializers.CharField(max_length=40)
    practitioner = serializers.CharField(max_length=40, required=False, allow_null=True, default=None)
    earliest = serializers.DateField(required=False)
    latest = serializers.DateField(required=False)
    availability = serializers.JSONField(required=False, allow_null=True, default=None)
    language = serializers.ChoiceField(choices=Language.values, required=False, default=Language.EN)
    source = serializers.RegexField(r"^[A-Za-z0-9_.:-]{1,40}$", required=False, default="api")  # type: ignore[assignment]
    captcha_token = serializers.CharField(max_length=4000, required=False, allow_blank=True, default="")

    def validate(self, attrs):
        if not attrs["phone"].strip() and not attrs["email"].strip():
            raise serializers.ValidationError({"phone": ["Give a phone number or an e-mail address."]})
        if not attrs["consents"]:
            raise serializers.ValidationError({"consents": ["Agree to be contacted on at least one channel."]})
        return attrs


def join_ask(clinic: Clinic, data: dict) -> JoinAsk:
    """The validated body as a ``JoinAsk``: refs resolved in the clinic, dates read in its zone (the whole of
    ``latest``'s day), the phone as E.164 (400 ``PHONE_INVALID``)."""
    serializer = JoinRequestInput(data=data)
    if not serializer.is_valid():
        raise ValidationFailed("The request is not valid.", fields=field_errors(serializer.errors))
    v = serializer.validated_data
    phone = normalize_phone(v["phone"], clinic) if v["phone"].strip() else ""
    treatment = Treatment.objects.filter(clinic=clinic, ref=v["treatment"]).first()
    if treatment is None:
        raise ValidationFailed("The request is not valid.", code="TREATMENT_NOT_OFFERED",
                               fields={"treatment": ["Not offered online."]})
    practitioner = None
    if v["practitioner"]:
        practitioner = Practitioner.objects.filter(clinic=clinic, ref=v["practitioner"], active=True).first()
        if practitioner is None:
            raise ValidationFailed("The request is not valid.", fields={"practitioner": ["Not found."]})
    zone = ZoneInfo(clinic.timezone)
    today = timezone.now().astimezone(zone).date()
    first = v.get("earliest") or today
    last = v.get("latest") or today + timedelta(days=90)
    if first < today or last < first or last > today + timedelta(days=HORIZON_DAYS):
        raise ValidationFailed("The request is not valid.", fields={"latest": [
            "Give dates from today, the last on or after the first, within a year."]})
    channels = [c for c in v["consents"] if (c == ContactChannel.SMS and phone) or (c == ContactChannel.EMAIL
                                                                                   and v["email"])]
    return JoinAsk(treatment=treatment, practitioner=practitioner, earliest=_start(first, zone),
                   latest=_start(last + timedelta(days=1), zone), availability=availability_of(v["availability"]),
                   display_name=v["name"].strip(), phone=phone, email=v["email"].strip().lower(),
                   language=v["language"], consents=channels, source=v["source"])


def _start(day: date, zone: ZoneInfo) -> datetime:
    return datetime.combine(day, time(0), tzinfo=zone)


def throttle(scope: str, ident: str) -> None:
    """429 ``THROTTLED`` (``Retry-After``) when ``ident`` is over ``JOIN_THROTTLE_RATES[scope]``."""
    wait = rate_exceeded(f"join:{scope}", ident, django_settings.JOIN_THROTTLE_RATES.get(scope))
    if wait is not None:
        raise exceptions.Throttled(wait=wait)


def captcha_check(token: str, *, address: str, clinic: Clinic) -> None:
    """The CAPTCHA hook (``JOIN_CAPTCHA_VERIFIER``: a dotted path to ``verify(token, *, address, clinic_ref) ->
    bool``; empty: off). Provider-neutral: a site plugs in its own service's check."""
    path = getattr(django_settings, "JOIN_CAPTCHA_VERIFIER", "")
    if path and not import_string(path)(token, address=address, clinic_ref=clinic.ref):
        raise ValidationFailed("The check that this is a person did not pass.", code="CAPTCHA_FAILED",
                               fields={"captcha_token": ["Not accepted."]})


def origin_check(request, clinic: Clinic) -> None:
    """A browser's cross-site call from an origin the clinic does not list is refused (403
    ``ORIGIN_NOT_ALLOWED``) besides getting no CORS headers; this site's own pages and non-browser clients pass."""
    origin = request.headers.get("Origin")
    if not origin or origin == django_settings.PUBLIC_BASE_URL.rstrip("/") or origin == request.build_absolute_uri(
            "/").rstrip("/"):
        return
    settings = join_settings_for(clinic)
    if settings is None or origin not in settings.allowed_origins:
        raise PermissionDenied("This web site may not send requests to the clinic's waiting list.",
                               code="ORIGIN_NOT_ALLOWED")


def public_clinic(ref: str) -> Clinic:
    clinic = Clinic.objects.select_related("tenant_group").filter(ref=ref).first()
    if clinic is None:
        raise NotFound()
    joining_open(clinic)
    return clinic


class PublicView(APIView):
    """No sign-in, no session (so no CSRF token): the contract's own limits guard it."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []


_ACCEPTED = inline_serializer("JoinAccepted", {"request": serializers.CharField(), "next": serializers.CharField(),
                                               "detail": serializers.CharField()})


class JoinRequestCreateView(PublicView):
    @extend_schema(request=JoinRequestInput, responses={202: OpenApiResponse(_ACCEPTED, description=(
        "The same answer whatever the contact: check the phone or e-mail for the code."))})
    def post(self, request, clinic: str):
        clinic_row = public_clinic(clinic)
        origin_check(request, clinic_row)
        address = client_address(request.META)
        throttle("address", address)
        throttle("clinic", clinic_row.ref)
        ask = join_ask(clinic_row, request.data if isinstance(request.data, dict) else {})
        throttle("contact", f"{clinic_row.ref}:{ask.phone or ask.email}")
        captcha_check(str(request.data.get("captcha_token") or ""), address=address, clinic=clinic_row)

        def execute(_receipt_ref):
            joined = join_request_submit(clinic=clinic_row, ask=ask)
            return 202, accepted_body(joined.ref)

        return idempotent_response(request, scope=f"public-join:{clinic_row.ref}", command="join_request_submit",
                                   execute=execute)


class CodeInput(serializers.Serializer):
    code = serializers.RegexField(r"^[0-9]{6}$")


_VERIFIED = inline_serializer("JoinVerified", {
    "request": serializers.CharField(), "status": serializers.ChoiceField(choices=["WAITING", "AWAITING_APPROVAL"]),
    "entry": serializers.CharField(allow_null=True), "status_link": serializers.CharField(allow_null=True)})


class JoinRequestVerifyView(PublicView):
    @extend_schema(request=CodeInput, responses={200: _VERIFIED})
    def post(self, request, clinic: str, ref: str):
        clinic_row = public_clinic(clinic)
        origin_check(request, clinic_row)
        throttle("verify", client_address(request.META))
        serializer = CodeInput(data=request.data)
        if not serializer.is_valid():
            raise ValidationFailed("The request is not valid.", fields=field_errors(serializer.errors))
        joined = join_request_verify(clinic=clinic_row, ref=ref, code=serializer.validated_data["code"])
        if joined is None:
            return Response({"request": ref, "status": "AWAITING_APPROVAL", "entry": None, "status_link": None})
        return Response({"request": ref, "status": "WAITING",
                         "entry": joined.entry.ref if joined.entry else None,
                         "status_link": status_link(joined.patient)})


class JoinRequestResendView(PublicView):
    @extend_schema(request=None, responses={202: _ACCEPTED})
    def post(self, request, clinic: str, ref: str):
        clinic_row = public_clinic(clinic)
        origin_check(request, clinic_row)
        throttle("verify", client_address(request.META))
        join_code_resend(clinic=clinic_row, ref=ref)
        return Response(accepted_body(ref), status=202)


_PUBLIC_CLINIC = inline_serializer("JoinClinic", {
    "clinic": serializers.CharField(), "name": serializers.CharField(), "address": serializers.CharField(),
    "phone": serializers.CharField(), "timezone": serializers.CharField(),
    "treatments": serializers.ListField(child=serializers.DictField()),
    "practitioners": serializers.ListField(child=serializers.DictField())})


class PublicClinicView(PublicView):
    """What a clinic's own site needs to build its form: names, contact, the treatments offered online."""

    @extend_schema(responses={200: _PUBLIC_CLINIC})
    def get(self, request, clinic: str):
        from scheduling.selectors import clinic_contact

        clinic_row = public_clinic(clinic)
        settings = joining_open(clinic_row)
        language = request.query_params.get("language") or "en"
        address, phone = clinic_contact(clinic_row)
        return Response({
            "clinic": clinic_row.ref, "name": clinic_row.name_in(language), "address": address, "phone": phone,
            "timezone": clinic_row.timezone,
            "treatments": [{"ref": t.ref, "name": t.name_in(language)} for t in settings.treatments.order_by("name")],
            "practitioners": [{"ref": p.ref, "name": p.name_in(language)}
                              for p in clinic_row.practitioners.filter(active=True).order_by("name")],
        })


class JoinSettingsInput(serializers.Serializer):
    enabled = serializers.BooleanField(required=False)
    treatments = serializers.ListField(child=serializers.CharField(max_length=40), required=False, max_length=200)
    allowed_origins = serializers.ListField(child=serializers.RegexField(
        r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$", max_length=200), required=False, max_length=20)
    approval_required = serializers.BooleanField(required=False)
    upkeep_weeks = serializers.IntegerField(required=False, min_value=0, max_value=104)
    upkeep_refreshes_wait = serializers.BooleanField(required=False)
    reason = serializers.CharField(max_length=500)


_SETTINGS = inline_serializer("JoinSettings", {"enabled": serializers.BooleanField(),
                                               "treatments": serializers.ListField(child=serializers.CharField()),
                                               "allowed_origins": serializers.ListField(child=serializers.CharField()),
                                               "approval_required": serializers.BooleanField(),
                                               "upkeep_weeks": serializers.IntegerField(),
                                               "upkeep_refreshes_wait": serializers.BooleanField()})


class JoinSettingsView(ClinicAPIView):
    """GET (STAFF) the clinic's self-service settings; POST (ADMIN, audited) change them."""

    def role_for(self, request) -> str:
        from scheduling.scoping import command_role

        return "STAFF" if request.method == "GET" else command_role("join_settings_set").value

    @extend_schema(responses={200: _SETTINGS})
    def get(self, request, clinic: str):
        settings = join_settings_for(self.clinic)
        return Response(settings_body(settings) if settings else {
            "enabled": False, "treatments": [], "allowed_origins": [], "approval_required": False,
            "upkeep_weeks": 8, "upkeep_refreshes_wait": False})

    @extend_schema(request=JoinSettingsInput, responses={200: _SETTINGS})
    def post(self, request, clinic: str):
        def execute(_receipt_ref):
            data = dict(self.validated(JoinSettingsInput))
            refs = data.pop("treatments", None)
            treatments = None
            if refs is not None:
                treatments = list(Treatment.objects.filter(clinic=self.clinic, ref__in=refs))
                if len(treatments) != len(set(refs)):
                    raise ValidationFailed(fields={"treatments": ["Not found in this clinic."]})
            settings = join_settings_set(clinic=self.clinic, actor=request.user, treatments=treatments, **data)
            return 200, settings_body(settings)

        return self.command("join_settings_set", execute)


def _queue_row(row: JoinRequest) -> dict:
    return {"ref": row.ref, "treatment": row.treatment.ref, "name": row.display_name, "language": row.language,
            "details": row.details, "created_at": row.created_at.isoformat()}


class JoinQueueView(ClinicAPIView):
    """STAFF: verified requests waiting for approval (the clinic's ``approval_required``), oldest first."""

    @extend_schema(responses={200: inline_serializer("JoinQueue", {"results": serializers.ListField(
        child=serializers.DictField())})})
    def get(self, request, clinic: str):
        rows = (JoinRequest.objects.select_related("treatment")
                .filter(clinic=self.clinic, status=JoinRequestStatus.AWAITING_APPROVAL).order_by("created_at")[:200])
        return Response({"results": [_queue_row(row) for row in rows]})


class JoinReasonInput(serializers.Serializer):
    reason = serializers.CharField(max_length=500, required=False, default="", allow_blank=True)


class JoinDecisionView(ClinicAPIView):
    decision = "approve"

    def role_for(self, request) -> str:
        from scheduling.scoping import command_role

        return command_role(f"join_request_{self.decision}").value

    @extend_schema(request=JoinReasonInput, responses={200: inline_serializer("JoinDecision", {
        "request": serializers.CharField(), "entry": serializers.CharField(allow_null=True)})})
    def post(self, request, clinic: str, ref: str):
        def execute(_receipt_ref):
            data = self.validated(JoinReasonInput)
            if self.decision == "approve":
                joined = join_request_approve(clinic=self.clinic, ref=ref, actor=request.user)
                return 200, {"request": ref, "entry": joined.entry.ref if joined.entry else None}
            join_request_reject(clinic=self.clinic, ref=ref, actor=request.user, reason=data["reason"])
            return 200, {"request": ref, "entry": None}

        return self.command(f"join_request_{self.decision}", execute)


class EntryResumeView(ClinicAPIView):
    """STAFF: resume an entry paused by an unanswered upkeep question (or by the patient), on the patient's word."""

    def role_for(self, request) -> str:
        from scheduling.scoping import command_role

        return command_role("entry_resume").value

    @extend_schema(request=None, responses={200: inline_serializer("EntryResumed", {
        "entry": serializers.CharField(), "paused_until": serializers.CharField(allow_null=True)})})
    def post(self, request, clinic: str, ref: str):
        from waitlist.joining.upkeep import upkeep_resume

        def execute(_receipt_ref):
            entry = upkeep_resume(clinic=self.clinic, entry_ref=ref, actor=request.user)
            return 200, {"entry": entry.ref, "paused_until": None}

        return self.command("entry_resume", execute)

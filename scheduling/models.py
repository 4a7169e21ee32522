"""Tenancy, clinics, patients (the only PII), appointments and capacity allocations.

PostgreSQL is the authority: exclusion constraints keep active allocations of one practitioner,
of one resource, and of one patient from ever overlapping.
"""

from __future__ import annotations

from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import DateTimeRangeField, RangeOperators
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase

from common.models import AppendOnlyQuerySet
from common.refs import RefField


class Role(models.TextChoices):
    STAFF = "STAFF"
    ADMIN = "ADMIN"


ROLE_PERMISSIONS = {Role.STAFF: "staff_clinic", Role.ADMIN: "admin_clinic"}
#: Running ADMIN commands (redrive EXECUTE, mode/drain, withdraw, close/reopen) is a separate grant
#: from the ADMIN role, which alone reads the ADMIN screens (issue 13 part 5).
OPERATE_PERMISSION = "operate_clinic"


class TenantGroup(models.Model):
    ref = RefField(prefix="tg")
    name = models.CharField(max_length=200)

    def __str__(self) -> str:
        return self.name


#: The languages patient pages and notices speak (``Patient.language``); English is the ``name`` itself.
DISPLAY_LANGUAGES = ("en", "ko")


def validate_display_names(value) -> None:
    """``{"ko": "강남 클리닉"}``: a JSON object from a served language to a non-empty name (200 characters at most)."""
    if not isinstance(value, dict):
        raise ValidationError("display names must be an object of language code to name, e.g. {\"ko\": \"…\"}")
    for language, name in value.items():
        if language not in DISPLAY_LANGUAGES:
            raise ValidationError(f"unknown language {language!r} (use one of {', '.join(DISPLAY_LANGUAGES)})")
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise ValidationError(f"the {language} name must be 1 to 200 characters")


class DisplayNamed(models.Model):
    """A clinic, practitioner or treatment as patients read it: ``name`` (the clinic's own, English) plus
    ``display_names`` per language. One JSON column on the row that owns the name, rather than a
    translation table: two languages, read with the row the page already loads, no extra query."""

    name = models.CharField(max_length=200)
    display_names = models.JSONField(
        default=dict, blank=True, validators=[validate_display_names],
        help_text='Names patients read, per language, e.g. {"ko": "강남 클리닉"}; "name" is used when one is missing',
    )

    class Meta:
        abstract = True

    def name_in(self, language: str | None) -> str:
        """The name in ``language``, else ``name``."""
        names = self.display_names if isinstance(self.display_names, dict) else {}
        return str(names.get(language or "") or "").strip() or self.name


class Clinic(DisplayNamed):
    ref = RefField(prefix="cl")
    tenant_group = models.ForeignKey(TenantGroup, on_delete=models.PROTECT, related_name="clinics")
    timezone = models.CharField(max_length=64, default="UTC", help_text="IANA time zone name")
    country = models.CharField(
        max_length=2, blank=True, default="",
        help_text="ISO 3166 alpha-2 country phone numbers are read in (blank: the time zone's country)",
    )
    waitlist_hold_minutes = models.PositiveIntegerField(default=20, validators=[MinValueValidator(1)])
    min_lead_minutes = models.PositiveIntegerField(default=180)
    settings = models.JSONField(default=dict, blank=True)
    # Not stored: scoping.clinic_for sets the requesting user's role on the instance it returns.
    user_role: str
    user_can_operate: bool

    class Meta:
        permissions = [
            ("staff_clinic", "Works at the clinic as STAFF"),
            ("admin_clinic", "Administers the clinic as ADMIN"),
            ("operate_clinic", "Runs ADMIN commands in the clinic (with the ADMIN role)"),
            # An integration credential, not a staff role: the booking-reliability feed writes decisions.
            ("feed_decisions", "Feeds booking-reliability decisions (integration)"),
        ]

    def __str__(self) -> str:
        return self.name


class ClinicUserObjectPermission(UserObjectPermissionBase):
    """Direct-FK guardian table: clinic roles are joined, not string-matched."""

    content_object = models.ForeignKey(Clinic, on_delete=models.CASCADE)


class ClinicGroupObjectPermission(GroupObjectPermissionBase):
    content_object = models.ForeignKey(Clinic, on_delete=models.CASCADE)


class Practitioner(DisplayNamed):
    ref = RefField(prefix="pr")
    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="practitioners")
    active = models.BooleanField(default=True)

    def __str__(self) -> str:
        return self.name


class Treatment(DisplayNamed):
    ref = RefField(prefix="tr")
    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="treatments")
    duration_minutes = models.PositiveIntegerField(validators=[MinValueValidator(5)])

    def __str__(self) -> str:
        return self.name


class Resource(models.Model):
    ref = RefField(prefix="rs")
    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="resources")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=40, default="ROOM")

    def __str__(self) -> str:
        return self.name


class Language(models.TextChoices):
    EN = "en", "English"
    KO = "ko", "한국어"


class Patient(models.Model):
    """The only place that holds a patient's name and contacts."""

    ref = RefField(prefix="pt")
    tenant_group = models.ForeignKey(TenantGroup, on_delete=models.PROTECT, related_name="patients")
    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="patients")
    display_name = models.CharField(max_length=200)
    email = models.EmailField(blank=True, default="")
    phone = models.CharField(max_length=40, blank=True, default="")
    language = models.CharField(max_length=2, choices=Language.choices, default=Language.EN)
    crm_fingerprint = models.CharField(
        max_length=64, blank=True, default="", help_text="lower-case hex SHA-256 of the CRM patient reference"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["clinic", "crm_fingerprint"], name="patient_clinic_fingerprint")]
        # One patient per person in a clinic: the same contact or CRM fingerprint twice would let one person
        # hold two places on the waitlist (and dodge the weekly cap). Emails compare case-insensitively.
        constraints = [
            models.UniqueConstraint(Lower("email"), "clinic", name="patient_one_per_email", condition=~Q(email="")),
            models.UniqueConstraint(fields=["clinic", "phone"], name="patient_one_per_phone", condition=~Q(phone="")),
            models.UniqueConstraint(fields=["clinic", "crm_fingerprint"], name="patient_one_per_crm_fingerprint",
                                    condition=~Q(crm_fingerprint="")),
        ]

    def __str__(self) -> str:
        return self.ref


class AppointmentStatus(models.TextChoices):
    PROPOSED = "PROPOSED"
    HELD = "HELD"
    CONFIRMED = "CONFIRMED"
    CANCELLED = "CANCELLED"


class CancelReason(models.TextChoices):
    """Why an appointment was cancelled (a code; the free-text ``cancel_reason`` may add words)."""

    PATIENT_REQUEST = "PATIENT_REQUEST"
    CLINIC_REQUEST = "CLINIC_REQUEST"
    PRACTITIONER_UNAVAILABLE = "PRACTITIONER_UNAVAILABLE"
    RESCHEDULED = "RESCHEDULED"
    OTHER = "OTHER"
    #: Set by the system, not offered to API callers:
    EHR_CANCELLED = "EHR_CANCELLED"
    STANDING_RELEASED = "STANDING_RELEASED"


#: The reason codes an API caller may give (the others say which path cancelled).
CALLER_CANCEL_REASONS = (CancelReason.PATIENT_REQUEST, CancelReason.CLINIC_REQUEST,
                         CancelReason.PRACTITIONER_UNAVAILABLE, CancelReason.RESCHEDULED, CancelReason.OTHER)


class CancelActor(models.TextChoices):
    """Who cancelled, as the prefix of ``Appointment.cancelled_by`` (``<kind>:<username or ref>``)."""

    STAFF = "staff"  # a signed-in user (session)
    API = "api"  # an API token
    INTEGRATION = "integration"  # the EHR's FHIR integration credential
    PATIENT = "patient"  # the patient, on their own page (``patient:<patient ref>``)
    SYSTEM = "system"


def cancel_actor_ref(kind: str, who) -> str:
    """``kind:<who>``: a user's username, a patient's ref or a system job's name; refs, never names or contacts."""
    name = who.get_username() if hasattr(who, "get_username") else getattr(who, "ref", who)
    return f"{kind}:{name}"[:120]


APPOINTMENT_TRANSITIONS: dict[str, set[str]] = {
    AppointmentStatus.PROPOSED: {
        AppointmentStatus.HELD,
        AppointmentStatus.CONFIRMED,
        AppointmentStatus.CANCELLED,
    },
    AppointmentStatus.HELD: {
        AppointmentStatus.CONFIRMED,
        AppointmentStatus.PROPOSED,
        AppointmentStatus.CANCELLED,
    },
    AppointmentStatus.CONFIRMED: {AppointmentStatus.CANCELLED},
    AppointmentStatus.CANCELLED: set(),
}

#: Statuses whose time is reserved by a capacity allocation.
CAPACITY_STATUSES = frozenset({AppointmentStatus.HELD, AppointmentStatus.CONFIRMED})


class Appointment(models.Model):
    #: The table ``common.cas`` checks every status write against.
    STATE_MACHINE = ("status", APPOINTMENT_TRANSITIONS)

    ref = RefField(prefix="apt")
    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="appointments")
    #: The short code a person reads out (``common.shortcodes``): PostgreSQL sets it on insert.
    code = models.CharField(max_length=8, blank=True, default="", editable=False)
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="appointments")
    practitioner = models.ForeignKey(Practitioner, on_delete=models.PROTECT, related_name="appointments")
    treatment = models.ForeignKey(Treatment, on_delete=models.PROTECT, related_name="appointments")
    resource = models.ForeignKey(
        Resource, on_delete=models.PROTECT, null=True, blank=True, related_name="appointments"
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    status = models.CharField(max_length=12, choices=AppointmentStatus.choices)
    version = models.PositiveIntegerField(default=1)
    cancel_reason = models.CharField(max_length=200, blank=True, default="")
    cancel_reason_code = models.CharField(max_length=30, choices=CancelReason.choices, blank=True, default="")
    cancelled_by = models.CharField(max_length=120, blank=True, default="",
                                    help_text="who cancelled: <staff|api|integration|patient|system>:<username or ref>")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Not stored: appointment_cancel leaves the status it cancelled from on the instance it returns.
    previous_status: str

    class Meta:
        indexes = [
            models.Index(fields=["clinic", "patient", "status"], name="appointment_patient_status"),
            models.Index(fields=["clinic", "starts_at"], name="appointment_clinic_start"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="appointment_positive_length"
            ),
            models.UniqueConstraint(fields=["clinic", "code"], name="appointment_code_unique_in_clinic"),
        ]

    def __str__(self) -> str:
        return self.ref


class HoldStatus(models.TextChoices):
    """A capacity hold reserves a slot before an appointment exists (e.g. for a waitlist offer)."""

    ACTIVE = "ACTIVE"
    ACCEPTED = "ACCEPTED"
    CONSUMED = "CONSUMED"
    RELEASED = "RELEASED"


HOLD_TRANSITIONS: dict[str, set[str]] = {
    HoldStatus.ACTIVE: {HoldStatus.ACCEPTED, HoldStatus.RELEASED},
    HoldStatus.ACCEPTED: {HoldStatus.CONSUMED, HoldStatus.RELEASED},
    HoldStatus.CONSUMED: set(),
    HoldStatus.RELEASED: set(),
}
LIVE_HOLD_STATUSES = frozenset({HoldStatus.ACTIVE, HoldStatus.ACCEPTED})


class CapacityHold(models.Model):
    #: The table ``common.cas`` checks every status write against.
    STATE_MACHINE = ("status", HOLD_TRANSITIONS)

    ref = RefField(prefix="hld")
    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="holds")
    practitioner = models.ForeignKey(Practitioner, on_delete=models.PROTECT, related_name="holds")
    treatment = models.ForeignKey(Treatment, on_delete=models.PROTECT, related_name="holds")
    resource = models.ForeignKey(
        Resource, on_delete=models.PROTECT, null=True, blank=True, related_name="holds"
    )
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="holds")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    status = models.CharField(max_length=10, choices=HoldStatus.choices, default=HoldStatus.ACTIVE)
    version = models.PositiveIntegerField(default=1)
    expires_at = models.DateTimeField()
    purpose = models.CharField(max_length=40, default="WAITLIST_OFFER")
    appointment = models.OneToOneField(
        Appointment, on_delete=models.PROTECT, null=True, blank=True, related_name="source_hold"
    )
    release_reason = models.CharField(max_length=60, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["status", "expires_at"], name="hold_status_expiry")]

    def __str__(self) -> str:
        return self.ref


#: Named so that a violation can be told apart from a practitioner/resource overlap (PATIENT_OVERLAP).
PATIENT_OVERLAP_CONSTRAINT = "allocation_no_patient_overlap"


class AllocationKind(models.TextChoices):
    HOLD = "HOLD"
    APPOINTMENT = "APPOINTMENT"


class CapacityAllocation(models.Model):
    """The reserved time of one practitioner (and resource) for one patient. Active rows never overlap
    per practitioner, per resource, or per patient (nobody holds or books two times at once).

    An allocation belongs either to a hold or to a HELD/CONFIRMED appointment; booking a hold
    moves its allocation to the appointment in place, so the slot is never free in between.
    """

    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="allocations")
    practitioner = models.ForeignKey(Practitioner, on_delete=models.PROTECT, related_name="allocations")
    resource = models.ForeignKey(
        Resource, on_delete=models.PROTECT, null=True, blank=True, related_name="allocations"
    )
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="allocations")
    period = DateTimeRangeField()
    active = models.BooleanField(default=True)
    kind = models.CharField(max_length=12, choices=AllocationKind.choices)
    hold = models.ForeignKey(
        CapacityHold, on_delete=models.PROTECT, null=True, blank=True, related_name="allocations"
    )
    appointment = models.ForeignKey(
        Appointment, on_delete=models.PROTECT, null=True, blank=True, related_name="allocations"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            ExclusionConstraint(
                name="allocation_no_practitioner_overlap",
                expressions=[
                    ("clinic", RangeOperators.EQUAL),
                    ("practitioner", RangeOperators.EQUAL),
                    ("period", RangeOperators.OVERLAPS),
                ],
                condition=Q(active=True),
            ),
            ExclusionConstraint(
                name="allocation_no_resource_overlap",
                expressions=[
                    ("clinic", RangeOperators.EQUAL),
                    ("resource", RangeOperators.EQUAL),
                    ("period", RangeOperators.OVERLAPS),
                ],
                condition=Q(active=True, resource__isnull=False),
            ),
            ExclusionConstraint(
                name=PATIENT_OVERLAP_CONSTRAINT,
                expressions=[("patient", RangeOperators.EQUAL), ("period", RangeOperators.OVERLAPS)],
                condition=Q(active=True),
            ),
            models.CheckConstraint(
                condition=Q(hold__isnull=False) | Q(appointment__isnull=False), name="allocation_has_owner"
            ),
            models.UniqueConstraint(
                fields=["appointment"], condition=Q(active=True), name="allocation_one_active_per_appointment"
            ),
            models.UniqueConstraint(
                fields=["hold"], condition=Q(active=True), name="allocation_one_active_per_hold"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.period}"


class FeatureFlag(models.Model):
    """A rollout switch: global on/off, a tenant allowlist, and per-clinic overrides.

    A feature is on for a clinic when the flag is enabled, the clinic's tenant group is allowed
    (or every tenant is), and the clinic has not been switched off.
    """

    name = models.CharField(max_length=60, unique=True)
    enabled = models.BooleanField(default=False)
    all_tenants = models.BooleanField(default=False)
    tenant_allowlist = models.ManyToManyField(TenantGroup, blank=True, related_name="+")
    version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class ClinicFeatureSwitch(models.Model):
    flag = models.ForeignKey(FeatureFlag, on_delete=models.CASCADE, related_name="clinic_switches")
    clinic = models.ForeignKey(Clinic, on_delete=models.CASCADE, related_name="feature_switches")
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["flag", "clinic"], name="feature_switch_once_per_clinic")]

    def __str__(self) -> str:
        return f"{self.flag_id}@{self.clinic_id}={self.enabled}"


class ContactChannel(models.TextChoices):
    """How a notice reaches a patient: EMAIL (the email provider) or SMS (the webhook/SMS provider)."""

    EMAIL = "EMAIL"
    SMS = "SMS"


class ConsentState(models.TextChoices):
    GRANTED = "GRANTED"
    REVOKED = "REVOKED"


class ConsentSource(models.TextChoices):
    """Where a consent change came from (kept with every row as evidence)."""

    API = "API"  # an integration or staff tool, through the API
    STAFF = "STAFF"  # a console or shell operator
    OPT_OUT_LINK = "OPT_OUT_LINK"  # the patient, through the link in a notice (no sign-in)
    TEXT_REPLY = "TEXT_REPLY"  # the patient's STOP (or START) reply to a text; evidence: its message id
    IMPORT = "IMPORT"  # seed data or a bulk import
    # The patient's own new consent (a signed form, a recorded call), entered by staff with a reference to
    # that evidence: the only way back over the patient's own opt-out.
    PATIENT_CONSENT = "PATIENT_CONSENT"


class ContactConsent(models.Model):
    """Append-only consent history per patient and channel: the newest row of a (patient, channel) is
    its current state; no row means never consented. Opting out adds a row, nothing is ever deleted.
    Holds no contact data (that stays on the patient row)."""

    ref = RefField(prefix="cns")
    clinic = models.ForeignKey(Clinic, on_delete=models.PROTECT, related_name="+")
    patient = models.ForeignKey(Patient, on_delete=models.PROTECT, related_name="consents")
    channel = models.CharField(max_length=8, choices=ContactChannel.choices)
    state = models.CharField(max_length=8, choices=ConsentState.choices)
    source = models.CharField(max_length=16, choices=ConsentSource.choices)
    actor = models.CharField(max_length=150, help_text="username, or 'patient' / 'system:<job>'")
    recorded_at = models.DateTimeField()
    evidence = models.CharField(
        max_length=200, blank=True, default="",
        help_text="PATIENT_CONSENT: a reference to the patient's new consent (form or call id), never its content",
    )

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        indexes = [
            # The newest row per (patient, channel): the matcher's and delivery's current-state lookup.
            models.Index(fields=["patient", "channel", "-id"], name="consent_latest"),
        ]

    def __str__(self) -> str:
        return f"{self.patient_id} {self.channel} {self.state}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("ContactConsent is append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("ContactConsent is append-only.")


class JoinRequestStatus(models.TextChoices):
    PENDING = "PENDING"  # waiting for the one-time code
    AWAITING_APPROVAL = "AWAITING_APPROVAL"  # verified; the clinic's policy asks staff to approve it


JOIN_REQUEST_TRANSITIONS: dict[str, set[str]] = {
    JoinRequestStatus.PENDING: {JoinRequestStatus.AWAITING_APPROVAL},
    # Approved or rejected: the row is deleted (its contact moves to the patient record, or nowhere).
    JoinRequestStatus.AWAITING_APPROVAL: set(),
}


class JoinRequest(models.Model):
    """A patient's own request to join a clinic's waiting list, before it becomes an entry (issue 40).

    It holds a contact that nobody has verified yet, so it lives here, beside the patient records, and nowhere
    else: the waitlist and every log, event and outbox row carry its ``ref`` only. The one-time code is stored as
    an HMAC (``code_hash``); the row is deleted when its request becomes an entry (or is approved or rejected),
    and by beat 24 hours after it was made (``expires_at``) whatever happened to it.
    """

    STATE_MACHINE = ("status", JOIN_REQUEST_TRANSITIONS)

    ref = RefField(prefix="jr")
    clinic = models.ForeignKey(Clinic, on_delete=models.CASCADE, related_name="+")
    treatment = models.ForeignKey(Treatment, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=20, choices=JoinRequestStatus.choices, default=JoinRequestStatus.PENDING)
    version = models.PositiveIntegerField(default=1)
    display_name = models.CharField(max_length=200)
    phone = models.CharField(max_length=40, blank=True, default="", help_text="E.164")
    email = models.EmailField(blank=True, default="")
    language = models.CharField(max_length=2, choices=Language.choices, default=Language.EN)
    #: What the request asks for, refs and codes only (practitioner, window, availability, consents, source).
    details = models.JSONField(default=dict)
    code_hash = models.CharField(max_length=64, blank=True, default="")
    code_expires_at = models.DateTimeField(null=True, blank=True)
    code_attempts = models.PositiveSmallIntegerField(default=0)
    code_sends = models.PositiveSmallIntegerField(default=0)
    code_sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["expires_at"], name="join_request_expiry"),
            models.Index(fields=["clinic", "status", "created_at"], name="join_request_queue"),
        ]
        constraints = [
            models.CheckConstraint(condition=~Q(phone="") | ~Q(email=""), name="join_request_has_contact"),
        ]

    def __str__(self) -> str:
        return self.ref

    @property
    def verify_channel(self) -> str:
        """Where the code goes: a text when a phone was given, else an e-mail."""
        return ContactChannel.SMS if self.phone else ContactChannel.EMAIL

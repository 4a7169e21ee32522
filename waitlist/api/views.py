"""Thin DRF views for the waitlist (API.md "Waitlist"): validate, call one service, shape the answer."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from common.api import ClinicAPIView, ReasonInput, field_errors, list_parameters, page_body
from common.errors import PermissionDenied, ValidationFailed
from common.services import new_correlation_id
from common.timefmt import iso_in_zone
from scheduling.api.serializers import CancelInput
from scheduling.models import CancelActor, Role, cancel_actor_ref
from scheduling.scoping import clinic_for_grant, command_role, may_run
from scheduling.services.roles import DECISION_FEED_PERMISSION
from waitlist import services
from waitlist.api.serializers import (
    ClaimInput,
    DecisionInput,
    EntryCreateInput,
    OpsQuery,
    OptionalReasonInput,
    PriorityInput,
    RecoveryInput,
    ReviewInput,
    ShadowPublishInput,
    StandingAcceptanceInput,
    entry_body,
    offer_body,
    standing_body,
    vacancy_body,
)
from waitlist.dispatch.reads import dispatch_reasons
from waitlist.figures import fairness
from waitlist.figures.operations import ops_snapshot
from waitlist.figures.queue import ops_action_queue
from waitlist.models import EntryStatus
from waitlist.selectors import entry_detail, entry_page, offer_detail, standing_current, vacancy_detail


def _idempotency_key(request) -> str:
    """The request's Idempotency-Key, recorded on every audit row the command writes."""
    return request.headers.get("Idempotency-Key") or ""


def _ok(description: str):
    return {200: OpenApiResponse(description=description)}


class EntryCreateView(ClinicAPIView):
    """STAFF; a non-zero ``priority_rank`` is a priority edit: ADMIN only (403), audited."""

    @extend_schema(parameters=list_parameters(EntryStatus.values), responses=_ok("{items: [entry], next}"))
    def get(self, request, clinic):
        query = self.list_query(EntryStatus.values)
        page = entry_page(
            clinic=self.clinic, limit=query["limit"], after=query["after"], status=query.get("status"),
            day=query.get("date"),
        )
        return Response(page_body(page, lambda entry: entry_body(entry, self.clinic.timezone)))

    @extend_schema(request=EntryCreateInput, responses={201: OpenApiResponse(description="entry")})
    def post(self, request, clinic):
        def execute(_receipt):
            data = self.validated(EntryCreateInput)
            if data.get("priority_rank") and not may_run(request.user, self.clinic, "entry_set_priority"):
                raise PermissionDenied("Setting a priority needs the ADMIN role in this clinic.")
            entry = services.entry_create(
                clinic=self.clinic, actor=request.user, idempotency_key=_idempotency_key(request), **data
            )
            return 201, entry_body(
                entry_detail(clinic=self.clinic, ref=entry.ref), self.clinic.timezone
            )

        return self.command("entry_create", execute)


class EntryDetailView(ClinicAPIView):
    @extend_schema(responses=_ok("entry, with standing_acceptance: {ref, state, min_notice_minutes, source, "
                                 "recorded_at}|null"))
    def get(self, request, clinic, ref):
        entry = entry_detail(clinic=self.clinic, ref=ref)
        return Response({**entry_body(entry, self.clinic.timezone),
                         "standing_acceptance": standing_body(standing_current(entry=entry),
                                                              self.clinic.timezone)})


class EntryStandingAcceptanceView(ClinicAPIView):
    """(I) Grant or revoke "book me automatically" for an entry, on the patient's word (``source`` API) or by staff
    with the patient's consent (``source`` STAFF, ``reason`` required). 409 ENTRY_NOT_OPEN."""

    @extend_schema(request=StandingAcceptanceInput,
                   responses=_ok("{entry, standing_acceptance: {ref, state, min_notice_minutes, source, recorded_at}}"))
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(StandingAcceptanceInput)
            row = services.standing_acceptance_record(
                clinic=self.clinic, entry_ref=ref, state=data["state"], source=data["source"],
                min_notice_minutes=data["min_notice_minutes"], actor=request.user, reason=data["reason"])
            return 200, {"entry": ref, "standing_acceptance": standing_body(row, self.clinic.timezone)}

        return self.command("standing_acceptance_record", execute)


class OfferLateAcceptView(ClinicAPIView):
    """(I) The patient's yes after their offer ended unanswered, on their word (they called): while the time is
    still free, a new offer of it is made and claimed (``renews``: the ended one), and booked at once under
    ``confirmation=ON_ACCEPT``; while it is offered to someone else the yes is KEPT. 409 WAITLIST_DISABLED,
    LATE_ACCEPT_OFF, OFFER_NOT_EXPIRED, LATE_ACCEPT_NOT_APPLICABLE, SLOT_TOO_SOON,
    SLOT_OFFERED, SLOT_GONE, ENTRY_NOT_WAITING, NOT_ELIGIBLE, DECISION_STALE."""

    @extend_schema(request=None, responses=_ok("{offer, renews, status, hold, hold_expires_at, receipt, appointment}"))
    def post(self, request, clinic, ref):
        def execute(_receipt):
            renewed, booked = services.offer_late_accept_and_book(clinic=self.clinic, offer_ref=ref,
                                                                  actor=request.user)
            offer = renewed.offer
            if renewed.kept:
                return 200, {"offer": offer.ref, "renews": ref, "status": "KEPT", "hold": None,
                             "hold_expires_at": None, "receipt": None, "appointment": None}
            return 200, {"offer": offer.ref, "renews": ref, "status": offer.status, "hold": offer.hold.ref,
                         "hold_expires_at": iso_in_zone(offer.hold.expires_at, self.clinic.timezone),
                         "receipt": renewed.receipt.ref if renewed.receipt else None,
                         "appointment": booked.appointment_ref or None}

        return self.command("offer_late_accept", execute)


class OfferReleaseView(ClinicAPIView):
    """(I) Release a standing-acceptance booking on the patient's word before its ``release_until``: the
    appointment is cancelled and its slot reopened as a new vacancy (dispatched at once). 409 NOT_STANDING,
    RELEASE_CLOSED."""

    @extend_schema(request=ReasonInput, responses=_ok("{offer, status, vacancy}"))
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(ReasonInput)
            offer, vacancy = services.standing_release(clinic=self.clinic, offer_ref=ref, actor=request.user,
                                                       reason=data["reason"])
            return 200, {"offer": offer.ref, "status": offer.status, "vacancy": vacancy.ref if vacancy else None}

        return self.command("standing_release", execute)


class EntryPriorityView(ClinicAPIView):
    """ADMIN: change an entry's priority (audited). 409 ENTRY_CLOSED, VERSION_CONFLICT."""

    required_role = command_role("entry_set_priority")

    @extend_schema(request=PriorityInput, responses=_ok("entry"))
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(PriorityInput)
            entry = services.entry_set_priority(
                clinic=self.clinic, entry_ref=ref, actor=request.user, priority_rank=data["priority_rank"],
                reason=data["reason"], expected_version=data.get("expected_version"),
                idempotency_key=_idempotency_key(request),
            )
            return 200, entry_body(entry_detail(clinic=self.clinic, ref=entry.ref), self.clinic.timezone)

        return self.command("entry_set_priority", execute)


class EntryWithdrawView(ClinicAPIView):
    @extend_schema(request=ReasonInput, responses=_ok("entry"))
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(ReasonInput)
            entry = services.entry_withdraw(
                clinic=self.clinic,
                entry_ref=ref,
                actor=request.user,
                reason=data["reason"],
                expected_version=data.get("expected_version"),
            )
            return 200, entry_body(
                entry_detail(clinic=self.clinic, ref=entry.ref), self.clinic.timezone
            )

        return self.command("entry_withdraw", execute)


class VacancyDetailView(ClinicAPIView):
    @extend_schema(responses=_ok("{ref, status, active_offer, starts_at, ends_at, waiting: {reason, until}|null, "
                                   "reasons: {passed_over, waiting, exhausted_at}}"))
    def get(self, request, clinic, ref):
        vacancy, active = vacancy_detail(clinic=self.clinic, ref=ref)
        return Response({**vacancy_body(vacancy, active, self.clinic.timezone),
                         "reasons": dispatch_reasons(clinic=self.clinic, vacancy=vacancy)})


class VacancyDispatchView(ClinicAPIView):
    """Not (I): safe to repeat and to race; at most one offer results."""

    @extend_schema(
        request=None,
        responses=_ok(
            "{outcome, offer}; outcome OFFERED, BOOKED (standing acceptance: offered and booked at once), "
            "ALREADY_OFFERED, NO_CANDIDATE, STAFF_REVIEW, WAITING "
            "(nobody reachable now: quiet hours or contact caps), DISABLED, CLOSED; reasons: {passed_over: "
            "[{reason_code, entries, until}], waiting: {reason, until}|null, exhausted_at, candidates_read, budget_hit}"
        ),
    )
    def post(self, request, clinic, ref):
        result = services.vacancy_dispatch(clinic=self.clinic, vacancy_ref=ref, actor=request.user)
        vacancy, _active = vacancy_detail(clinic=self.clinic, ref=ref)
        return Response({"outcome": result.outcome, "offer": result.offer.ref if result.offer else None,
                         "reasons": dispatch_reasons(clinic=self.clinic, vacancy=vacancy,
                                                               stats=result.stats)})


class OfferDetailView(ClinicAPIView):
    @extend_schema(
        responses=_ok(
            "{ref, status, version, expires_at, vacancy, entry, hold, hold_status, policy_version, policy_digest, "
            "decision_ref, decision_status (FRESH|STALE|UNAVAILABLE|NOT_USED), decision_expires_at, reason_code, "
            "decline_reason, notified_at}"
        )
    )
    def get(self, request, clinic, ref):
        return Response(offer_body(offer_detail(clinic=self.clinic, ref=ref), self.clinic.timezone))


class OfferClaimView(ClinicAPIView):
    @extend_schema(request=ClaimInput, responses=_ok("{status, hold, hold_expires_at, receipt, appointment}"))
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(ClaimInput)
            receipt = services.offer_claim(
                clinic=self.clinic,
                offer_ref=ref,
                expected_version=data["expected_version"],
                actor=request.user,
                idempotency_key=request.headers.get("Idempotency-Key"),
            )
            # ``appointment``: null while the hold waits for booking, its ref once booked (read under
            # the claim's locks, so no second read here).
            return 200, {**receipt.body, "appointment": receipt.appointment_ref}

        # Every refusal of the claim (and of its body) comes before its one write statement.
        return self.command("offer_claim", execute, refusals_write_nothing=True)


def _close_offer_command(view: ClinicAPIView, ref: str, *, command: str, service, input_class, **extra):
    """Decline and withdraw share one shape: (reason, expected_version?) in, {status, version, ...} out."""

    def execute(_receipt):
        data = view.validated(input_class)
        offer = service(
            clinic=view.clinic,
            offer_ref=ref,
            actor=view.request.user,
            reason=data["reason"],
            expected_version=data.get("expected_version"),
            **extra,
        )
        return 200, {"status": offer.status, "version": offer.version, "reason_code": offer.reason_code,
                     "decline_reason": offer.decline_reason}

    return view.command(command, execute)


class OfferDeclineView(ClinicAPIView):
    """ADMIN: a decline on the patient's behalf (the patient declines on the claim page); STAFF get 403
    PERMISSION_DENIED and nothing changes."""

    required_role = command_role("offer_decline")

    @extend_schema(request=OptionalReasonInput, responses=_ok("{status, version, reason_code, decline_reason}"))
    def post(self, request, clinic, ref):
        return _close_offer_command(
            self, ref, command="offer_decline", service=services.offer_decline, input_class=OptionalReasonInput,
            idempotency_key=_idempotency_key(request),
        )


class OfferWithdrawView(ClinicAPIView):
    """ADMIN (destructive: the patient may be about to accept it); STAFF get 403 PERMISSION_DENIED."""

    required_role = command_role("offer_withdraw")

    @extend_schema(request=ReasonInput, responses=_ok("{status}"))
    def post(self, request, clinic, ref):
        return _close_offer_command(
            self, ref, command="offer_withdraw", service=services.offer_withdraw, input_class=ReasonInput,
            idempotency_key=_idempotency_key(request),
        )


class HoldBookView(ClinicAPIView):
    @extend_schema(request=None, responses={201: OpenApiResponse(description="{appointment, status}")})
    def post(self, request, clinic, ref):
        def execute(_receipt):
            appointment, _created = services.offer_book(clinic=self.clinic, hold_ref=ref, actor=request.user)
            return 201, {"appointment": appointment.ref, "status": appointment.status}

        return self.command("hold_book", execute)


class DecisionFeedView(ClinicAPIView):
    """Feed one booking-reliability decision (read-only input to the matcher). Only the clinic's
    integration credential (object permission ``scheduling.feed_decisions``) may post: a STAFF or ADMIN
    user without it gets 403, anyone else 404. Every new decision is audited."""

    def initial(self, request, *args, **kwargs):
        APIView.initial(self, request, *args, **kwargs)
        self.clinic = clinic_for_grant(request.user, kwargs.get("clinic"), codename=DECISION_FEED_PERMISSION)

    @extend_schema(request=DecisionInput, responses={201: OpenApiResponse(description="{ref, decision_ref}")})
    def post(self, request, clinic):
        def execute(_receipt):
            data = self.validated(DecisionInput)
            decision = services.decision_record(
                clinic=self.clinic, actor=request.user,
                idempotency_key=_idempotency_key(request), **data,
            )
            return 201, {
                "ref": decision.ref,
                "decision_ref": decision.decision_ref,
                "status": decision.status,
            }

        return self.command("decision_record", execute)


# --- recovery (flow 9) and the ops read (API.md "Operations") ---


class VacancyCloseView(ClinicAPIView):
    """ADMIN (destructive: withdraws the active offer and gives the time up). 409 VACANCY_NOT_CLOSABLE."""

    required_role = command_role("vacancy_close")

    @extend_schema(request=RecoveryInput, responses=_ok("{status, version, withdrawn_offer, correlation_id}"))
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(RecoveryInput)
            correlation_id = new_correlation_id()
            vacancy, withdrawn = services.vacancy_close(
                clinic=self.clinic, vacancy_ref=ref, actor=request.user, reason=data["reason"],
                correlation_id=correlation_id, idempotency_key=_idempotency_key(request),
            )
            return 200, {"status": vacancy.status, "version": vacancy.version,
                         "withdrawn_offer": withdrawn.ref if withdrawn else None, "correlation_id": correlation_id}

        return self.command("vacancy_close", execute)


class VacancyReopenView(ClinicAPIView):
    """ADMIN (re-offers capacity). 409 VACANCY_NOT_REOPENABLE, VACANCY_STARTED."""

    required_role = command_role("vacancy_reopen")

    @extend_schema(request=RecoveryInput, responses=_ok("{status, version, correlation_id}"))
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(RecoveryInput)
            correlation_id = new_correlation_id()
            vacancy = services.vacancy_reopen(
                clinic=self.clinic, vacancy_ref=ref, actor=request.user, reason=data["reason"],
                correlation_id=correlation_id, idempotency_key=_idempotency_key(request),
            )
            return 200, {"status": vacancy.status, "version": vacancy.version, "correlation_id": correlation_id}

        return self.command("vacancy_reopen", execute)


class HoldRetryBookingView(ClinicAPIView):
    """STAFF: the booking command again (not destructive; same as holds/{ref}/book). 409 HOLD_NOT_BOOKABLE."""

    required_role = command_role("hold_retry_booking")

    @extend_schema(request=RecoveryInput, responses={201: OpenApiResponse(description="{appointment, status}")})
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(RecoveryInput)
            correlation_id = new_correlation_id()
            retried = services.hold_retry_booking(
                clinic=self.clinic, hold_ref=ref, actor=request.user, reason=data["reason"],
                correlation_id=correlation_id, idempotency_key=_idempotency_key(request),
            )
            if retried.refusal is not None:
                # Answered: the refusal's BOOKING_RETRY_FAILED event and audit row are already committed.
                exc = retried.refusal
                return exc.status_code, {**exc.as_body(), "correlation_id": correlation_id}
            appointment = retried.booked()
            return 201, {"appointment": appointment.ref, "status": appointment.status,
                         "correlation_id": correlation_id}

        return self.command("hold_retry_booking", execute)


class VacancyReviewView(ClinicAPIView):
    """STAFF (not destructive: it resolves a review the dispatcher asked staff for). PROMOTE offers the
    reviewed candidate despite the non-fresh decision; SKIP dispatches to the next candidate.
    409 VACANCY_NOT_IN_REVIEW, VERSION_CONFLICT, VACANCY_STARTED, CANDIDATE_INELIGIBLE."""

    required_role = command_role("vacancy_review_resolve")

    @extend_schema(
        request=ReviewInput,
        responses=_ok("{status, version, resolution, outcome, offer, reviewed_entry, correlation_id}"),
    )
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(ReviewInput)
            correlation_id = new_correlation_id()
            result = services.vacancy_review_resolve(
                clinic=self.clinic, vacancy_ref=ref, actor=request.user, reason=data["reason"],
                resolution=data["resolution"], expected_version=data.get("expected_version"),
                correlation_id=correlation_id, idempotency_key=_idempotency_key(request),
            )
            return 200, {"status": result.vacancy.status, "version": result.vacancy.version,
                         "resolution": result.resolution, "outcome": result.outcome,
                         "offer": result.offer.ref if result.offer else None,
                         "reviewed_entry": result.reviewed_entry, "correlation_id": correlation_id}

        return self.command("vacancy_review_resolve", execute)


class ShadowPolicyView(ClinicAPIView):
    """GET (STAFF): the shadow policy's agreement with the enforced one. POST (ADMIN): publish a candidate
    in SHADOW, 201; 409 SHADOW_EXISTS while another is observed."""

    def role_for(self, request) -> Role:
        return command_role("shadow_publish") if request.method == "POST" else Role.STAFF

    @extend_schema(responses=_ok("{shadow: {ref, status, changes, observations, agreed, agreement_rate, "
                                 "differences_by_reason, differences} | null}"))
    def get(self, request, clinic):
        return Response({"shadow": fairness.shadow_summary(clinic=self.clinic)})

    @extend_schema(request=ShadowPublishInput, responses={201: OpenApiResponse(description="{ref, status, changes, "
                                                                                          "correlation_id}")})
    def post(self, request, clinic):
        def execute(_receipt):
            data = self.validated(ShadowPublishInput)
            correlation_id = new_correlation_id()
            shadow = services.shadow_publish(clinic=self.clinic, actor=request.user, reason=data["reason"],
                                             changes=data["changes"], correlation_id=correlation_id)
            return 201, {"ref": shadow.ref, "status": shadow.status, "changes": shadow.changes,
                         "correlation_id": correlation_id}

        return self.command("shadow_publish", execute)


class ShadowDecideView(ClinicAPIView):
    """ADMIN: promote the shadow (a new enforced policy version, audited) or discard it. 409 SHADOW_NOT_ACTIVE."""

    decision = ""

    def role_for(self, request) -> Role:
        return command_role(f"shadow_{self.decision}")

    @extend_schema(request=RecoveryInput, responses=_ok("{ref, status, policy_version, correlation_id}"))
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(RecoveryInput)
            correlation_id = new_correlation_id()
            common = {"clinic": self.clinic, "shadow_ref": ref, "actor": request.user, "reason": data["reason"],
                      "correlation_id": correlation_id}
            if self.decision == "promote":
                shadow, policy = services.shadow_promote(**common)
                version = policy.version
            else:
                shadow, version = services.shadow_discard(**common), None
            return 200, {"ref": shadow.ref, "status": shadow.status, "policy_version": version,
                         "correlation_id": correlation_id}

        return self.command(f"shadow_{self.decision}", execute)


class WaitlistOpsView(ClinicAPIView):
    """GET /api/v1/ops/waitlist?clinic=…&limit=…&after=…: STAFF readiness, fill and fairness metrics, action queue."""

    def clinic_ref(self, request, kwargs) -> str | None:
        query = OpsQuery(data=request.query_params)
        if not query.is_valid():
            raise ValidationFailed("The request is not valid.", fields=field_errors(query.errors))
        self.query = query.validated_data
        return self.query["clinic"]

    @extend_schema(parameters=[OpsQuery], responses=_ok("{readiness, metrics, fairness, action_queue}"))
    def get(self, request):
        data, clinic = self.query, self.clinic
        body = ops_snapshot(clinic=clinic, queue_limit=data["limit"])
        if data.get("after"):
            body["action_queue"] = ops_action_queue(clinic=clinic, limit=data["limit"], after=data["after"])
        return Response(body)


class AppointmentCancelView(ClinicAPIView):
    """Cancel; a CONFIRMED appointment far enough ahead opens a vacancy (dispatched after commit). The
    appointment records why (``reason_code``, ``reason``) and who (``api:<username>`` for a token,
    ``staff:<username>`` for a session).

    The vacancy is the waitlist's, opened in the cancel's own transaction
    (``waitlist.services.appointment_cancel_with_vacancy``), so the endpoint lives with that command: the route
    is scheduling's resource, the command the waitlist's."""

    @extend_schema(
        request=CancelInput,
        responses={200: OpenApiResponse(description="{status, version, vacancy, reason_code, cancelled_by}")},
    )
    def post(self, request, clinic, ref):
        def execute(_receipt):
            data = self.validated(CancelInput)
            kind = CancelActor.API if request.auth is not None else CancelActor.STAFF
            appointment, vacancy = services.appointment_cancel_with_vacancy(
                clinic=self.clinic,
                appointment_ref=ref,
                reason=data["reason"],
                expected_version=data.get("expected_version"),
                reason_code=data["reason_code"],
                cancelled_by=cancel_actor_ref(kind, request.user),
                actor=request.user,
                idempotency_key=request.headers.get("Idempotency-Key") or "",
            )
            return 200, {
                "status": appointment.status,
                "version": appointment.version,
                "vacancy": vacancy.ref if vacancy else None,
                "reason_code": appointment.cancel_reason_code,
                "cancelled_by": appointment.cancelled_by,
            }

        # Every refusal of the cancel (and of its body) comes before its first write.
        return self.command("appointment_cancel", execute, refusals_write_nothing=True)

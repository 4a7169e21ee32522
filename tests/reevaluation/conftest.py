"""Reevaluation fixtures: a CRM test server on loopback, a booked world, and the CONFIRMED guard."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from reevaluation.assessment import AssessmentClient, canonical
from reevaluation.jobs import worker as worker_module
from reevaluation.models import ReevaluationJob
from reevaluation.proposals.models import AppointmentProposal
from reevaluation.services import dispatch_round, event_intake
from scheduling.models import Appointment, AppointmentStatus
from tests.reevaluation import factories as rf
from tests.worlds import ReevaluationWorld


def _confirmed_rows() -> dict:
    return {row["id"]: row for row in Appointment.objects.filter(status=AppointmentStatus.CONFIRMED).values()}


@pytest.fixture(autouse=True)
def confirmed_unchanged(monkeypatch):
    """Every CONFIRMED appointment (all columns) is identical before and after every reevaluation run,
    and at the end of the test every CONFIRMED row seen before a run is still identical."""
    original = worker_module.job_run
    first_seen: dict = {}
    runs = []

    def guarded(**kwargs):
        before = _confirmed_rows()
        for pk, row in before.items():
            first_seen.setdefault(pk, row)
        fingerprint = (
            ReevaluationJob.objects.filter(pk=kwargs["job_id"]).values_list("fingerprint", flat=True).first()
        )
        result = original(**kwargs)
        after = {row["id"]: row for row in Appointment.objects.filter(pk__in=before).values()}
        assert after == before, "a reevaluation run changed a CONFIRMED appointment"
        # No new CONFIRMED row for the job's patient (race tests may book others concurrently).
        new = Appointment.objects.filter(
            status=AppointmentStatus.CONFIRMED, patient__crm_fingerprint=fingerprint
        )
        assert not new.exclude(pk__in=before).exists(), "a reevaluation run created a CONFIRMED appointment"
        runs.append(result)
        return result

    monkeypatch.setattr(worker_module, "job_run", guarded)
    yield runs
    if first_seen:
        # The one sanctioned change: a swap the patient chose and an operator confirmed (an APPLIED proposal
        # about a CONFIRMED appointment, issue 28). Anything else is a violation.
        swapped = set(
            AppointmentProposal.objects.filter(state="APPLIED", needs_operator=True).values_list(
                "appointment_ref", flat=True)
        )
        current = {
            row["id"]: row for row in Appointment.objects.filter(pk__in=first_seen).exclude(ref__in=swapped).values()
        }
        expected = {pk: row for pk, row in first_seen.items() if row["ref"] not in swapped}
        assert current == expected, "a CONFIRMED appointment changed during the test"


class CRMServer:
    """A loopback HTTP CRM serving registered documents, with injectable faults.

    ``mode``: ok, slow (sleeps past the client's read timeout), error (503), tamper (changes the body
    so its hash no longer matches), privacy (adds raw profile fields), garbage (not JSON).
    """

    def __init__(self):
        self.documents: dict[str, dict] = {}
        self.mode = "ok"
        self.delay = 0.6
        self.calls = 0
        self.called = threading.Event()  # set on the first request: tests wait on it, not on time
        self.released = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                server.calls += 1
                server.called.set()
                ref = self.path.split("?")[0].rsplit("/", 1)[-1]
                doc = dict(server.documents.get(ref) or {})
                if server.mode == "slow":
                    # Hold the answer past the client's read timeout (released early at close).
                    server.released.wait(server.delay)
                if server.mode == "error":
                    return self._send(503, b'{"error":"unavailable"}')
                if server.mode == "tamper":
                    doc["policyGeneration"] = doc.get("policyGeneration", 0) + 1
                if server.mode == "privacy":
                    doc["name"] = "Zelda Quixote"
                    doc["score"] = 0.8675309
                if server.mode == "garbage":
                    return self._send(200, b"<html>oops</html>")
                self._send(200, canonical(doc) if doc else b"{}")

            def _send(self, status, body):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def register(self, doc: dict) -> str:
        self.documents[doc["assessmentRef"]] = doc
        return rf.doc_hash(doc)

    def close(self):
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def crm(settings):
    server = CRMServer()
    settings.CRM_BASE_URL = server.base_url
    settings.CRM_READ_TIMEOUT_SECONDS = 0.3
    settings.CRM_CONNECT_TIMEOUT_SECONDS = 0.5
    yield server
    server.close()


@pytest.fixture
def world(clinic):
    return ReevaluationWorld(clinic)



def post_event(
    world_or_clinic,
    fp: str,
    revision: int,
    crm: CRMServer | None = None,
    *,
    constraints=None,
    material=True,
    **overrides,
):
    """Register the assessment with the CRM test server (if any) and run intake with a signed body."""
    clinic = getattr(world_or_clinic, "clinic", world_or_clinic)
    doc = rf.document(revision, constraints, ref=f"asm-{clinic.pk}-{fp[:6]}-{revision}")
    digest = crm.register(doc) if crm else rf.doc_hash(doc)
    body = rf.event_body(
        clinic,
        fp,
        revision,
        assessment_hash=digest,
        assessment_ref=doc["assessmentRef"],
        materialChange=material,
        **overrides,
    )
    raw = rf.encode(body)
    return event_intake(body=raw, headers=rf.headers(raw))


def run_round(**kwargs) -> list[str]:
    """One dispatch round with every claim run inline through the (guarded) worker."""
    client = kwargs.pop("client", None) or AssessmentClient()
    return [
        worker_module.job_run(job_id=c.job_id, owner=c.owner, attempt=c.attempt, client=client)
        for c in dispatch_round(**kwargs)
    ]


def json_body(response) -> dict:
    return json.loads(response.content)

"""Demo: register an assessment with the CRM stub and post a signed event for it.

    python manage.py reevaluation_demo_event --clinic cl_x --crm-patient-ref CRM-123 --revision 2 \
        --required-practitioner pr_y --url http://127.0.0.1:8000
"""

import hashlib
import json
import uuid

import requests
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from reevaluation.crm_stub import stub_document, stub_register
from reevaluation.services import event_intake, signed_headers
from scheduling.models import Clinic


class Command(BaseCommand):
    help = "Post a signed PatientSchedulingAssessmentChanged event (and its stub assessment)."

    def add_arguments(self, parser):
        parser.add_argument("--clinic", required=True)
        parser.add_argument("--crm-patient-ref", required=True)
        parser.add_argument("--revision", type=int, required=True)
        parser.add_argument("--required-practitioner")
        parser.add_argument("--resource-need")
        parser.add_argument("--minimum-slot-minutes", type=int)
        parser.add_argument("--url", help="post over HTTP to this base URL instead of calling the service")

    def handle(self, *args, **o):
        clinic = Clinic.objects.select_related("tenant_group").filter(ref=o["clinic"]).first()
        if clinic is None:
            raise CommandError("unknown clinic")
        constraints = {
            key: value
            for key, value in (
                ("requiredPractitioner", o["required_practitioner"]),
                ("resourceNeed", o["resource_need"]),
                ("minimumSlotMinutes", o["minimum_slot_minutes"]),
            )
            if value is not None
        }
        ref = f"asm-{uuid.uuid4().hex[:12]}"
        digest = stub_register(
            stub_document(assessment_ref=ref, revision=o["revision"], constraints=constraints)
        )
        body = json.dumps(
            {
                "eventId": f"evt-{uuid.uuid4().hex}",
                "tenantGroupId": clinic.tenant_group.ref,
                "clinicId": clinic.ref,
                "patientReferenceFingerprint": hashlib.sha256(o["crm_patient_ref"].encode()).hexdigest(),
                "profileRevision": o["revision"],
                "materialChange": True,
                "assessmentRef": ref,
                "assessmentHash": digest,
                "occurredAt": timezone.now().isoformat(),
            }
        ).encode()
        headers = signed_headers(body, tenant_group_ref=clinic.tenant_group.ref)
        if o["url"]:
            response = requests.post(
                o["url"].rstrip("/") + "/api/v1/events/patient-scheduling-assessment-changed",
                data=body,
                headers={**headers, "Content-Type": "application/json"},
                timeout=10,
            )
            self.stdout.write(f"{response.status_code} {response.text}")
        else:
            result = event_intake(body=body, headers=headers)
            self.stdout.write(f"{result.status} {result.job_ref or ''}")

"""deploy/prometheus/alerts.yml: every alert names exported metrics and links an existing runbook section."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from observability import components

ROOT = Path(settings.BASE_DIR)
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
RUNBOOK = ROOT / "docs" / "runbook.md"
#: Identifiers in an expression that are metric names of this service (not functions, labels or keywords).
METRIC = re.compile(r"\b((?:waitlist|reevaluation|http|service|fhir)_[a-z0-9_]+)\b")


def rules() -> list[dict]:
    document = yaml.safe_load(ALERTS.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def anchors() -> set[str]:
    """GitHub-style anchors of the runbook's headings."""
    found = set()
    for line in RUNBOOK.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^a-z0-9 -]", "", title).replace(" ", "-"))
    return found


@pytest.fixture
def exported(db, settings) -> set[str]:
    """Every sample name a real scrape returns (histograms expose _bucket/_count/_sum)."""
    settings.METRICS_SCRAPE_TOKENS = ["*:alerts-test-token"]
    settings.METRICS_CACHE_SECONDS = 0
    components.beat_seen("beat@alerts", sent=True)  # ages are absent until beat and a worker showed life
    components.worker_seen("worker@alerts")
    client = Client()
    client.get("/healthz")  # one observed request so the latency histogram has samples
    body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer alerts-test-token").content.decode()
    names = set()
    for family in text_string_to_metric_families(body):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
    return names


def test_every_alert_has_a_summary_and_a_runbook_section():
    sections = anchors()
    for rule in rules():
        annotations = rule.get("annotations", {})
        assert annotations.get("summary"), rule["alert"]
        link = annotations.get("runbook_url", "")
        assert link.startswith("docs/runbook.md#"), rule["alert"]
        assert link.split("#", 1)[1] in sections, f"{rule['alert']}: no runbook section {link}"


def test_every_alert_expression_names_only_metrics_that_metrics_exports(exported):
    for rule in rules():
        names = set(METRIC.findall(rule["expr"]))
        assert names, f"{rule['alert']} names no metric of this service"
        assert names <= exported, f"{rule['alert']}: {sorted(names - exported)} not exported"


def test_the_seeded_alert_topics_are_all_covered():
    alerts = {rule["alert"] for rule in rules()}
    for needed in ("ReevaluationBacklogPastDue", "ReevaluationLeaseRenewalFailures", "ReevaluationRepeatedQuarantine",
                   "WaitlistOutboxDeadLetters", "WaitlistDecisionFeedStale", "WaitlistExhaustedVacanciesRising",
                   "BeatNotRunning", "BeatCannotSend", "WorkersDown", "BrokerDown", "RedisCacheDown"):
        assert needed in alerts


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) not installed")
def test_promtool_accepts_the_rules():
    done = subprocess.run(["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr

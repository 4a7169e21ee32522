"""FHIR ``_count=0`` (issue 44 §6): R4 allows it to ask for the number of matches only, so it answers a searchset
Bundle with ``total`` and no entries (Slot, Appointment, Schedule), filters applied; a negative count is still a
400."""

from __future__ import annotations

import pytest
from fhir.resources.R4B.appointment import Appointment as FhirAppointment
from fhir.resources.R4B.bundle import Bundle
from fhir.resources.R4B.schedule import Schedule as FhirSchedule
from fhir.resources.R4B.slot import Slot as FhirSlot

from tests.conftest import token_client
from tests.interop.fhir_helpers import entries, links, outcome, validated
from tests.interop.test_fhir import WINDOW, get, schedule  # noqa: F401  (schedule: the fixture)

pytestmark = pytest.mark.usefixtures("frozen_clock", "no_broker")


def count_only(response) -> Bundle:
    bundle = validated(response)
    assert isinstance(bundle, Bundle) and bundle.type == "searchset" and not bundle.entry
    return bundle


@pytest.mark.parametrize(("path", "model", "params"), [
    ("Slot", FhirSlot, WINDOW), ("Appointment", FhirAppointment, {}), ("Schedule", FhirSchedule, {}),
])
def test_count_zero_answers_the_total_and_no_entries(schedule, path, model, params):  # noqa: F811
    world = schedule[0]
    client = token_client(world.staff)
    everything = entries(get(client, world.clinic, path, **params), model)
    response = get(client, world.clinic, path, **params, _count="0")
    bundle = count_only(response)
    assert bundle.total == len(everything) > 0
    assert "next" not in links(response) and "_count=0" in links(response)["self"]


def test_count_zero_counts_only_what_the_filters_match(schedule):  # noqa: F811
    world = schedule[0]
    client = token_client(world.staff)
    free = entries(get(client, world.clinic, "Slot", **WINDOW, status="free"), FhirSlot)
    bundle = count_only(get(client, world.clinic, "Slot", **WINDOW, status="free", _count="0"))
    assert bundle.total == len(free) == 1


def test_a_negative_count_is_still_a_400(schedule):  # noqa: F811
    world = schedule[0]
    outcome(get(token_client(world.staff), world.clinic, "Slot", **WINDOW, _count="-1"), 400, "invalid")

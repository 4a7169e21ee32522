"""Plain words for the codes the console shows, and for the policy's fields (with their units).

The codes stay on screen (they are what the API, the logs and the audit rows carry); these labels and
explanations sit beside them so a clinic reads "No candidate" and why, not only ``NO_CANDIDATE``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

#: code → (label, explanation), from ``codes.toml`` beside this module (a table, not code). Unknown codes are shown
#: as they are.
CODES: dict[str, tuple[str, str]] = {
    code: (entry["label"], entry["help"])
    for code, entry in tomllib.loads(Path(__file__).with_name("codes.toml").read_text(encoding="utf-8")).items()
}


def _http(code: str) -> tuple[str, str] | None:
    """``HTTP_503`` (a subscriber's answer): its own words, not one entry per status."""
    if code.startswith("HTTP_") and code[5:].isdigit():
        return f"Endpoint answered {code[5:]}", "The subscriber's endpoint answered with an error status."
    return None


def code_label(code) -> str:
    return (CODES.get(str(code)) or _http(str(code)) or (str(code), ""))[0]


def code_help(code) -> str:
    return (CODES.get(str(code)) or _http(str(code)) or ("", ""))[1]


#: Action-queue kind → what a person does about a row that has no command in the console.
QUEUE_ACTIONS: dict[str, str] = {
    "PROVIDER_FAILING": "Check the clinic's notice provider (the clinic's notification settings, the gateway's "
                        "status); notices are retried and go out once it works again.",
    "SUBSCRIPTION_ERROR": "Ask the EHR's integrator to fix their endpoint, then delete and create the "
                          "Subscription again (FHIR API); changes made meanwhile are sent once it is active.",
    "DELIVERY_DEAD": "Contact the patient another way if the slot is still theirs; check the provider if many fail.",
    "BOOKING_UNACKNOWLEDGED": "The patient was booked automatically and has not confirmed seeing it; call them "
                              "before the release time, or the slot goes back to the waiting list.",
    "TEXTS_FAILING": "Texts to this patient keep failing: check the phone number on file with them (their notices "
                     "go by e-mail where they consented).",
}


def queue_action(kind: str) -> str:
    return QUEUE_ACTIONS.get(kind, "")


#: policy field → (label, unit, what it does), from ``policy_fields.toml`` beside this module.
POLICY_FIELDS: dict[str, tuple[str, str, str]] = {
    name: (entry["label"], entry["unit"], entry["help"])
    for name, entry in tomllib.loads(Path(__file__).with_name("policy_fields.toml").read_text(encoding="utf-8")).items()
}


def policy_label(name: str) -> str:
    return POLICY_FIELDS.get(name, (name.replace("_", " "), "", ""))[0]


def policy_unit(name: str) -> str:
    return POLICY_FIELDS.get(name, ("", "", ""))[1]


def policy_help(name: str) -> str:
    return POLICY_FIELDS.get(name, ("", "", ""))[2]

"""Plain words for the codes the console shows, and for the policy's fields (with their units).

The codes stay on screen (they are what the API, the logs and the audit rows carry); these labels and
explanations sit beside them so a clinic reads "No candidate" and why, not only ``NO_CANDIDATE``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

#: code → {"label", "help", "label_ko", "help_ko"}, from ``codes.toml`` beside this module: the one glossary, English
#: and Korean side by side. Unknown codes are shown as they are.
GLOSSARY: dict[str, dict[str, str]] = tomllib.loads(
    Path(__file__).with_name("codes.toml").read_text(encoding="utf-8"))

#: code → (English label, English explanation).
CODES: dict[str, tuple[str, str]] = {code: (entry["label"], entry["help"]) for code, entry in GLOSSARY.items()}


def _korean(language: str | None) -> bool:
    """The phrase follows Django's active language (LocaleMiddleware: the session, cookie or Accept-Language)."""
    from django.utils.translation import get_language

    return (language or get_language() or "en").lower().startswith("ko")


def _http(code: str, korean: bool) -> tuple[str, str] | None:
    """``HTTP_503`` (a subscriber's answer): its own words, not one entry per status."""
    if code.startswith("HTTP_") and code[5:].isdigit():
        if korean:
            return f"수신처 응답 {code[5:]}", "구독 수신처가 오류 상태로 응답했습니다."
        return f"Endpoint answered {code[5:]}", "The subscriber's endpoint answered with an error status."
    return None


def _entry(code, language: str | None) -> tuple[str, str] | None:
    text = str(code)
    korean = _korean(language)
    entry = GLOSSARY.get(text)
    if entry is None:
        return _http(text, korean)
    if korean and entry.get("label_ko"):
        return entry["label_ko"], entry.get("help_ko") or entry["help"]
    return entry["label"], entry["help"]


def code_label(code, language: str | None = None) -> str:
    return (_entry(code, language) or (str(code), ""))[0]


def code_help(code, language: str | None = None) -> str:
    return (_entry(code, language) or ("", ""))[1]


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

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


def is_code(value) -> bool:
    """A value the glossary has words for (an audit row's ``status``, a state in a generic field)."""
    return isinstance(value, str) and value in GLOSSARY


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


#: A shadow policy's difference (``waitlist.shadow.services``): a prefix and the reason or outcome after it.
_SHADOW_PREFIXES = (
    ("ENFORCED_ENTRY_", ("The shadow's rules exclude the offered patient",
                         "섀도 정책 규칙으로는 제안받은 환자가 제외됨")),
    ("SHADOW_ENTRY_", ("The shadow picks someone the enforced rules exclude",
                       "섀도 정책이 현재 규칙에서 제외되는 환자를 고름")),
    ("SHADOW_", ("The shadow would not offer", "섀도 정책은 제안하지 않음")),
)


def _composite(code: str, korean: bool) -> tuple[str, str] | None:
    """``SHADOW_ENTRY_WEEKLY_CAP``: the prefix's words and the inner code's words."""
    for prefix, (english, ko) in _SHADOW_PREFIXES:
        inner = code[len(prefix):]
        if code.startswith(prefix) and inner in GLOSSARY:
            label, help_text = _entry(inner, "ko" if korean else "en") or (inner, "")
            return f"{ko if korean else english}: {label}", help_text
    return None


def _entry(code, language: str | None, kind: str = "") -> tuple[str, str] | None:
    """``kind`` names the family of a code that means something else elsewhere (a consent's ``GRANTED`` is not a
    standing acceptance's): ``consent.GRANTED`` is looked up first, then ``GRANTED``."""
    text = str(code)
    korean = _korean(language)
    entry = (GLOSSARY.get(f"{kind}.{text}") if kind else None) or GLOSSARY.get(text)
    if entry is None:
        return _http(text, korean) or _composite(text, korean)
    if korean and entry.get("label_ko"):
        return entry["label_ko"], entry.get("help_ko") or entry["help"]
    return entry["label"], entry["help"]


def code_label(code, language: str | None = None, kind: str = "") -> str:
    return (_entry(code, language, kind) or (str(code), ""))[0]


def code_help(code, language: str | None = None, kind: str = "") -> str:
    return (_entry(code, language, kind) or ("", ""))[1]


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

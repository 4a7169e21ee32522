"""Short human codes for appointments and offers (``GN-7KQ3``): what a patient reads out on the phone.

The code is random, not sequential, from characters nobody confuses aloud or on paper (no 0/O, 1/I/L), and
unique within its clinic by a database constraint. PostgreSQL picks it (a ``BEFORE INSERT`` trigger, so every
insert path gets one, the prepared statements included), retrying on a clash and growing from 4 characters once
a clinic's 4-character codes grow crowded. It names a row for a person; it is never a credential (the claim
link carries its own token), so knowing one grants nothing.

The row stores the random part; the clinic's prefix (``Clinic.settings["code_prefix"]``, else the initials of
its name) is added where a person reads it.
"""

from __future__ import annotations

import re

from . import queries

ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
#: ``GN-7KQ3``, ``7KQ3``, ``gn 7kq3``: a prefix of 1-4 letters (optional), then the random part.
CODE_PATTERN = re.compile(rf"^(?:([A-Z]{{1,4}})[- ]?)?([{ALPHABET}]{{4,8}})$")

#: The picker and the trigger, as scheduling's migration 0012 and waitlist's 0016 install them (the DDL's text
#: lives in ``common.queries``; tests read the alphabet here).
PICK_FUNCTION_SQL = queries.short_code_functions_ddl(ALPHABET)
trigger_sql = queries.short_code_trigger_ddl
drop_trigger_sql = queries.short_code_trigger_drop_ddl


def clinic_prefix(clinic) -> str:
    """The clinic's code prefix: set in its settings, else the initials of its name's first two words."""
    configured = str((getattr(clinic, "settings", None) or {}).get("code_prefix", "")).upper()
    if re.fullmatch(r"[A-Z]{1,4}", configured):
        return configured
    initials = "".join(word[0] for word in re.findall(r"[A-Za-z]+", getattr(clinic, "name", "") or ""))[:2]
    return initials.upper() or "C"


def display_code(clinic, code: str) -> str:
    """``GN-7KQ3``; empty when the row has no code yet."""
    return f"{clinic_prefix(clinic)}-{code}" if code else ""


def parse_code(text: str) -> tuple[str, str] | None:
    """(prefix or "", random part) of what a person typed, or None when it cannot be a code."""
    match = CODE_PATTERN.match((text or "").strip().upper())
    return (match.group(1) or "", match.group(2)) if match else None

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

ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
#: ``GN-7KQ3``, ``7KQ3``, ``gn 7kq3``: a prefix of 1-4 letters (optional), then the random part.
CODE_PATTERN = re.compile(rf"^(?:([A-Z]{{1,4}})[- ]?)?([{ALPHABET}]{{4,8}})$")

#: The SQL of the picker and the trigger (the migrations run it; tests read it to prove the alphabet).
PICK_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION cw_short_code_pick(tbl text, clinic bigint) RETURNS text AS $$
DECLARE
  alphabet constant text := '{ALPHABET}';
  len int := 4;
  tries int := 0;
  bytes bytea;
  candidate text;
  taken boolean;
BEGIN
  LOOP
    bytes := uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid());
    candidate := '';
    FOR i IN 0..len - 1 LOOP
      candidate := candidate || substr(alphabet, 1 + get_byte(bytes, i) % {len(ALPHABET)}, 1);
    END LOOP;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE clinic_id = $1 AND code = $2)', tbl)
      INTO taken USING clinic, candidate;
    IF NOT taken THEN
      RETURN candidate;
    END IF;
    tries := tries + 1;
    IF tries % 8 = 0 AND len < 8 THEN
      len := len + 1;
    END IF;
  END LOOP;
END
$$ LANGUAGE plpgsql VOLATILE;

CREATE OR REPLACE FUNCTION cw_short_code_fill() RETURNS trigger AS $$
BEGIN
  IF NEW.code IS NULL OR NEW.code = '' THEN
    NEW.code := cw_short_code_pick(TG_TABLE_NAME, NEW.clinic_id);
  END IF;
  RETURN NEW;
END
$$ LANGUAGE plpgsql;
"""


def trigger_sql(table: str) -> str:
    """Give ``table``'s new rows a code, and its existing rows one each (the backfill)."""
    return f"""
CREATE TRIGGER {table}_short_code BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION cw_short_code_fill();
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT id, clinic_id FROM {table} WHERE code = '' ORDER BY id LOOP
    UPDATE {table} SET code = cw_short_code_pick('{table}', r.clinic_id) WHERE id = r.id;
  END LOOP;
END
$$;
"""


def drop_trigger_sql(table: str) -> str:
    return f"DROP TRIGGER IF EXISTS {table}_short_code ON {table};"


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

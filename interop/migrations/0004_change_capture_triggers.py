"""Capture every change that a FHIR subscriber may care about, in the changing transaction: an appointment
inserted or changing status, time or practitioner; a vacancy inserted or changing status; an offer inserted
or changing status (its vacancy's Slot turns free/busy-tentative). Triggers, not Django signals: they see
every writer (CAS ``update()`` included), and a change row exists if and only if the change commits."""

from django.db import migrations

SQL = """
CREATE FUNCTION interop_capture_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status
     OR (TG_ARGV[0] = 'appointment' AND (NEW.starts_at IS DISTINCT FROM OLD.starts_at
                                         OR NEW.practitioner_id IS DISTINCT FROM OLD.practitioner_id)) THEN
    INSERT INTO interop_resourcechange (clinic_id, kind, row_id, at)
    VALUES (NEW.clinic_id, TG_ARGV[0], NEW.id, now());
  END IF;
  RETURN NULL;
END $$;

CREATE FUNCTION interop_capture_offer() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status THEN
    INSERT INTO interop_resourcechange (clinic_id, kind, row_id, at)
    VALUES (NEW.clinic_id, 'vacancy', NEW.vacancy_id, now());
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER interop_capture_appointment AFTER INSERT OR UPDATE ON scheduling_appointment
  FOR EACH ROW EXECUTE FUNCTION interop_capture_row('appointment');
CREATE TRIGGER interop_capture_vacancy AFTER INSERT OR UPDATE ON waitlist_vacancy
  FOR EACH ROW EXECUTE FUNCTION interop_capture_row('vacancy');
CREATE TRIGGER interop_capture_offer AFTER INSERT OR UPDATE ON waitlist_offer
  FOR EACH ROW EXECUTE FUNCTION interop_capture_offer();
"""

REVERSE = """
DROP TRIGGER IF EXISTS interop_capture_appointment ON scheduling_appointment;
DROP TRIGGER IF EXISTS interop_capture_vacancy ON waitlist_vacancy;
DROP TRIGGER IF EXISTS interop_capture_offer ON waitlist_offer;
DROP FUNCTION IF EXISTS interop_capture_row();
DROP FUNCTION IF EXISTS interop_capture_offer();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("interop", "0003_subscriptions"),
        ("scheduling", "0007_clinic_permissions_merged"),
        ("waitlist", "0001_initial"),
    ]

    operations = [migrations.RunSQL(SQL, REVERSE)]

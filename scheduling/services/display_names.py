"""Set the names patients read per language (``DisplayNamed.display_names``) of a clinic, practitioner or
treatment: the admin's form and ``manage.py scheduling_display_name`` both end here or in the same validator."""

from __future__ import annotations

from django.db import transaction

from common.errors import NotFound, ValidationFailed

from ..models import DISPLAY_LANGUAGES, Clinic, Practitioner, Treatment

Named = Clinic | Practitioner | Treatment
KINDS: dict[str, type[Named]] = {"clinic": Clinic, "practitioner": Practitioner, "treatment": Treatment}


def display_name_set(*, clinic: Clinic, kind: str, ref: str, language: str, name: str) -> Named:
    """``name`` as the ``language`` name of the clinic itself (``kind="clinic"``) or of one of its practitioners
    or treatments; an empty ``name`` removes it (the row's ``name`` is shown again). Out-of-clinic refs are
    missing ones."""
    if kind not in KINDS:
        raise ValidationFailed(f"kind must be one of {', '.join(KINDS)}", code="UNKNOWN_KIND")
    if language not in DISPLAY_LANGUAGES:
        raise ValidationFailed(f"language must be one of {', '.join(DISPLAY_LANGUAGES)}", code="UNKNOWN_LANGUAGE")
    name = name.strip()
    if len(name) > 200:
        raise ValidationFailed("a display name is at most 200 characters", code="NAME_TOO_LONG")
    model = KINDS[kind]
    with transaction.atomic():
        row: Named | None
        if model is Clinic:
            row = Clinic.objects.select_for_update(no_key=True).filter(pk=clinic.pk, ref=ref).first()
        else:
            row = model.objects.select_for_update(no_key=True).filter(clinic=clinic, ref=ref).first()  # type: ignore[misc]
        if row is None:
            raise NotFound(f"{kind} {ref} not found")
        names = dict(row.display_names) if isinstance(row.display_names, dict) else {}
        if name:
            names[language] = name
        else:
            names.pop(language, None)
        row.display_names = names
        row.save(update_fields=["display_names"])
    return row

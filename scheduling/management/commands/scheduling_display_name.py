"""Set (or show) the names patients read in another language: ``manage.py scheduling_display_name``.

    manage.py scheduling_display_name --clinic cl_demo_gangnam --language ko --name "강남 클리닉"
    manage.py scheduling_display_name --clinic cl_demo_gangnam --practitioner pr_x --language ko --name "서 원장"
    manage.py scheduling_display_name --clinic cl_demo_gangnam --treatment tr_x --language ko --name ""   # remove
    manage.py scheduling_display_name --clinic cl_demo_gangnam                                             # show

The claim, "book me automatically" and opt-out pages and every notice use them; ``name`` stays the fallback.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from common.errors import DomainError
from scheduling.models import DISPLAY_LANGUAGES, Clinic, Practitioner, Treatment
from scheduling.services import display_name_set


class Command(BaseCommand):
    help = "Set or show the per-language display names of a clinic, its practitioners and treatments."

    def add_arguments(self, parser):
        parser.add_argument("--clinic", required=True, help="clinic ref")
        target = parser.add_mutually_exclusive_group()
        target.add_argument("--practitioner", help="practitioner ref (default: the clinic itself)")
        target.add_argument("--treatment", help="treatment ref (default: the clinic itself)")
        parser.add_argument("--language", choices=DISPLAY_LANGUAGES)
        parser.add_argument("--name", help='the name in that language; "" removes it')

    def handle(self, *args, clinic, practitioner=None, treatment=None, language=None, name=None, **options):
        found = Clinic.objects.filter(ref=clinic).first()
        if found is None:
            raise CommandError(f"no clinic {clinic}")
        if name is None:
            self._show(found)
            return
        if language is None:
            raise CommandError("--language is required with --name")
        kind, ref = ("practitioner", practitioner) if practitioner else (
            ("treatment", treatment) if treatment else ("clinic", found.ref))
        try:
            row = display_name_set(clinic=found, kind=kind, ref=ref, language=language, name=name)
        except DomainError as exc:
            raise CommandError(f"{exc.code}: {exc.detail}") from exc
        self.stdout.write(f"{kind} {row.ref}: {row.name} / {language}: {row.name_in(language)}")

    def _show(self, clinic: Clinic) -> None:
        rows: list[tuple[str, Clinic | Practitioner | Treatment]] = [
            ("clinic", clinic), *[("practitioner", p) for p in clinic.practitioners.order_by("pk")],
            *[("treatment", t) for t in clinic.treatments.order_by("pk")]]
        for kind, row in rows:
            names = ", ".join(f"{lang}: {row.name_in(lang)}" for lang in DISPLAY_LANGUAGES)
            self.stdout.write(f"{kind:12} {row.ref:28} {row.name} ({names})")

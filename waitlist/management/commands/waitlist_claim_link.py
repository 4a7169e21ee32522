"""Print a claim link for an open offer (support and the demo): ``manage.py waitlist_claim_link ofr_x``.

Claim links are bearer credentials, so no log line carries one (docs/security.md); whoever can run
manage.py can mint one here instead.
"""

from django.core.management.base import BaseCommand, CommandError

from waitlist.models import Offer
from waitlist.offers.tokens import claim_link


class Command(BaseCommand):
    help = "Print the claim link of an offer (the latest offer when no ref is given)."

    def add_arguments(self, parser):
        parser.add_argument("offer_ref", nargs="?")

    def handle(self, *args, offer_ref=None, **options):
        offers = Offer.objects.select_related("entry").order_by("-id")
        offer = offers.filter(ref=offer_ref).first() if offer_ref else offers.first()
        if offer is None:
            raise CommandError("no such offer")
        self.stdout.write(f"{offer.ref} {offer.status}: {claim_link(offer)}")

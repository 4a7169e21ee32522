from django.apps import AppConfig


class WaitlistConfig(AppConfig):
    name = "waitlist"

    def ready(self) -> None:
        from corsheaders.signals import check_request_enabled

        from common.outbox import register_handler
        from scheduling.scoping import command_roles_register
        from waitlist.joining.cors import origin_allowed
        from waitlist.joining.notices import deliver_join_code, deliver_joined
        from waitlist.joining.services import CODE_TOPIC, JOINED_TOPIC
        from waitlist.joining.upkeep import TOPIC as UPKEEP_TOPIC
        from waitlist.joining.upkeep import deliver_upkeep_ask
        from waitlist.models import OFFER_TOPIC
        from waitlist.notices.confirmation import deliver_booking_confirmation, release_link_register
        from waitlist.notices.confirmation_services import BOOKING_CONFIRMED_TOPIC
        from waitlist.notices.offer_notice import deliver_offer_notice
        from waitlist.offers.tokens import claim_link
        from waitlist.roles import COMMAND_ROLES
        from waitlist.tasks import register_effects

        register_handler(CODE_TOPIC, deliver_join_code)
        register_handler(UPKEEP_TOPIC, deliver_upkeep_ask)
        register_handler(JOINED_TOPIC, deliver_joined)
        check_request_enabled.connect(origin_allowed, dispatch_uid="waitlist.joining.cors")
        register_handler(OFFER_TOPIC, deliver_offer_notice)
        register_handler(BOOKING_CONFIRMED_TOPIC, deliver_booking_confirmation)
        # A standing booking's release link is its claim page, which offers the release until ``release_until``.
        release_link_register(lambda offer, _appointment: claim_link(offer))
        register_effects()  # services name their after-commit effects; the tasks carry them out
        command_roles_register(COMMAND_ROLES)

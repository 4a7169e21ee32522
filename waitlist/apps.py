from django.apps import AppConfig


class WaitlistConfig(AppConfig):
    name = "waitlist"

    def ready(self) -> None:
        from corsheaders.signals import check_request_enabled
        from django.conf import settings

        from common.outbox import register_handler
        from common.taskwiring import periodic_register, queue_register
        from scheduling.scoping import command_roles_register
        from waitlist import tasks
        from waitlist.joining import tasks as joining_tasks
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
        from waitlist.texts import tasks as text_tasks

        register_handler(CODE_TOPIC, deliver_join_code)
        register_handler(UPKEEP_TOPIC, deliver_upkeep_ask)
        register_handler(JOINED_TOPIC, deliver_joined)
        check_request_enabled.connect(origin_allowed, dispatch_uid="waitlist.joining.cors")
        register_handler(OFFER_TOPIC, deliver_offer_notice)
        register_handler(BOOKING_CONFIRMED_TOPIC, deliver_booking_confirmation)
        # A standing booking's release link is its claim page, which offers the release until ``release_until``.
        release_link_register(lambda offer, _appointment: claim_link(offer))
        tasks.register_effects()  # services name their after-commit effects; the tasks carry them out
        command_roles_register(COMMAND_ROLES)
        queue_register("delivery", tasks.deliver_notices)
        periodic_register("waitlist-expire-offers", tasks.expire_offers, every=settings.WAITLIST_EXPIRE_EVERY_SECONDS)
        periodic_register("waitlist-reconcile", tasks.reconcile, every=settings.WAITLIST_RECONCILE_EVERY_SECONDS)
        periodic_register("waitlist-acknowledgements", text_tasks.acknowledgements,
                          every=settings.WAITLIST_ACK_EVERY_SECONDS)
        # Self-service joining (issue 40): expired requests purged, then the daily upkeep.
        periodic_register("purge-join-requests", joining_tasks.purge_join_requests, every=600.0)
        periodic_register("join-upkeep", joining_tasks.upkeep, every=3600.0)

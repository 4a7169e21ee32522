from django.apps import AppConfig


class WaitlistConfig(AppConfig):
    name = "waitlist"

    def ready(self) -> None:
        from common.outbox import register_handler

        from .confirmations import deliver_booking_confirmation
        from .models import OFFER_TOPIC
        from .notifications import deliver_offer_notice
        from .services.confirmation import BOOKING_CONFIRMED_TOPIC
        from .tasks import register_effects

        register_handler(OFFER_TOPIC, deliver_offer_notice)
        register_handler(BOOKING_CONFIRMED_TOPIC, deliver_booking_confirmation)
        register_effects()  # services name their after-commit effects; the tasks carry them out

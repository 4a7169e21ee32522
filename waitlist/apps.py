from django.apps import AppConfig


class WaitlistConfig(AppConfig):
    name = "waitlist"

    def ready(self) -> None:
        from common.outbox import register_handler

        from .models import OFFER_TOPIC
        from .notifications import deliver_offer_notice
        from .tasks import register_effects

        register_handler(OFFER_TOPIC, deliver_offer_notice)
        register_effects()  # services name their after-commit effects; the tasks carry them out

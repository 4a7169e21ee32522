from django.apps import AppConfig


class InteropConfig(AppConfig):
    name = "interop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        from common.outbox import register_handler
        from common.taskwiring import periodic_register
        from waitlist.figures.panels import appointment_identifiers_register
        from waitlist.figures.queue import queue_source_register

        from .queue import subscription_rows
        from .selectors import ehr_identifiers
        from .services.subscriptions import TOPIC, deliver_notification
        from .tasks import fanout_subscriptions

        register_handler(TOPIC, deliver_notification)
        queue_source_register("SUBSCRIPTION_ERROR", subscription_rows)
        appointment_identifiers_register(ehr_identifiers)
        periodic_register("fhir-subscription-fanout", fanout_subscriptions,
                          every=settings.FHIR_SUBSCRIPTION_FANOUT_EVERY_SECONDS)

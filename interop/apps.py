from django.apps import AppConfig


class InteropConfig(AppConfig):
    name = "interop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from common.outbox import register_handler
        from waitlist.figures.panels import appointment_identifiers_register
        from waitlist.figures.queue import queue_source_register

        from .queue import subscription_rows
        from .selectors import ehr_identifiers
        from .services.subscriptions import TOPIC, deliver_notification

        register_handler(TOPIC, deliver_notification)
        queue_source_register("SUBSCRIPTION_ERROR", subscription_rows)
        appointment_identifiers_register(ehr_identifiers)

from django.apps import AppConfig


class InteropConfig(AppConfig):
    name = "interop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from common.outbox import register_handler

        from .services.subscriptions import TOPIC, deliver_notification

        register_handler(TOPIC, deliver_notification)

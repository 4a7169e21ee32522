from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "observability"

    def ready(self) -> None:
        from common.effects import send_failure_register

        from . import components, correlation

        correlation.connect_celery_signals()
        # A follow-up that could not be sent is noted for beat (observability/beat.py sends reconcile then).
        send_failure_register(components.effect_send_failed)

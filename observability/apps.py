from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    name = "observability"

    def ready(self) -> None:
        from . import correlation

        correlation.connect_celery_signals()

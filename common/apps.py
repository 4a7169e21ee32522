from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "common"
    verbose_name = "Shared infrastructure"

    def ready(self):
        from . import checks  # noqa: F401  (registers the production guard's system check)
        from .auth import connect_signals
        from .redaction import install_record_factory
        from .tasks import deliver_outbox, reclaim_outbox
        from .taskwiring import periodic_register, queue_register
        from .usernames import install_username_validator

        install_record_factory()
        periodic_register("deliver-outbox", deliver_outbox, every=10.0)
        periodic_register("reclaim-outbox", reclaim_outbox, every=60.0)
        queue_register("delivery", deliver_outbox)  # slow network calls, apart from matching
        connect_signals()
        install_username_validator()
        checks.refuse_unsafe_production()

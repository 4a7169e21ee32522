from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "common"
    verbose_name = "Shared infrastructure"

    def ready(self):
        from . import checks  # noqa: F401  (registers the production guard's system check)
        from .auth import connect_signals
        from .redaction import install_record_factory
        from .usernames import install_username_validator

        install_record_factory()
        connect_signals()
        install_username_validator()
        checks.refuse_unsafe_production()

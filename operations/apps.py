from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "operations"

    def ready(self):
        from django.contrib.auth.signals import user_logged_in

        from .sessions import start_session_clock

        # Every sign-in path (console, /admin/login/, test clients) starts the session clocks.
        user_logged_in.connect(start_session_clock, dispatch_uid="operations.session_clock")

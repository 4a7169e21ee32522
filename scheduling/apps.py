from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        from common.api.views import scope_gate_register
        from common.checks import data_check_register

        from .checks import demo_users_finding
        from .scoping import clinic_for_user

        scope_gate_register(clinic_for_user)
        data_check_register(demo_users_finding)

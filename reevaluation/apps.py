from django.apps import AppConfig


class ReevaluationConfig(AppConfig):
    name = "reevaluation"

    def ready(self) -> None:
        from common.outbox import register_handler
        from reevaluation.models import JOB_COMPLETED_TOPIC
        from reevaluation.notifications import deliver_job_completed, deliver_proposal_applied
        from reevaluation.proposals.models import PROPOSAL_APPLIED_TOPIC
        from reevaluation.roles import COMMAND_ROLES
        from scheduling.scoping import command_roles_register

        register_handler(JOB_COMPLETED_TOPIC, deliver_job_completed)
        register_handler(PROPOSAL_APPLIED_TOPIC, deliver_proposal_applied)
        command_roles_register(COMMAND_ROLES)

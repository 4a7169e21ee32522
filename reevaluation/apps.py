from django.apps import AppConfig


class ReevaluationConfig(AppConfig):
    name = "reevaluation"

    def ready(self) -> None:
        from common.outbox import register_handler
        from common.taskwiring import periodic_register, queue_register
        from reevaluation import tasks
        from reevaluation.models import JOB_COMPLETED_TOPIC
        from reevaluation.notifications import deliver_job_completed, deliver_proposal_applied
        from reevaluation.proposals.models import PROPOSAL_APPLIED_TOPIC
        from reevaluation.roles import COMMAND_ROLES
        from scheduling.scoping import command_roles_register

        register_handler(JOB_COMPLETED_TOPIC, deliver_job_completed)
        register_handler(PROPOSAL_APPLIED_TOPIC, deliver_proposal_applied)
        command_roles_register(COMMAND_ROLES)
        # CRM fetches and jobs under leases run on their own queue, apart from dispatch and delivery.
        queue_register("reevaluation", tasks.dispatch_round, tasks.run_job, tasks.rescue_leases,
                       tasks.wake_retries_task, tasks.expire_proposals)
        periodic_register("reevaluation-dispatch-round", tasks.dispatch_round, every=5.0)
        periodic_register("reevaluation-rescue-leases", tasks.rescue_leases, every=30.0)
        periodic_register("reevaluation-wake-retries", tasks.wake_retries_task, every=10.0)
        periodic_register("reevaluation-expire-proposals", tasks.expire_proposals, every=60.0)

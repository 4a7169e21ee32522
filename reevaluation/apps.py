from django.apps import AppConfig


class ReevaluationConfig(AppConfig):
    name = "reevaluation"

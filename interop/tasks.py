"""Thin Celery wrapper: the subscription fan-out round (bounded, safe to repeat or overlap)."""

from celery import shared_task

from .services.subscriptions import subscriptions_fanout


@shared_task(name="interop.tasks.fanout_subscriptions", ignore_result=True)
def fanout_subscriptions(limit: int = 500) -> int:
    return subscriptions_fanout(limit=limit)

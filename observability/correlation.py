"""Carry the correlation id from the HTTP request into Celery tasks (a message header) and back out.

HTTP: ``X-Correlation-ID`` in (if well formed) or a fresh id; echoed on the response.
Celery: ``before_task_publish`` stamps the current id on the message headers; the worker binds it
around the task (``task_prerun``/``task_postrun``), or a fresh id per run when none came (beat ticks).
"""

from __future__ import annotations

import contextvars

from celery.signals import before_task_publish, task_postrun, task_prerun

from common.correlation import clean, correlation_var, current_correlation_id, fresh_correlation_id

HEADER = "X-Correlation-ID"
#: The Celery message header (protocol 2 puts custom headers on ``task.request``; not "correlation_id",
#: which Celery already uses for the task id).
TASK_HEADER = "story_correlation_id"


class CorrelationIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        correlation_id = clean(request.headers.get(HEADER)) or fresh_correlation_id()
        token = correlation_var.set(correlation_id)
        try:
            response = self.get_response(request)
        finally:
            correlation_var.reset(token)
        response[HEADER] = correlation_id
        return response


def stamp_headers(headers=None, **_kwargs) -> None:
    correlation_id = current_correlation_id()
    if headers is not None and correlation_id and not headers.get(TASK_HEADER):
        headers[TASK_HEADER] = correlation_id


_tokens: dict[str, contextvars.Token[str]] = {}


def bind_task(task_id=None, task=None, **_kwargs) -> None:
    incoming = clean(getattr(task.request, TASK_HEADER, "") if task is not None else "")
    _tokens[task_id] = correlation_var.set(incoming or fresh_correlation_id())


def unbind_task(task_id=None, **_kwargs) -> None:
    token = _tokens.pop(task_id, None)
    if token is not None:
        correlation_var.reset(token)


def connect_celery_signals() -> None:
    before_task_publish.connect(stamp_headers, weak=False, dispatch_uid="observability.stamp")
    task_prerun.connect(bind_task, weak=False, dispatch_uid="observability.bind")
    task_postrun.connect(unbind_task, weak=False, dispatch_uid="observability.unbind")

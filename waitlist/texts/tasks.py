"""Beat's acknowledgement job: thin, the service decides (``services.acknowledgement.acknowledgements_run``)."""

from __future__ import annotations

from celery import shared_task

from waitlist.texts.services.acknowledgement import acknowledgements_run


@shared_task(name="waitlist.texts.tasks.acknowledgements", ignore_result=True)
def acknowledgements() -> dict:
    return acknowledgements_run()

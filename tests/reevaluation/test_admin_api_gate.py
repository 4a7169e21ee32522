"""Issue 13 part 5 on the redrive API: EXECUTE needs the operate grant and a young token; PREVIEW does not."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework.authtoken.models import Token

from reevaluation.models import ReevaluationJob
from scheduling.models import Role
from tests import factories as f
from tests.conftest import token_client
from tests.reevaluation.test_ops_api import failed_jobs, redrive


def _preview(client, world) -> str:
    response = redrive(client, world.clinic, "p1", action="PREVIEW", limit=1)
    assert response.status_code == 200
    return response.json()["preview"]


def test_an_admin_without_the_operate_grant_previews_but_cannot_execute(world):
    jobs = failed_jobs(world, 1)
    client = token_client(f.user_with_role(world.clinic, Role.ADMIN, operate=False))
    response = redrive(client, world.clinic, "e1", action="EXECUTE", preview=_preview(client, world))
    assert response.status_code == 403 and "operate" in response.json()["detail"]
    assert not ReevaluationJob.objects.filter(redrive_of=jobs[0]).exists()


def test_an_old_admin_token_cannot_execute(world, settings):
    settings.API_ADMIN_TOKEN_MAX_AGE_HOURS = 1
    jobs = failed_jobs(world, 1)
    admin = f.user_with_role(world.clinic, Role.ADMIN)
    client = token_client(admin)
    preview = _preview(client, world)
    Token.objects.filter(user=admin).update(created=timezone.now() - timedelta(hours=2))
    response = redrive(client, world.clinic, "e1", action="EXECUTE", preview=preview)
    assert response.status_code == 401 and response.json()["code"] == "TOKEN_EXPIRED"
    assert not ReevaluationJob.objects.filter(redrive_of=jobs[0]).exists()

"""The waitlist console page's fairness section: pass-overs and forgotten waiters by ref, no patient data."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from tests.conftest import assert_no_pii, seoul
from tests.waitlist.loop_helpers import open_vacancy
from tests.worlds import waitlist_world
from waitlist import services

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock", "no_broker")]


def test_page_shows_pass_overs_by_reason_and_the_forgotten_waiter_by_ref(client):
    world = waitlist_world()
    forgotten = world.waiting(waiting_since=seoul(1, 9) - timedelta(days=40))
    world.waiting(priority_rank=2)
    vacancy = open_vacancy(world)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"
    client.force_login(world.staff)
    html = client.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    assert 'data-passover="PRIORITY">1 ' in html
    assert f'data-entry="{forgotten.ref}"' in html and forgotten.patient.ref in html
    assert_no_pii(html, list(world.clinic.patients.all()))


def test_page_says_when_the_fairness_figures_were_computed(client):
    world = waitlist_world()
    client.force_login(world.staff)
    html = client.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    assert 'data-testid="fairness-as-of">As of <time datetime="2030-12-01T09:00:00+09:00">' in html


def test_page_shows_the_shadow_policy_agreement_and_its_differences(client):
    from scheduling.models import Role
    from tests import factories as f

    world = waitlist_world()
    admin = f.user_with_role(world.clinic, Role.ADMIN, username="page-shadow-admin")
    services.shadow_publish(clinic=world.clinic, actor=admin, reason="observe", changes={"weekly_offer_cap": 0})
    world.waiting()
    vacancy = open_vacancy(world)
    assert services.vacancy_dispatch(clinic=world.clinic, vacancy_ref=vacancy.ref).outcome == "OFFERED"
    client.force_login(world.staff)
    html = client.get(reverse("console:waitlist", kwargs={"clinic_ref": world.clinic.ref})).content.decode()
    assert 'data-metric="shadow_agreement">0.0%' in html
    assert 'data-shadow-reason="SHADOW_NO_CANDIDATE">1<' in html

"""The reusable "reason + confirm" form and partial that every ADMIN action renders."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django.test import RequestFactory

from operations.forms import ReasonConfirmForm

TEMPLATE = "operations/partials/reason_confirm.html#reason-confirm"


def test_reason_confirmation_and_key_are_required():
    form = ReasonConfirmForm(data={"reason": "no", "idempotency_key": "has space"})
    assert not form.is_valid()
    assert set(form.errors) == {"reason", "confirm", "idempotency_key"}
    ok = ReasonConfirmForm(data={"reason": "CRM outage fixed", "confirm": "on", "idempotency_key": "k-1"})
    assert ok.is_valid()
    assert ok.cleaned_data == {"reason": "CRM outage fixed", "confirm": True, "idempotency_key": "k-1"}


def test_each_rendered_form_mints_a_fresh_idempotency_key():
    first, second = ReasonConfirmForm(), ReasonConfirmForm()
    assert first["idempotency_key"].value() != second["idempotency_key"].value()


def test_actor_is_not_a_form_field():
    assert "actor" not in ReasonConfirmForm.base_fields


@pytest.mark.django_db
def test_partial_renders_a_csrf_protected_htmx_form():
    request = RequestFactory().get("/")
    form = ReasonConfirmForm()
    html = render_to_string(
        TEMPLATE,
        {
            "form": form,
            "action_url": "/console/c/cl_x/thing/",
            "title": "Redrive 3 jobs",
            "submit_label": "Redrive",
        },
        request=request,
    )
    assert 'hx-post="/console/c/cl_x/thing/"' in html and 'method="post"' in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert f'value="{form["idempotency_key"].value()}"' in html and 'type="hidden"' in html
    assert 'name="reason"' in html and 'name="confirm"' in html
    assert "Redrive 3 jobs" in html and ">Redrive</button>" in html
    assert " style=" not in html and "<script" not in html  # CSP-clean


@pytest.mark.django_db
def test_partial_shows_field_errors():
    request = RequestFactory().post("/")
    form = ReasonConfirmForm(data={"reason": "", "idempotency_key": "k"})
    form.is_valid()
    html = render_to_string(TEMPLATE, {"form": form, "action_url": "/x/", "title": "T"}, request=request)
    assert html.count('class="field-error"') == 2

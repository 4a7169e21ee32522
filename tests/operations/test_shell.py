"""Console shell: sign-in with a throttle, sign-out, the index redirect, clinic home and its switcher."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from scheduling.models import Role
from tests import factories as f

PASSWORD = "pw-for-tests-1"  # tests.factories.UserFactory's password
pytestmark = pytest.mark.django_db


def login_post(client: Client, username: str, password: str, **extra):
    return client.post(reverse("console:login"), {"username": username, "password": password}, **extra)


def without_csrf(html: str) -> str:
    return re.sub(r'(csrfmiddlewaretoken" value="|X-CSRFToken": ")[^"]+', r"\1", html)


# --- sign-in and sign-out ---


def test_login_page_renders_for_anonymous(client):
    response = client.get(reverse("console:login"))
    assert response.status_code == 200
    assert b'name="password"' in response.content


def test_login_with_valid_credentials_lands_on_the_first_clinic(client, staff, clinic):
    response = login_post(client, "staff-user", PASSWORD)
    assert response.status_code == 302
    assert response.url == reverse("console:index")
    response = client.get(response.url)
    assert response.url == reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref})


def test_login_follows_a_local_next_but_not_a_foreign_one(client, staff, clinic):
    audit = reverse("console:audit", kwargs={"clinic_ref": clinic.ref})
    response = client.post(
        reverse("console:login"), {"username": "staff-user", "password": PASSWORD, "next": audit}
    )
    assert response.url == audit
    client.post(reverse("console:logout"))
    response = client.post(
        reverse("console:login"),
        {"username": "staff-user", "password": PASSWORD, "next": "https://evil.example/phish"},
    )
    assert response.url == reverse("console:index")


def test_wrong_password_rerenders_the_form_without_signing_in(client, staff):
    response = login_post(client, "staff-user", "nope")
    assert response.status_code == 200
    assert b"enter a correct username and password" in response.content
    assert "_auth_user_id" not in client.session


def test_five_failures_throttle_the_sixth_attempt_even_with_the_right_password(client, staff):
    for _ in range(5):
        assert login_post(client, "staff-user", "wrong").status_code == 200
    response = login_post(client, "staff-user", PASSWORD)
    assert response.status_code == 429
    assert b"Too many failed sign-in attempts" in response.content
    assert "_auth_user_id" not in client.session


def test_throttle_is_per_username_from_any_address(client, staff):
    other = f.UserFactory(username="other-user")
    for _ in range(5):
        login_post(client, "Staff-User ", "wrong")  # case and spaces do not dodge the counter
    assert login_post(client, "staff-user", PASSWORD).status_code == 429
    # Another user from the same address is unaffected; the same user from another address is not
    # (spreading guesses for one account over many addresses does not help).
    assert login_post(Client(), other.username, PASSWORD).status_code == 302
    assert login_post(Client(), "staff-user", PASSWORD, REMOTE_ADDR="10.9.8.7").status_code == 429


def test_a_successful_sign_in_resets_the_failure_count(client, staff):
    for _ in range(4):
        login_post(client, "staff-user", "wrong")
    assert login_post(client, "staff-user", PASSWORD).status_code == 302
    fresh = Client()
    for _ in range(4):
        assert login_post(fresh, "staff-user", "wrong").status_code == 200
    assert login_post(fresh, "staff-user", PASSWORD).status_code == 302


def test_logout_needs_post(staff_web):
    assert staff_web.get(reverse("console:logout")).status_code == 405
    assert "_auth_user_id" in staff_web.session
    response = staff_web.post(reverse("console:logout"))
    assert response.url == reverse("console:login")
    assert "_auth_user_id" not in staff_web.session


def test_logout_without_csrf_token_is_refused(staff):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    assert client.post(reverse("console:logout")).status_code == 403
    assert "_auth_user_id" in client.session


# --- index and clinic home ---


def test_index_sends_anonymous_to_sign_in(client):
    response = client.get(reverse("console:index"))
    assert response.status_code == 302
    assert response.url.startswith(reverse("console:login"))


def test_index_without_clinics_says_so(db):
    client = Client()
    client.force_login(f.UserFactory())
    response = client.get(reverse("console:index"))
    assert response.status_code == 200
    assert b"No clinics" in response.content


def test_clinic_home_shows_the_clinic_and_nav_slots(staff_web, clinic):
    response = staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref}))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Gangnam Clinic" in html and clinic.ref in html
    assert reverse("console:audit", kwargs={"clinic_ref": clinic.ref}) in html
    # The waitlist and reevaluation pages are routed: their slots are links, none is "soon".
    assert reverse("console:waitlist", kwargs={"clinic_ref": clinic.ref}) in html
    assert reverse("console:reevaluation", kwargs={"clinic_ref": clinic.ref}) in html
    assert 'class="soon"' not in html


def test_an_unrouted_slot_renders_disabled(staff_web, clinic, monkeypatch):
    from operations import nav

    monkeypatch.setattr(nav, "CLINIC_NAV", (*nav.CLINIC_NAV, nav.NavSlot("later", "Later", "console:later")))
    html = staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref})).content.decode()
    assert re.search(r'<span class="soon"[^>]*>Later</span>', html)


def test_switcher_lists_only_the_users_clinics(staff_web, clinic, second_clinic, other_tenant_clinic):
    f.ClinicFactory(name="Same Tenant Not Mine", tenant_group=clinic.tenant_group)
    response = staff_web.get(reverse("console:audit", kwargs={"clinic_ref": clinic.ref}))
    html = response.content.decode()
    switcher = html.split('data-testid="clinic-switcher"', 1)[1].split("</details>", 1)[0]
    assert re.findall(r'data-clinic-ref="([^"]+)"', switcher) == sorted(
        [clinic.ref, second_clinic.ref], key={clinic.ref: "Gangnam", second_clinic.ref: "Bundang"}.get
    )
    # The switcher keeps the section: it links to the other clinic's audit log.
    assert reverse("console:audit", kwargs={"clinic_ref": second_clinic.ref}) in switcher
    assert "Same Tenant Not Mine" not in html and "Elsewhere Clinic" not in html


def test_another_tenants_clinic_is_the_same_404_as_a_missing_one(staff_web, other_tenant_clinic):
    foreign = staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": other_tenant_clinic.ref}))
    missing = staff_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": "cl_doesnotexist"}))
    assert foreign.status_code == missing.status_code == 404
    assert without_csrf(foreign.content.decode()) == without_csrf(missing.content.decode())
    assert b"Elsewhere Clinic" not in foreign.content


def test_clinic_pages_send_anonymous_to_sign_in_with_next(client, clinic):
    url = reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref})
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith(reverse("console:login")) and "next=" in response.url


def test_clinic_pages_answer_htmx_anonymous_with_a_client_redirect(client, clinic):
    url = reverse("console:audit", kwargs={"clinic_ref": clinic.ref})
    response = client.get(url, HTTP_HX_REQUEST="true")
    assert response.headers["HX-Redirect"].startswith(reverse("console:login"))


def test_admin_sees_their_role(admin_web, clinic):
    response = admin_web.get(reverse("console:clinic-home", kwargs={"clinic_ref": clinic.ref}))
    assert response.status_code == 200
    assert f"admin-user · {Role.ADMIN}" in response.content.decode()

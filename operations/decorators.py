"""The one entry point for clinic-scoped console views."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django_htmx.http import HttpResponseClientRedirect

from common.errors import NotFound, PermissionDenied
from scheduling.models import Clinic, Role
from scheduling.scoping import clinic_for_user, command_role

from .reauth import authenticated_recently, reauth_redirect
from .responses import console_error

ClinicView = Callable[..., HttpResponse]


def clinic_view(role: Role = Role.STAFF, *, methods: Iterable[str] = ("GET", "HEAD"), command: str | None = None):
    """Decorate ``view(request, clinic, **kwargs)`` routed with a ``<str:clinic_ref>`` URL argument.

    ``command``: the view runs that command (``scheduling.scoping.COMMAND_ROLES``), which sets its role;
    ``console_command`` names it, so a test can hold every console write to the registry.

    In order: a method outside ``methods`` → 405; anonymous → the sign-in page (htmx: a client
    redirect); the clinic is resolved through ``scheduling.scoping.clinic_for_user`` — unknown or
    out-of-scope ref → the 404 page, in scope but below ``role`` → the 403 page. An ADMIN view
    that changes things (``role=ADMIN`` and no safe method) is an ADMIN command: it also needs the
    operate grant (403 without) and a recent sign-in (``operations.reauth``: else the re-enter
    password page). The view runs only after all of these pass, so a refused request changes
    nothing. The resolved clinic carries ``user_role`` for templates (e.g. to hide ADMIN buttons).
    """
    if command is not None:
        role = command_role(command)  # a KeyError for an unregistered command: fail closed at import
    allowed = tuple(m.upper() for m in methods)
    operates = role == Role.ADMIN and not set(allowed) <= {"GET", "HEAD", "OPTIONS"}

    def decorator(view: ClinicView) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, clinic_ref: str, *args, **kwargs) -> HttpResponse:
            if request.method not in allowed:
                return HttpResponseNotAllowed(allowed)
            if not request.user.is_authenticated:
                if getattr(request, "htmx", False):
                    return HttpResponseClientRedirect(redirect_to_login(request.get_full_path()).url)
                return redirect_to_login(request.get_full_path())
            try:
                clinic: Clinic = clinic_for_user(request.user, clinic_ref, role=role, operate=operates)
            except NotFound:
                return console_error(request, 404)
            except PermissionDenied as exc:
                return console_error(request, 403, exc.detail)
            if operates and not authenticated_recently(request):
                return reauth_redirect(request, clinic)
            return view(request, clinic, *args, **kwargs)

        wrapper.console_role = role  # type: ignore[attr-defined]
        wrapper.console_methods = allowed  # type: ignore[attr-defined]
        wrapper.console_command = command  # type: ignore[attr-defined]
        return wrapper

    return decorator

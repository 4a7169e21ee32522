"""A two-clinic world and the route enumeration shared by the hostile-input and the scope-leak tests.

``World.build()`` makes two clinics of two tenants with the same kinds of rows (patient, appointment,
waitlist entry, vacancy, offer, hold, shadow policy, reevaluation job), an ADMIN of each (API token
and console session), so a route can be called with a ref of its own clinic, of the other clinic, or
a hostile value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from django.test import Client
from rest_framework.authtoken.models import Token

#: Every HTTP method Django's test client can send (CONNECT cannot reach a WSGI app).
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")

#: Strings PostgreSQL cannot store, absurd sizes, and the edges of the calendar (query strings, forms).
HOSTILE_STRINGS: tuple = (
    "\ud800",
    "a\x00b",
    "x" * 20_000,
    "9999-12-31",
    "0001-01-01",
    "9999-12-31T23:59:59-01:00",
    "0001-01-01T00:00:00+01:00",
    "1e309",
)
#: ...and, in JSON bodies, absurd numbers and shapes too.
HOSTILE_VALUES: tuple = (*HOSTILE_STRINGS, 10**30, [[[[[[[[[[[]]]]]]]]]]], {"a": {"b": ["c"]}}, None)

#: Dates and times at the edges of what Python and PostgreSQL can hold.
CALENDAR_EDGES: tuple = ("9999-12-31", "0001-01-01", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00")

#: Path parameter values: NUL, a percent-encoded surrogate (invalid UTF-8), huge, dots and slashes.
HOSTILE_PATH_VALUES: tuple = ("a\x00b", "%ED%A0%80", "x" * 5_000, "..", "9999-12-31", "\u202e")

#: Query parameter names every route is tried with (the schema's plus the console's filters).
BASE_QUERY_NAMES = (
    "date", "start", "end", "after", "status", "clinic", "q", "limit", "kind", "date_from", "date_to",
    "actor", "action", "_count", "lang", "next", "since", "state", "priority_class", "page_size",
    "practitioner", "treatment", "schedule", "ref", "cursor", "format",
)

#: Console form fields (the schema does not describe the console).
CONSOLE_FIELDS = (
    "reason", "confirm", "idempotency_key", "action", "failure_classes", "include_non_transient", "mode",
    "drain", "enabled", "allowed", "changes", "weekly_offer_cap", "username", "password", "next",
    "entry_ref", "refs", "expected_version", "preview_ref", "lang",
)


@cache
def _schema() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def _schema_path(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


@cache
def _schema_names(route: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(body property names, query parameter names) of every operation the schema has for ``route``."""
    operations = _schema().get("paths", {}).get(_schema_path(route), {})
    body, query = set(), set()
    components = _schema().get("components", {}).get("schemas", {})
    for operation in operations.values():
        if not isinstance(operation, dict):
            continue
        for parameter in operation.get("parameters", []):
            if parameter.get("in") == "query":
                query.add(parameter["name"])
        content = (operation.get("requestBody") or {}).get("content", {})
        for media in content.values():
            schema = media.get("schema", {})
            if "$ref" in schema:
                schema = components.get(schema["$ref"].rsplit("/", 1)[-1], {})
            body.update((schema.get("properties") or {}).keys())
    return tuple(sorted(body)), tuple(sorted(query))


@cache
def schema_methods(route: str) -> tuple[str, ...]:
    """The body-carrying methods the schema documents for ``route``."""
    operations = _schema().get("paths", {}).get(_schema_path(route), {})
    return tuple(m.upper() for m in operations if m in ("post", "put", "patch"))


def body_names(route: str) -> tuple[str, ...]:
    names = _schema_names(route)[0]
    return names if route.startswith("api/") else CONSOLE_FIELDS


def query_names(route: str) -> tuple[str, ...]:
    return tuple(sorted(set(BASE_QUERY_NAMES) | set(_schema_names(route)[1])))


QUERY_NAMES = BASE_QUERY_NAMES


def _walk(patterns, prefix=""):
    from django.urls import URLPattern, URLResolver

    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern)


def all_routes() -> list[str]:
    """Every URL pattern of the project (the Django admin's own pages only by its index)."""
    from django.urls import get_resolver

    return sorted({r for r in _walk(get_resolver().url_patterns) if not r.startswith("admin/") or r == "admin/"})


@dataclass
class Clinic:
    clinic: object
    admin: object
    token: str
    refs: dict[str, str] = field(default_factory=dict)

    def markers(self) -> list[str]:
        """Strings that identify this clinic's rows on any page or in any body: refs and names (patients',
        practitioners', treatments' and resources': each made unique by ``_clinic_rows``)."""
        from scheduling.models import Patient, Practitioner, Resource, Treatment

        refs = [v for k, v in self.refs.items() if k not in ("kind", "assessment") and not k.endswith("_token")]
        names = list(Patient.objects.filter(clinic=self.clinic).values_list("display_name", flat=True))
        for model in (Practitioner, Treatment, Resource):
            rows = model.objects.filter(clinic=self.clinic).values_list("ref", "name")  # type: ignore[attr-defined]
            refs += [ref for ref, _name in rows]
            names += [name for _ref, name in rows]
        return [*refs, *(r.replace("_", ".") for r in refs if "_" in r), self.clinic.name, *names]


@dataclass
class World:
    own: Clinic
    other: Clinic
    _clients: dict = field(default_factory=dict)

    @classmethod
    def build(cls) -> World:
        return cls(own=_clinic_rows(), other=_clinic_rows())

    def token_client(self, side: str = "own") -> Client:
        if ("token", side) not in self._clients:
            who = getattr(self, side)
            self._clients["token", side] = Client(
                raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {who.token}"
            )
        return self._clients["token", side]

    def session_client(self, side: str = "own") -> Client:
        if ("session", side) not in self._clients:
            self._clients["session", side] = self._session_client(side)
        return self._clients["session", side]

    def _session_client(self, side: str) -> Client:
        from operations.sessions import AUTH_AT, LAST_SEEN, now_ts

        client = Client(raise_request_exception=False)
        client.force_login(getattr(self, side).admin)
        session = client.session
        session[AUTH_AT] = session[LAST_SEEN] = now_ts()  # signed in just now: ADMIN commands need no re-auth
        session.save()
        return client

    def clients(self, route: str) -> list[tuple[Client, bool]]:
        """Who calls ``route`` (client, anonymous?): the API with a token and without; pages signed in and not."""
        signed_in = self.token_client() if route.startswith("api/v1/") else self.session_client()
        return [(signed_in, False), (Client(raise_request_exception=False), True)]

    def anonymous(self) -> Client:
        return Client()

    def headers(self, route: str) -> dict:
        extra = {"HTTP_IDEMPOTENCY_KEY": "hostile-key-1"}
        if route == "metrics":
            extra["HTTP_AUTHORIZATION"] = "Bearer demo-metrics-token"
        return extra


_REF_KIND = {
    "appointments": "appointment", "waitlist-entries": "entry", "vacancies": "vacancy", "offers": "offer",
    "holds": "hold", "shadow-policy": "shadow", "patients": "patient", "fhir/Slot": "slot",
    "fhir/Appointment": "appointment", "jobs": "job", "ref": "appointment",
}
_PARAM_KIND = {
    "vacancy_ref": "vacancy", "offer_ref": "offer", "hold_ref": "hold", "shadow_ref": "shadow", "job_ref": "job",
    "kind": "kind", "token": "claim_token", "assessment_ref": "assessment",
}


def param_kind(route: str, name: str, previous: str) -> str:
    if name in ("clinic", "clinic_ref"):
        return "clinic"
    if name in _PARAM_KIND:
        if name == "token":
            return {"optout/": "optout_token", "standing/": "standing_token"}.get(route[: route.find("/") + 1],
                                                                            "calendar_token" if ".ics" in route
                                                                            else "claim_token")
        return _PARAM_KIND[name]
    return _REF_KIND.get(previous, "appointment")


_PARAM = re.compile(r"<(?:\w+:)?(\w+)>")


def fill(route: str, values: dict[str, str]) -> str:
    """``route`` with each parameter replaced by ``values[kind]`` (its kind from the segment before it)."""
    out, last, previous = [], 0, ""
    for match in _PARAM.finditer(route):
        before = route[last:match.start()]
        out.append(before)
        segments = [s for s in (route[:match.start()]).split("/") if s and "<" not in s]
        previous = "/".join(segments[-2:]) if len(segments) >= 2 and segments[-2] == "fhir" else (
            segments[-1] if segments else "")
        out.append(values[param_kind(route, match.group(1), previous)])
        last = match.end()
    out.append(route[last:])
    return "/" + "".join(out)


def route_paths(route: str, world: World, *, hostile: bool = True) -> list[str]:
    """The route with its own clinic's refs, and (``hostile``) with each hostile value in each parameter."""
    from urllib.parse import quote

    own = world.own.refs
    paths = [fill(route, own)]
    names = _PARAM.findall(route)
    if hostile:
        for value in HOSTILE_PATH_VALUES:
            encoded = value if value.startswith("%") else quote(value, safe="")
            for name in names:
                values = dict(own)
                values[param_kind(route, name, "")] = encoded  # the clinic or the row: each in turn
                if name not in ("clinic", "clinic_ref"):
                    values = {k: (encoded if k != "clinic" else v) for k, v in own.items()}
                paths.append(fill(route, values))
    return list(dict.fromkeys(paths))


def _clinic_rows() -> Clinic:
    """One clinic with one row of every kind a route can name, and its ADMIN."""
    import uuid
    from datetime import timedelta

    from django.utils import timezone

    from scheduling.models import CapacityHold, Role
    from tests import factories as f
    from tests.conftest import seoul
    from tests.reevaluation import factories as rf
    from tests.waitlist.loop_helpers import make_offer
    from tests.worlds import waitlist_world
    from waitlist import services
    from waitlist.offers.tokens import calendar_token_make, claim_link, optout_token_make, standing_token_make

    world = waitlist_world(name=f"Clinic {uuid.uuid4().hex[:10]}")  # a name no other page can contain by chance
    resource = f.ResourceFactory(clinic=world.clinic)
    for row in (world.doctor, world.other_doctor, world.treatment, world.other_treatment, resource):
        type(row).objects.filter(pk=row.pk).update(name=f"{row.name} {uuid.uuid4().hex[:10]}")
    admin = f.user_with_role(world.clinic, Role.ADMIN)
    token = Token.objects.create(user=admin).key
    offer = make_offer(world, world.patient(), starts_at=seoul(3, 10))
    claimed = make_offer(world, world.patient(), starts_at=seoul(3, 11))
    services.offer_claim_and_book(offer=claimed)
    hold = CapacityHold.objects.filter(clinic=world.clinic).first()
    shadow = services.shadow_publish(clinic=world.clinic, actor=admin, reason="observe a cap",
                                     changes={"weekly_offer_cap": 1})
    job, finished = rf.bulk_jobs(world.clinic, 2, created_at=timezone.now() - timedelta(minutes=1))
    type(finished).objects.filter(pk=finished.pk).update(state="COMPLETED", finished_at=timezone.now())
    appointment = world.confirmed(seoul(4, 9))
    link = claim_link(offer)
    return Clinic(
        clinic=world.clinic,
        admin=admin,
        token=token,
        refs={
            "clinic": world.clinic.ref,
            "practitioner": world.doctor.ref,
            "treatment": world.treatment.ref,
            "resource": resource.ref,
            "appointment": appointment.ref,
            "entry": offer.entry.ref,
            "vacancy": offer.vacancy.ref,
            "offer": offer.ref,
            "hold": hold.ref if hold else "hld_missing",
            "shadow": shadow.ref,
            "patient": offer.patient.ref,
            "slot": appointment.ref.replace("_", "."),  # FHIR ids: the booked appointment is a busy Slot
            "job": job.ref,
            "finished_job": finished.ref,
            "kind": "vacancies",
            "claim_token": re.search(r"/claim/([^/\s]+)/", link).group(1),
            "optout_token": optout_token_make(offer.patient),
            "standing_token": standing_token_make(offer.entry),
            "calendar_token": calendar_token_make(appointment),
            "assessment": "asm-1",
        },
    )

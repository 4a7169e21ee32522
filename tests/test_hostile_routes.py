"""Issue 26 part 2: every URL pattern, every HTTP method, hostile values in the path, the query string
and the body: never a 5xx.

The routes are enumerated from the URL configuration (API, console, claim, opt-out, FHIR, health,
metrics, the CRM stub), so a new route is covered the day it is added. Path parameters get a real ref
of the right kind (so requests get past the lookup into validation) and hostile values; query and
body fields are the schema's (drf-spectacular) plus the console's form fields. One test, one world
(two clinics), about ten thousand requests: a few seconds per hundred routes.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from tests.support.hostile import (
    CALENDAR_EDGES,
    HOSTILE_STRINGS,
    HOSTILE_VALUES,
    METHODS,
    World,
    all_routes,
    body_names,
    query_names,
    route_paths,
    schema_methods,
)

#: Routes whose documented answer may be a 5xx: readiness is 503 while a dependency is not ready.
DOCUMENTED_5XX = {"readyz": {503}}


def q(value: str) -> str:
    """Percent-encoded as a client would send it (a lone surrogate as its WTF-8 bytes)."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


@pytest.fixture
def hostile_world(db, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": "1000000/min", "user": "1000000/min"},
    }
    settings.PATIENT_PAGE_THROTTLE_RATES = {}
    settings.CONSOLE_LOGIN_MAX_FAILURES = settings.CONSOLE_LOGIN_MAX_FAILURES_PER_ADDRESS = 10**9
    return World.build()


def requests_for(route: str, world: World, *, anonymous: bool = False):
    """(method, path, body, extra) for one route: every method, hostile paths, queries and bodies
    (an anonymous caller, stopped at the sign-in or the token check, gets the methods and paths only)."""
    headers = world.headers(route)
    json_body = {"content_type": "application/json", **headers}
    form_body = {"content_type": "application/x-www-form-urlencoded", **headers}
    names = body_names(route) or ("x",)
    paths = route_paths(route, world)
    valid, hostile_paths = paths[0], paths[1:]
    surrogates = json.dumps(dict.fromkeys(names, "\ud800"))
    for method in METHODS:
        yield method, valid, surrogates, json_body
    if anonymous:
        return
    for path in hostile_paths:
        yield "GET", path, "", headers
        yield "POST", path, surrogates, json_body
    queries = query_names(route)
    api = route.startswith("api/")
    for value in HOSTILE_STRINGS:
        yield "GET", valid + "?" + "&".join(f"{n}={q(value)}" for n in queries), "", headers
        if not api:
            yield "POST", valid, "&".join(f"{n}={q(value)}" for n in names), form_body
    for value in HOSTILE_VALUES:
        yield "POST", valid, json.dumps(dict.fromkeys(names, value)), json_body
    for value in ("a\x00b", "%ED%A0%80"):
        yield "GET", f"{valid}?{q(value)}=1", "", headers
    for raw in ("[" * 50_000 + "]" * 50_000, '{"\\udfff": 1}', '{"a": "\\u0000"}', "\x00", "{"):
        yield "POST", valid, raw, json_body
    for method in schema_methods(route) if api else ():
        for name in names:  # a calendar edge in one field at a time (the others absent or defaulted)
            for value in CALENDAR_EDGES[::2]:  # 9999-12-31 and its instant with an offset past the year
                yield method, valid, json.dumps({name: value}), json_body


def test_the_enumeration_covers_every_area():
    routes = all_routes()
    prefixes = ("api/v1/clinics/<str:clinic>/", "console/c/", "claim/", "optout/", "healthz", "readyz", "metrics")
    assert all(any(r.startswith(p) for r in routes) for p in prefixes)
    assert any("/fhir/" in r for r in routes)


def test_no_route_answers_any_method_or_hostile_value_with_a_5xx(hostile_world):
    world, errors, sent = hostile_world, [], 0
    for route in all_routes():
        allowed = DOCUMENTED_5XX.get(route, set())
        for client, anonymous in world.clients(route):
            for method, path, body, extra in requests_for(route, world, anonymous=anonymous):
                extra = dict(extra)
                response = client.generic(method, path, body, content_type=extra.pop("content_type", ""), **extra)
                sent += 1
                if response.status_code >= 500 and response.status_code not in allowed:
                    exc = getattr(response, "exc_info", None)
                    cause = f"{exc[0].__name__}: {str(exc[1])[:80]}" if exc else ""
                    errors.append(f"{method} {path[:120]} body={body[:60]!r} -> {response.status_code} {cause}")
    assert sent > 4_000
    assert not errors, f"{len(errors)} of {sent}:\n" + "\n".join(errors[:60])

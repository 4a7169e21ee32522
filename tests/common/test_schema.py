"""The OpenAPI schema (common/schema.py): grouped by app, the Idempotency-Key on every (I) command, typed
errors and success bodies, and a schema that validates without warnings."""

from __future__ import annotations

import inspect

import pytest
from django.urls import resolve
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

from common.schema import APP_TAGS, OPERATION_ERRORS, SUCCESS_BODIES

ERROR_REF = "#/components/schemas/Error"
METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture(scope="module")
def schema():
    GENERATOR_STATS.reset()
    generated = SchemaGenerator().get_schema(request=None, public=True)
    generated["warnings"] = list(GENERATOR_STATS._warn_cache)
    generated["errors"] = list(GENERATOR_STATS._error_cache)
    return generated


def operations(schema, *, api_only=False):
    for path, item in schema["paths"].items():
        if api_only and not path.startswith("/api/"):
            continue
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def view_handler(path: str, method: str):
    """The view class and handler behind a schema path (path parameters filled with a dummy ref)."""
    concrete = path.replace("{clinic}", "c").replace("{ref}", "r").replace("{resource_id}", "x")
    view_class = resolve(concrete).func.view_class
    return view_class, getattr(view_class, method)


def test_schema_validates_without_warnings_or_errors(schema):
    warnings, errors = schema.pop("warnings"), schema.pop("errors")
    validate_schema(schema)
    assert (warnings, errors) == ([], [])


def test_every_operation_is_tagged_with_its_app(schema):
    known = {tag["name"] for tag in schema["tags"]}
    assert known == set(APP_TAGS.values())
    for path, method, operation in operations(schema):
        assert operation.get("tags") and set(operation["tags"]) <= known, (method, path)


def test_ops_paths_are_grouped_under_operations_too(schema):
    ops = [op for path, _m, op in operations(schema) if path.startswith("/api/v1/ops/")]
    assert ops and all("operations" in op["tags"] for op in ops)


def test_every_command_that_runs_under_a_key_documents_the_header(schema):
    """Cross-checked against the code: a POST handler that runs ``command``/``idempotent_response``."""
    for path, method, operation in operations(schema, api_only=True):
        if method != "post":
            continue
        _view, handler = view_handler(path, method)
        source = inspect.getsource(handler)
        idempotent = "command(" in source or "idempotent_response(" in source
        headers = {p["name"] for p in operation.get("parameters", []) if p["in"] == "header"}
        assert ("Idempotency-Key" in headers) == idempotent, path
        if idempotent:
            assert "422" in operation["responses"], path


def test_idempotency_header_explains_replay(schema):
    claim = schema["paths"]["/api/v1/clinics/{clinic}/offers/{ref}/claim"]["post"]
    header = next(p for p in claim["parameters"] if p["name"] == "Idempotency-Key")
    assert header["in"] == "header" and not header.get("required", False)
    assert "replay" in header["description"] and "IDEMPOTENCY_KEY_REUSED" in header["description"]
    assert "Idempotent-Replayed" in claim["responses"]["200"]["headers"]


def test_every_refusal_uses_the_error_component_with_an_example_per_code(schema):
    for path, method, operation in operations(schema, api_only=True):
        refusals = {status: r for status, r in operation["responses"].items() if status >= "400"}
        assert "429" in refusals, (method, path)
        for status, response in refusals.items():
            content = response["content"]["application/json"]
            assert content["schema"] == {"$ref": ERROR_REF}, (method, path, status)
            codes = [example["value"]["code"] for example in content["examples"].values()]
            assert codes and all(f"`{code}`" in response["description"] for code in codes)


def test_error_component_is_the_documented_body(schema):
    error = schema["components"]["schemas"]["Error"]
    assert set(error["properties"]) == {"code", "detail", "fields"}
    assert error["required"] == ["code", "detail"]


def codes(operation, status: str) -> set[str]:
    examples = operation["responses"][status]["content"]["application/json"]["examples"]
    return {example["value"]["code"] for example in examples.values()}


def test_authenticated_scoped_operations_answer_401_403_404(schema):
    for path, _method, operation in operations(schema, api_only=True):
        if "{clinic}" in path and not path.startswith("/api/v1/public/"):  # the join contract: no sign-in
            assert "NOT_AUTHENTICATED" in codes(operation, "401"), path
            assert codes(operation, "404") == {"NOT_FOUND"}, path
            assert "PERMISSION_DENIED" in codes(operation, "403"), path


def test_writes_and_filtered_reads_answer_validation_error(schema):
    appointments = schema["paths"]["/api/v1/clinics/{clinic}/appointments/"]
    assert "VALIDATION_ERROR" in codes(appointments["post"], "400")
    assert "VALIDATION_ERROR" in codes(appointments["get"], "400")
    assert "400" not in schema["paths"]["/api/v1/clinics/{clinic}/appointments/{ref}"]["get"]["responses"]


def test_commands_list_their_conflict_codes(schema):
    claim = schema["paths"]["/api/v1/clinics/{clinic}/offers/{ref}/claim"]["post"]
    assert {"OFFER_EXPIRED", "VERSION_CONFLICT", "SLOT_OCCUPIED", "DECISION_STALE",
            "OFFER_NOT_CLAIMABLE"} <= codes(claim, "409")
    close = schema["paths"]["/api/v1/clinics/{clinic}/vacancies/{ref}/close"]["post"]
    assert codes(close, "401") == {"NOT_AUTHENTICATED", "TOKEN_EXPIRED"}
    intake = schema["paths"]["/api/v1/events/patient-scheduling-assessment-changed"]["post"]
    assert codes(intake, "401") == {"SIGNATURE_INVALID"}
    assert {"SCOPE_INVALID", "PRIVACY_BOUNDARY"} <= codes(intake, "422")


def test_registries_name_only_views_in_the_schema(schema):
    keys = set()
    for path, method, _operation in operations(schema, api_only=True):
        view_class, _handler = view_handler(path, method)
        keys.add(f"{view_class.__name__}.{method}")
    assert set(OPERATION_ERRORS) <= keys
    assert set(SUCCESS_BODIES) <= keys


@pytest.mark.parametrize(("path", "method", "status", "component", "fields"), [
    ("/api/v1/clinics/{clinic}/offers/{ref}/claim", "post", "200", "ClaimReceipt", {"hold", "appointment"}),
    ("/api/v1/clinics/{clinic}/appointments/{ref}/cancel", "post", "200", "AppointmentCancelled", {"vacancy"}),
    ("/api/v1/clinics/{clinic}/holds/{ref}/book", "post", "201", "Booked", {"appointment"}),
    ("/api/v1/clinics/{clinic}/booking-decisions/", "post", "201", "DecisionRecorded", {"decision_ref"}),
    ("/api/v1/clinics/{clinic}/waitlist-entries/", "post", "201", "WaitlistEntry", {"waiting_since"}),
    ("/api/v1/ops/profile-reevaluation", "post", "200", "RedriveAnswer", {"preview", "redriven"}),
])
def test_main_commands_have_typed_success_bodies(schema, path, method, status, component, fields):
    content = schema["paths"][path][method]["responses"][status]["content"]["application/json"]
    assert content["schema"] == {"$ref": f"#/components/schemas/{component}"}
    assert fields <= set(schema["components"]["schemas"][component]["properties"])


def test_probes_are_documented_under_observability(schema):
    assert {"/healthz", "/metrics"} <= set(schema["paths"])
    assert schema["paths"]["/metrics"]["get"]["tags"] == ["observability"]


# --- the schema endpoint (common/schema_view.py) ---


@pytest.fixture
def fresh_schema_view(monkeypatch):
    """The endpoint with nothing generated yet in this process, and a count of its generations."""
    from common.schema_view import SchemaView

    monkeypatch.setattr(SchemaView, "generated", {})
    calls = []
    original = SchemaGenerator.get_schema

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SchemaGenerator, "get_schema", counting)
    return calls


@pytest.mark.django_db(transaction=True)
def test_the_schema_endpoint_generates_once_however_many_ask_at_once(fresh_schema_view, live_server):
    """Four requests at once on a threaded server: one generation, four identical 200 answers."""
    import urllib.request

    from tests.conftest import race

    def fetch(_i: int) -> tuple[int, bytes]:
        with urllib.request.urlopen(f"{live_server.url}/api/schema/?format=json", timeout=60) as response:
            return response.status, response.read()

    answers = race(fetch, 4)
    assert [status for status, _body in answers] == [200] * 4, answers
    assert len({body for _status, body in answers}) == 1
    assert len(fresh_schema_view) == 1


@pytest.mark.django_db
def test_the_schema_endpoint_keeps_one_schema_per_site_language_whatever_lang_says(fresh_schema_view, client):
    from common.schema_view import SchemaView

    for lang in ("zz-1", "zz-2", "en", "ko-kr", "ko"):
        assert client.get("/api/schema/", {"format": "json", "lang": lang}).status_code == 200
    assert sorted(SchemaView.generated) == ["en", "ko"]
    assert len(fresh_schema_view) == 2

"""API plumbing every app's API uses: the secure base view, list queries, ref fields, the error format.

Apps import these names from ``common.api``; the modules behind them are ``views`` (``ClinicAPIView``,
idempotent command answers), ``lists`` (the keyset list query and page), ``fields`` (``ClinicRefField``,
``InstantField``), ``inputs`` (request bodies several apps share)
and ``errors`` (REST_FRAMEWORK's ``EXCEPTION_HANDLER``).
"""

from .errors import exception_handler, field_errors
from .fields import ClinicRefField, InstantField
from .inputs import ReasonInput
from .lists import YEARS_1900_2999, ListQuery, list_parameters, page_body
from .views import ADMIN, STAFF, ClinicAPIView, idempotent_response, scope_clinic

__all__ = [
    "ADMIN",
    "STAFF",
    "YEARS_1900_2999",
    "ClinicAPIView",
    "ClinicRefField",
    "InstantField",
    "ListQuery",
    "ReasonInput",
    "scope_clinic",
    "exception_handler",
    "field_errors",
    "idempotent_response",
    "list_parameters",
    "page_body",
]

"""Idempotency-Key handling shared by every (I) command (API.md "Conventions")."""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

from django.db import transaction

from . import queries
from .errors import DomainError, IdempotencyKeyReused, ValidationFailed
from .models import CommandReceipt
from .refs import new_ref

_PRINTABLE = set(string.printable) - set("\t\n\r\x0b\x0c")


@dataclass(frozen=True)
class StoredResponse:
    status_code: int
    body: str
    replayed: bool
    receipt_ref: str | None


def validate_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not (1 <= len(key) <= 200) or any(ch not in _PRINTABLE for ch in key):
        raise ValidationFailed(
            "Idempotency-Key must be 1 to 200 printable characters.",
            fields={"Idempotency-Key": ["1 to 200 printable characters."]},
        )
    return key


def request_digest(*parts: object) -> str:
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def render(body: dict) -> str:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str)


def run_idempotent(
    *,
    scope: str,
    key: str | None,
    command: str,
    digest: str,
    execute: Callable[[str | None], tuple[int, dict]],
    refusals_write_nothing: bool = False,
) -> StoredResponse:
    """Run ``execute`` at most once per (scope, key) and store its answer.

    ``execute(receipt_ref)`` returns (status, body) or raises a DomainError, whose answer is
    stored too. An unexpected exception stores nothing, so the key can be retried.
    ``refusals_write_nothing``: the command raises its DomainErrors before its first write (the claim),
    so no savepoint is needed to undo a refusal's writes before the refusal is stored (two statements
    fewer). A command that may write and then refuse must leave it False.
    """
    if key is None:
        return _answer(execute, None, replayed=False)
    with transaction.atomic():
        receipt_ref = queries.receipt_insert(ref=new_ref("rcp"), scope=scope, key=key, command=command, digest=digest)
        if receipt_ref is None:
            receipt = CommandReceipt.objects.get(scope=scope, key=key)
            if receipt.request_digest != digest or receipt.command != command:
                raise IdempotencyKeyReused("This Idempotency-Key was used with a different request.")
            return StoredResponse(receipt.status_code, receipt.response_body, True, receipt.ref)
        answer = _answer(execute, receipt_ref, replayed=False, savepoint=not refusals_write_nothing)
        queries.receipt_store(receipt_ref, status_code=answer.status_code, body=answer.body)
        return answer


def _answer(execute, receipt_ref: str | None, *, replayed: bool, savepoint: bool = True) -> StoredResponse:
    try:
        with transaction.atomic() if savepoint else nullcontext():
            status, body = execute(receipt_ref)
    except DomainError as exc:
        status, body = exc.status_code, exc.as_body()
    return StoredResponse(status, render(body), replayed, receipt_ref)

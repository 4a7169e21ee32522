"""The transaction of a command that raises every refusal before its first write."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from django.db import connection, transaction


def own_transaction() -> AbstractContextManager:
    """A transaction when none is open; inside a caller's, the caller's, without a savepoint (two statements a
    command fewer). Only for a command whose every refusal (a ``DomainError``) comes before its first write: a
    refusal then leaves nothing to roll back to, and an unexpected failure after a write leaves the caller's
    transaction for the caller to roll back (its own savepoint or block, as ``run_idempotent``'s)."""
    return nullcontext() if connection.in_atomic_block else transaction.atomic()

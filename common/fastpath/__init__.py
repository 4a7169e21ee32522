"""The fast paths: performance plumbing that leans on Django's and psycopg's internals (issues 15, 23).

Domain code imports these names from ``common.fastpath`` and nothing from its modules; the contract
(what each does, the internals it relies on, how to turn it off) is README.md beside this file and
docs/architecture.md "Fast paths". ``settings.FASTPATHS`` (env ``FASTPATHS=off``) turns them all off:
the same answers by the ORM's and Django's own roads. ``tests/common/fastpath/test_internals.py``
pins every private attribute used, so an upgrade that changes one fails a named test.

- ``PreparedQuery``: a queryset compiled once per process, its SQL replayed with new values.
- ``prepared_cursor``: a cursor whose statements PostgreSQL plans once per connection.
- ``Semaphore``: N dispatch slots across the deployment (session advisory locks).
- ``insert_sql`` / ``saved``: the ORM's own INSERT of an unsaved object, for a caller composing one statement.
- ``redis_client``: one Redis client per pool of Django's cache, for the throttles.
"""

from .prepared import PreparedQuery, behind_transaction_pooler, prepared_cursor
from .redis_clients import redis_client
from .slots import Semaphore
from .sql import insert_sql, saved
from .switch import enabled

__all__ = [
    "PreparedQuery",
    "Semaphore",
    "behind_transaction_pooler",
    "enabled",
    "insert_sql",
    "prepared_cursor",
    "redis_client",
    "saved",
]

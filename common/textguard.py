"""Text PostgreSQL cannot store is refused where it enters: NUL and lone surrogates (issue 26).

PostgreSQL's text and jsonb refuse ``\\x00``; psycopg cannot encode an unpaired surrogate (``"\\ud800"``
in a JSON body is valid JSON but not UTF-8). Either reaching a query was a 500 (UnicodeEncodeError,
DataError). So the JSON parser (common/parsers.py) and the junk-request middleware (query strings, form
bodies, paths) refuse them first with a typed 400 ``VALIDATION_ERROR`` naming the field.
"""

from __future__ import annotations

import re

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
MESSAGE = "Text cannot contain NUL or unpaired surrogate characters."


def unstorable(value: str) -> bool:
    return UNSTORABLE.search(value) is not None


def first_unstorable(data, name: str = "body") -> str | None:
    """The name of the first field (key path) holding unstorable text in parsed JSON, else None.

    Iterative, so a document nested as deeply as the parser allowed cannot overflow the stack here.
    """
    stack = [(name, data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if unstorable(value):
                return path
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and unstorable(key):
                    return path
                stack.append((key if path == name else f"{path}.{key}", item))
        elif isinstance(value, list):
            stack.extend((path, item) for item in value)
    return None


def first_unstorable_param(querydict) -> str | None:
    """The first query or form parameter whose name or value holds NUL or a surrogate, else None."""
    for key, values in querydict.lists():
        if unstorable(key):
            return "query"
        for value in values:
            if isinstance(value, str) and unstorable(value):
                return key
    return None

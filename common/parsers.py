"""The API's JSON parser: absurdly nested input is a typed 400, not a RecursionError (500), and so is text
PostgreSQL cannot store (NUL, a lone surrogate such as ``"\\ud800"``: common/textguard.py)."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from .errors import ValidationFailed
from .textguard import MESSAGE, first_unstorable


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON nested too deeply.") from None
        field = first_unstorable(data)
        if field is not None:
            raise ValidationFailed("The request is not valid.", fields={field: [MESSAGE]})
        return data

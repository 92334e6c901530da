"""Form fields for JSON values the database must be able to store, and text clean-up."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from workflows.validators import json_value_errors


class StorableJSONField(forms.JSONField):
    """A JSON field that refuses what the database cannot hold, saying where in the value.

    The door (config/middleware.py) refuses NUL in the text posted, but JSON can still write
    one (`\\u0000`) or a lone surrogate (`\\ud800`), and NaN, which no jsonb column takes.
    """

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except (ValueError, RecursionError):  # a 5000-digit number, nesting too deep
            raise ValidationError(
                self.error_messages["invalid"], code="invalid", params={"value": value}
            ) from None

    def validate(self, value: Any) -> None:
        super().validate(value)
        if errors := json_value_errors(value):
            raise ValidationError(errors[0])

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            value = super().bound_data(data, initial)
        except (ValueError, RecursionError):
            return forms.fields.InvalidJSONInput(data)
        if isinstance(data, str) and json_value_errors(value):
            # Show the refused text as it was typed: written back out, a lone surrogate
            # cannot be encoded into the page.
            return forms.fields.InvalidJSONInput(data)
        return value


class PrettyJSONField(StorableJSONField):
    """A JSON field shown indented, for the few settings that are whole JSON structures."""

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        if value is None or value == "":
            return ""
        return json.dumps(value, ensure_ascii=False, indent=2)


def as_text(value: Any) -> str:
    """Return `value` if it is a string, else "" (for initials read from a document)."""
    return value if isinstance(value, str) else ""


def normalise_newlines(value: str) -> str:
    """Return `value` with the browser's CRLF line endings as LF, as documents store them."""
    return value.replace("\r\n", "\n").replace("\r", "\n")

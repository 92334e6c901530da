"""The engine's own exceptions; callers translate them once, at their edge."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every error the engine raises on purpose."""


class RecipeInvalid(EngineError):
    """A recipe document with errors; `errors` lists every one as `path: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class TemplateError(EngineError):
    """A template that cannot be rendered; `name` is the offending placeholder."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


class RegexError(EngineError):
    """A user pattern that RE2 refuses to compile."""


class RegexTooLarge(RegexError):
    """A user pattern beyond the bounds that keep matching fast (see `regex.py`)."""


class AnswerUnreadable(EngineError):
    """A model's answer (judge or classifier) that holds none of the expected structure."""


class InputError(EngineError):
    """Run inputs that do not fit the recipe's input schema; `errors` lists `path: message`."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors

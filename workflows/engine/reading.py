"""Read parts of a recipe document, collecting every error as `path: message`.

The recipe parser, the branch reader and the step kinds share these readers, so a field
of any of them reports a wrong type, a missing value or an unknown alias the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from workflows.engine.checks import actor_alias_problem, listed
from workflows.engine.errors import TemplateError
from workflows.engine.file_templates import file_reference
from workflows.engine.secrets import secret_env_problem
from workflows.engine.templating import (
    LEARNED_STRATEGIES_NAME,
    SOURCES_NAME,
    secret_reference,
    step_number,
    step_reference,
    step_sources_reference,
    template_names,
)
from workflows.engine.vocabulary import FILE_INPUT_TYPES


class DocumentReader:
    """Collect errors while reading; each method reports at the path it is given.

    What later parts refer to is filled in as the document is read: `actors` (aliases),
    `input_names` and `inputs` (each input's parsed spec), `step_count` and `keys` (the step
    keys), `route_names` (of every classify step), `validation_defaults` (the recipe's
    `validation`, which steps' settings inherit).
    """

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.actors: dict[str, str] = {}
        self.input_names: set[str] = set()
        self.inputs: dict[str, dict[str, Any]] = {}
        self.step_count = 0
        self.keys: list[str] = []
        self.route_names: set[str] = set()
        self.validation_defaults: dict[str, Any] = {}

    def error(self, path: str, message: str) -> None:
        """Report `message` at `path`."""
        self.errors.append(f"{path}: {message}")

    def text(
        self,
        doc: Mapping[str, Any],
        key: str,
        path: str,
        *,
        required: bool = False,
    ) -> str | None:
        """Return the string at `doc[key]`, reporting a missing, non-string or empty value.

        An empty string counts as missing only when the field is `required`.
        """
        value = doc.get(key)
        if value is None:
            if required:
                self.error(path, "is required")
            return None
        if not isinstance(value, str):
            self.error(path, f"must be a string, got {type(value).__name__}")
            return None
        if not value and required:
            self.error(path, "must not be empty")
            return None
        return value

    def mapping(self, value: object, path: str) -> Mapping[str, Any] | None:
        """Return `value` if it is an object; report anything else but a missing value."""
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.error(path, f"must be an object, got {type(value).__name__}")
            return None
        return value

    def actor_alias(self, value: object, path: str) -> str | None:
        """Return `value` if it is an actor alias of the recipe (None is no alias, silently)."""
        if value is None:
            return None
        problem = actor_alias_problem(value, self.actors)
        if problem:
            self.error(path, problem)
            return None
        return str(value)

    def check_template(
        self,
        template: str,
        path: str,
        *,
        hits: bool = True,
        secrets: Collection[str] | None = None,
    ) -> None:
        """Report a template that cannot be rendered or names what the recipe lacks.

        Without `hits`, the template may not show the step's own hits (`{sources}`): a
        search's query is rendered before there are any. `secrets`: the env vars the
        template may name as `{secrets.NAME}` (an http step's `secret_env`); None: it may
        name none, since its text is stored and shown.
        """
        try:
            names = template_names(template)
        except TemplateError as exc:
            self.error(path, exc.message)
            return
        for name in names:
            if name == SOURCES_NAME and not hits and name not in self.input_names:
                self.error(path, "{sources} cannot be used here: the step has not searched yet")
                continue
            secret = secret_reference(name)
            if secret is not None:
                problem = _secret_problem(secret, secrets)
                if problem:
                    self.error(path, problem)
                continue
            problem = self._template_name_problem(name)
            if problem:
                self.error(path, problem)

    def _template_name_problem(self, name: str) -> str | None:
        reference = file_reference(name)
        if reference is not None:
            problem = self.file_input_problem(reference.input)
            return None if problem is None else f"{{{name}}}: {problem}"
        if name in ("feedback", SOURCES_NAME, LEARNED_STRATEGIES_NAME) or name in self.input_names:
            return None
        number = step_number(name)
        if number is not None:
            if number <= self.step_count:
                return None
            return f"unknown template name '{name}'; the recipe has {self.step_count} steps"
        key = step_reference(name) or step_sources_reference(name)
        if key is not None:
            if key in self.keys:
                return None
            return f"unknown template name '{name}'; there is no step '{key}'"
        return f"unknown template name '{name}'; declared inputs: {listed(self.input_names)}"

    def file_input_problem(self, name: object) -> str | None:
        """Return why `name` is not a file or files input of the recipe, or None when it is."""
        if not isinstance(name, str):
            return f"must be the name of a file input, got {type(name).__name__}"
        if self.inputs.get(name, {}).get("type") in FILE_INPUT_TYPES:
            return None
        if name in self.input_names and name not in self.inputs:
            return None  # its spec is wrong, and reported so
        files = [n for n, spec in self.inputs.items() if spec.get("type") in FILE_INPUT_TYPES]
        return f"'{name}' is not a file input of the recipe; its file inputs: {listed(files)}"


def _secret_problem(name: str, secrets: Collection[str] | None) -> str | None:
    """Say why a template may not name the secret `name`, or None when it may."""
    if secrets is None:
        return (
            f"{{secrets.{name}}} cannot be used here: secrets go only into an http step's "
            "url, headers, query and body"
        )
    if name not in secrets:
        problem = secret_env_problem(name)
        if problem is not None:  # listing it would not help
            return f"{{secrets.{name}}}: {problem}"
        listed_names = ", ".join(sorted(secrets)) or "none"
        return f"{{secrets.{name}}}: add {name} to the step's secret_env (it lists {listed_names})"
    return None

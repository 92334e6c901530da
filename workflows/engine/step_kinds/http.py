"""`http`: send one HTTP request built from templates; no model is called.

Its response is the body's text; a JSON object overlays the run's facts, as an llm step's
answer does. A status other than 2xx (after the retries 429 and 5xx get), a refused address,
a timeout or a body past the size cap fails the step; `http_status`, `execution_error` and
`execution_timeout` branches handle those. Secrets: `{secrets.NAME}` in the url, a header,
a query value or the body, for an env var NAME the step lists in `secret_env`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.errors import TemplateError
from workflows.engine.field_spec import FieldSpec
from workflows.engine.http_request import (
    BODILESS,
    DEFAULT_METHOD,
    DEFAULT_RETRIES,
    MAX_HEADERS,
    MAX_QUERY,
    MAX_RETRIES,
    MAX_SECRET_ENV,
    METHODS,
    body_templates,
    header_name_problem,
    method_problem,
    url_problem,
)
from workflows.engine.reading import DocumentReader
from workflows.engine.secrets import secret_env_problem
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import FAILURE_SEVERITY
from workflows.engine.templating import template_names
from workflows.engine.tools import bounded_int


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read the request: method, url, headers, query, body, secret_env and retries."""
    secrets = _secret_env(doc.get("secret_env"), f"{path}.secret_env", reader)
    method = _method(doc.get("method"), f"{path}.method", reader, secrets)
    url = reader.text(doc, "url", f"{path}.url", required=True) or ""
    if url:
        problem = url_problem(url)
        if problem is not None:
            reader.error(f"{path}.url", problem)
        reader.check_template(url, f"{path}.url", secrets=secrets)
    headers = _templates(doc, "headers", path, reader, secrets, MAX_HEADERS)
    for name in headers:
        problem = header_name_problem(name)
        if problem is not None:
            reader.error(f"{path}.headers.{name}", problem)
    query = _templates(doc, "query", path, reader, secrets, MAX_QUERY)
    body = doc.get("body")
    if body is not None:
        if method in BODILESS:
            reader.error(f"{path}.body", f"a {method} request has no body; use query instead")
        for template, where in body_templates(body, f"{path}.body"):
            reader.check_template(template, where, secrets=secrets)
    retries, problem = bounded_int(doc.get("retries"), DEFAULT_RETRIES, 0, MAX_RETRIES)
    if problem is not None:
        reader.error(f"{path}.retries", problem)
    return {
        "method": method,
        "url": url,
        "headers": headers,
        "query": query,
        "body": body,
        "secret_env": secrets,
        "retries": retries,
    }


def _secret_env(value: object, path: str, reader: DocumentReader) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        reader.error(path, f"must be a list of env var names, got {type(value).__name__}")
        return ()
    if len(value) > MAX_SECRET_ENV:
        reader.error(path, f"at most {MAX_SECRET_ENV} env vars, got {len(value)}")
        return ()
    names: list[str] = []
    for i, name in enumerate(value):
        problem = secret_env_problem(name)
        if problem is not None:
            reader.error(f"{path}[{i}]", problem)
        elif name in names:
            reader.error(f"{path}[{i}]", f"{name} is listed twice")
        else:
            names.append(name)
    return tuple(names)


def _method(value: object, path: str, reader: DocumentReader, secrets: tuple[str, ...]) -> str:
    """Read the method: one of METHODS, or a template the runner renders and checks."""
    if value is None:
        return DEFAULT_METHOD
    if not isinstance(value, str) or not value:
        reader.error(path, f"must be one of {', '.join(METHODS)}, got {value!r}")
        return DEFAULT_METHOD
    reader.check_template(value, path)
    try:
        if template_names(value):
            return value
    except TemplateError:
        return DEFAULT_METHOD  # reported by check_template
    problem = method_problem(value)
    if problem is not None:
        reader.error(path, problem)
        return DEFAULT_METHOD
    return value.upper()


def _templates(
    doc: Mapping[str, Any],
    key: str,
    path: str,
    reader: DocumentReader,
    secrets: tuple[str, ...],
    most: int,
) -> dict[str, str]:
    """Read an object of name: template (headers, query)."""
    value = reader.mapping(doc.get(key), f"{path}.{key}")
    if value is None:
        return {}
    if len(value) > most:
        reader.error(f"{path}.{key}", f"at most {most} entries, got {len(value)}")
        return {}
    read: dict[str, str] = {}
    for name, template in value.items():
        where = f"{path}.{key}.{name}"
        if not isinstance(name, str) or not name:
            reader.error(where, "a name must be non-empty text")
        elif not isinstance(template, str):
            reader.error(where, f"must be a template (text), got {type(template).__name__}")
        else:
            reader.check_template(template, where, secrets=secrets)
            read[name] = template
    return read


STEP_KIND = StepKind(
    name="http",
    label="HTTP request",
    help=(
        "Sends one HTTP request, with no model call: method, url, headers, query and body are "
        "templates ({secrets.NAME} reads env var NAME, a BRANCHLINE_SECRET_ one listed in "
        "secret_env, never stored or shown). Its response is the body's text; a JSON object "
        "overlays the run's facts. 429 and 5xx are retried; any other status but 2xx fails the step."
    ),
    fields=(
        FieldSpec(
            "method",
            "Method",
            "choice",
            choices=METHODS,
            default=DEFAULT_METHOD,
            help="The request's method (or a template giving one).",
        ),
        FieldSpec(
            "url",
            "URL",
            "template",
            required=True,
            help=(
                "http:// or https:// and the host, written out (templates only after them); "
                "the host must pass the address guard."
            ),
        ),
        FieldSpec(
            "headers",
            "Headers",
            "text",
            help=(
                "JSON: an object of header name: template "
                '("Bearer {secrets.BRANCHLINE_SECRET_API}").'
            ),
        ),
        FieldSpec(
            "query",
            "Query",
            "text",
            help="JSON: an object of parameter name: template, encoded into the URL.",
        ),
        FieldSpec(
            "body",
            "Body",
            "text",
            help=(
                "A template sent as text, or JSON (an object or a list) whose strings are "
                "templates, sent as application/json."
            ),
        ),
        FieldSpec(
            "secret_env",
            "Secrets (env vars)",
            "list",
            help=(
                "The env vars the templates may read as {secrets.NAME}: only names that begin "
                "with BRANCHLINE_SECRET_."
            ),
        ),
        FieldSpec(
            "timeout_s",
            "Timeout (seconds)",
            "integer",
            help="How long the step may take, every attempt and wait included (default 30).",
        ),
        FieldSpec(
            "retries",
            "Retries",
            "integer",
            default=DEFAULT_RETRIES,
            help=(
                f"0 to {MAX_RETRIES}: attempts after the first on 408, 425, 429, 5xx or a "
                "broken connection, with backoff (Retry-After honoured)."
            ),
        ),
        FAILURE_SEVERITY,
    ),
    read_body=read_body,
    actor_kind=None,
    article="an",
)

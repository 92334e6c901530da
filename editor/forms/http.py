"""The step panel's request section of an http step (prefix `http`): method, URL, headers,
query, body, secrets' env vars and retries. The engine checks the templates and the URL when
the step is applied; here each value is read into the document's shape."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from workflows.engine.http_request import DEFAULT_METHOD, DEFAULT_RETRIES, MAX_RETRIES, METHODS

from .fields import PrettyJSONField, normalise_newlines

PREFIX = "http"
# Posted by the section: a post without it (an older page, a script) keeps the request.
POSTED = "http-posted"
# The step's fields the section writes.
FIELDS = ("method", "url", "headers", "query", "body", "secret_env", "retries")


class HttpForm(forms.Form):
    method = forms.ChoiceField(choices=[(m, m) for m in METHODS], initial=DEFAULT_METHOD)
    url = forms.CharField(
        label="URL",
        max_length=8000,
        required=False,
        help_text=(
            "http:// or https:// and the host, written out; templates after them, e.g. "
            "https://api.example.com/{id}."
        ),
    )
    headers = PrettyJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text='JSON: {"Authorization": "Bearer {secrets.BRANCHLINE_SECRET_API}"}.',
    )
    query = PrettyJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text='JSON: {"q": "{topic}"}, encoded into the URL.',
    )
    body = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text="JSON (an object or a list, whose strings are templates), or a text template.",
    )
    secret_env = forms.CharField(
        label="Secrets (env vars)",
        required=False,
        help_text=(
            "Comma separated: the env vars the templates may read as {secrets.NAME}; "
            "only names that begin with BRANCHLINE_SECRET_."
        ),
    )
    retries = forms.IntegerField(
        min_value=0, max_value=MAX_RETRIES, required=False, initial=DEFAULT_RETRIES
    )

    def __init__(self, data: Any, *, step: dict[str, Any]) -> None:
        body = step.get("body")
        secret_env = step.get("secret_env")
        initial = {
            "method": step.get("method") or DEFAULT_METHOD,
            "url": step.get("url") or "",
            "headers": step.get("headers"),
            "query": step.get("query"),
            "body": body
            if isinstance(body, str)
            else (json.dumps(body, ensure_ascii=False, indent=2) if body is not None else ""),
            "secret_env": ", ".join(secret_env) if isinstance(secret_env, list) else "",
            "retries": step.get("retries"),
        }
        super().__init__(data, prefix=PREFIX, initial=initial)

    def _object(self, name: str) -> dict[str, Any] | None:
        value = self.cleaned_data[name]
        if value in (None, "", {}):
            return None
        if not isinstance(value, dict):
            raise ValidationError("Write a JSON object of name: template.")
        return value

    def clean_headers(self) -> dict[str, Any] | None:
        return self._object("headers")

    def clean_query(self) -> dict[str, Any] | None:
        return self._object("query")

    def clean_body(self) -> Any:
        text = normalise_newlines(self.cleaned_data["body"])
        if not text.strip():
            return None
        if text.lstrip()[:1] in ("{", "["):
            try:
                value = json.loads(text)
            except ValueError:
                return text  # a text template that begins with a placeholder
            if isinstance(value, dict | list):
                return value
        return text

    def clean_secret_env(self) -> list[str] | None:
        names = [n.strip() for n in self.cleaned_data["secret_env"].split(",") if n.strip()]
        return names or None

    def write(self, step: dict[str, Any]) -> None:
        """Write the section's values into the step document (unset ones left out)."""
        data = self.cleaned_data
        step["method"] = data["method"]
        step["url"] = data["url"]
        for name in ("headers", "query", "body", "secret_env", "retries"):
            if data.get(name) is not None:
                step[name] = data[name]

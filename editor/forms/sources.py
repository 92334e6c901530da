"""The step panel's Sources section: the knowledge bases a step searches, and "Try".

A source is one entry of the step's `sources` list (`knowledge_base`, `query`, `top_k`,
`min_score`, `mode`); the section is a formset with the prefix `sources`, whose rows the page
adds and removes (static/editor/sources.js). The engine checks the meaning when the step is
applied, as for every other field.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from knowledge.selectors import knowledge_bases_for
from workflows.engine.errors import TemplateError
from workflows.engine.sources import (
    DEFAULT_MIN_SCORE,
    DEFAULT_MODE,
    DEFAULT_TOP_K,
    MAX_TOP_K,
    MODES,
    SourceSpec,
)
from workflows.engine.templating import template_names

from .fields import normalise_newlines

PREFIX = "sources"
_MODE_LABELS = {"hybrid": "Hybrid", "fulltext": "Full text", "semantic": "Semantic"}
MODE_CHOICES = [(m, _MODE_LABELS.get(m, m)) for m in MODES]


def base_choices(
    user: AbstractBaseUser | AnonymousUser | None, named: list[str]
) -> list[tuple[str, str]]:
    """Return the bases the user can read, plus those the document names that they cannot."""
    readable = (
        [(b.slug, f"{b.name} ({b.slug})") for b in knowledge_bases_for(user)]
        if user is not None
        else []
    )
    known = {slug for slug, _ in readable}
    # Kept as written, so the rest of the step can be edited; a run by this user would fail.
    missing = [(s, f"{s} (not found or not shared with you)") for s in named if s not in known]
    return [("", "— choose a knowledge base"), *readable, *missing]


class SourceForm(forms.Form):
    knowledge_base = forms.ChoiceField(choices=(), label="Knowledge base")
    query = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        required=False,
        strip=False,
        help_text="A template; empty: the step's prompt (a retrieve step: its first input).",
    )
    top_k = forms.IntegerField(
        min_value=1, max_value=MAX_TOP_K, initial=DEFAULT_TOP_K, label="Top k"
    )
    min_score = forms.FloatField(
        min_value=0, max_value=1, initial=DEFAULT_MIN_SCORE, label="Min score"
    )
    mode = forms.ChoiceField(choices=MODE_CHOICES, initial=DEFAULT_MODE)
    # Only for "Try": what a template query would be filled to. Never written to the step.
    sample = forms.CharField(
        required=False,
        max_length=2000,
        label="Sample query",
        help_text="For Try: the query as a run would render it.",
    )

    def __init__(self, *args: Any, choices: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["knowledge_base"].choices = choices

    def clean_query(self) -> str:
        return normalise_newlines(self.cleaned_data["query"])

    def source(self) -> dict[str, Any]:
        """Return the source as the step document holds it."""
        data = self.cleaned_data
        query = data["query"] if data["query"].strip() else ""
        return SourceSpec(
            knowledge_base=data["knowledge_base"],
            query=query,
            top_k=data["top_k"],
            min_score=data["min_score"],
            mode=data["mode"],
        ).as_json()


class BaseSourceFormSet(forms.BaseFormSet):  # type: ignore[type-arg]
    def written_rows(self) -> list[SourceForm]:
        """Return the rows that are sources, in order (a row left blank is skipped)."""
        return [f for f in self.forms if f.has_changed() and f.cleaned_data]

    def sources(self) -> list[dict[str, Any]]:
        """Return the filled rows as the step's `sources`."""
        return [f.source() for f in self.written_rows()]


SourceFormSet = forms.formset_factory(SourceForm, formset=BaseSourceFormSet, extra=0)


def source_initial(source: Any) -> dict[str, Any]:
    """Return a source of the document as a row's initial values (what is odd kept as text)."""
    if not isinstance(source, dict):
        return {}
    base = source.get("knowledge_base")
    query = source.get("query")
    return {
        "knowledge_base": base if isinstance(base, str) else "",
        "query": query if isinstance(query, str) else "",
        "top_k": source.get("top_k", DEFAULT_TOP_K),
        "min_score": source.get("min_score", DEFAULT_MIN_SCORE),
        "mode": source.get("mode", DEFAULT_MODE),
    }


def sources_formset(
    data: Any, *, sources: Any, user: AbstractBaseUser | AnonymousUser | None
) -> BaseSourceFormSet:
    """Return the Sources formset: bound to the posted rows, or filled from the step."""
    initial = [source_initial(s) for s in sources] if isinstance(sources, list) else []
    # Only the step's own bases are kept beside the readable ones: a post cannot add another.
    named = [i["knowledge_base"] for i in initial if i.get("knowledge_base")]
    choices = base_choices(user, list(dict.fromkeys(named)))
    return SourceFormSet(
        data,
        prefix=PREFIX,
        # Bound, the rows come from the post alone (the page adds and removes them).
        initial=None if data is not None else initial,
        form_kwargs={"choices": choices},
    )


def _is_template(text: str) -> bool:
    """Tell whether a run fills `text` in (it names something, or is not a valid template)."""
    try:
        return bool(template_names(text))
    except TemplateError:
        return True


class TryForm(SourceForm):
    """One source row as "Try" posts it: the query to run is the sample, or the query itself."""

    def __init__(self, data: Any, *, user: AbstractBaseUser | AnonymousUser) -> None:
        named = [data.get("knowledge_base", "")] if data.get("knowledge_base") else []
        super().__init__(data, choices=base_choices(user, named))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        sample = (data.get("sample") or "").strip()
        query = (data.get("query") or "").strip()
        if not sample and (not query or _is_template(query)):
            self.add_error(
                "sample",
                "Type a sample query: the query is filled from the run"
                + (f" ({query})." if query else " (the step's prompt)."),
            )
        return data

    def query(self) -> str:
        """Return the text to search for."""
        return (self.cleaned_data.get("sample") or "").strip() or self.cleaned_data["query"].strip()

"""The knowledge pages' forms: a new knowledge base, its settings, an upload, a search."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import QuerySet
from django.utils.text import slugify

from knowledge.ingest import MAX_CHUNK_SIZE, MIN_CHUNK_SIZE
from knowledge.models import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, KnowledgeBase
from workflows.engine.sources import DEFAULT_MODE, DEFAULT_TOP_K, MAX_TOP_K
from workflows.models import SLUG_VALIDATOR, Actor

from .fields import normalise_newlines
from .sources import MODE_CHOICES

MAX_FILES_PER_UPLOAD = 20


def embedding_actors() -> QuerySet[Actor]:
    """Return the actors that may embed a knowledge base: any model actor."""
    return Actor.objects.filter(kind=Actor.Kind.LLM).order_by("name")


class EmbeddingActorField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Actor) -> str:
        return f"{obj.name} ({obj.get_provider_display()})"


def _embedding_actor_field() -> EmbeddingActorField:
    return EmbeddingActorField(
        queryset=embedding_actors(),
        required=False,
        empty_label="— none: full-text search only",
        label="Embedding actor",
        help_text="Embeds the chunks and the queries for semantic and hybrid search.",
    )


def add_service_errors(form: forms.Form, errors: list[str]) -> None:
    """Show the service's `field: message` errors beside their fields (others above the form)."""
    for error in errors:
        name, sep, message = error.partition(": ")
        if sep and name in form.fields:
            form.add_error(name, message[:1].upper() + message[1:] + ".")
        else:
            form.add_error(None, error)


class KnowledgeBaseCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.CharField(
        max_length=100,
        required=False,
        validators=[SLUG_VALIDATOR],
        help_text="What recipe steps name in their sources. Leave empty to derive it from the name.",
    )
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["embedding_actor"] = _embedding_actor_field()

    def clean_description(self) -> str:
        return normalise_newlines(self.cleaned_data["description"])

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        slug = data.get("slug") or slugify(data.get("name", ""))[:100]
        if not slug:
            self.add_error("slug", "Choose a slug: letters, digits, '-' or '_'.")
        elif KnowledgeBase.objects.filter(slug=slug).exists():
            self.add_error(
                "slug", f"A knowledge base '{slug}' exists already; choose another slug."
            )
        data["slug"] = slug
        return data


class KnowledgeBaseSettingsForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    chunk_size = forms.IntegerField(
        min_value=MIN_CHUNK_SIZE,
        max_value=MAX_CHUNK_SIZE,
        initial=DEFAULT_CHUNK_SIZE,
        label="Chunk size (characters)",
    )
    chunk_overlap = forms.IntegerField(
        min_value=0,
        initial=DEFAULT_CHUNK_OVERLAP,
        label="Overlap (characters)",
        help_text="Text repeated from the previous chunk of the section; at most half a chunk.",
    )

    def __init__(self, *args: Any, base: KnowledgeBase, **kwargs: Any) -> None:
        kwargs.setdefault(
            "initial",
            {
                "name": base.name,
                "description": base.description,
                "chunk_size": base.chunk_size,
                "chunk_overlap": base.chunk_overlap,
                "embedding_actor": base.embedding_actor_id,
            },
        )
        super().__init__(*args, **kwargs)
        self.fields["embedding_actor"] = _embedding_actor_field()

    def clean_description(self) -> str:
        return normalise_newlines(self.cleaned_data["description"])


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """A file field that takes several files (Django's documented recipe)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        single = super().clean
        if isinstance(data, (list, tuple)):
            if not data and self.required:
                raise forms.ValidationError(self.error_messages["required"], code="required")
            return [single(d, initial) for d in data]
        return [single(data, initial)]


class UploadForm(forms.Form):
    files = MultipleFileField(
        # An empty file is refused by the converter, with the others' outcomes beside it.
        allow_empty_file=True,
        label="Files",
        help_text="Text, Markdown, HTML, PDF or DOCX; several at once.",
    )

    def clean_files(self) -> list[Any]:
        files = self.cleaned_data["files"]
        if len(files) > MAX_FILES_PER_UPLOAD:
            raise forms.ValidationError(
                f"{len(files)} files: upload at most {MAX_FILES_PER_UPLOAD} at a time."
            )
        return files


class SearchForm(forms.Form):
    q = forms.CharField(max_length=2000, label="Query", strip=True)
    mode = forms.ChoiceField(choices=MODE_CHOICES, initial=DEFAULT_MODE, required=False)
    top_k = forms.IntegerField(
        min_value=1, max_value=MAX_TOP_K, initial=DEFAULT_TOP_K, required=False, label="Top k"
    )

    def clean_mode(self) -> str:
        return self.cleaned_data["mode"] or DEFAULT_MODE

    def clean_top_k(self) -> int:
        value = self.cleaned_data["top_k"]
        return DEFAULT_TOP_K if value is None else value

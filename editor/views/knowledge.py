"""Knowledge bases: the list, a base's page (settings, uploads with live progress, documents,
search), a document's chunks, and the step panel's "Try" of a source.

Every write goes through `knowledge.ingest`; every read of a base through
`knowledge.selectors`, so another user's base is a 404 here as in the API. htmx swaps only
2xx answers, so the htmx forms answer their mistakes with 200 and the form's errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from knowledge.convert import ConversionError, check_size
from knowledge.ingest import (
    BaseConflict,
    SettingsInvalid,
    add_document,
    create_base,
    delete_base,
    delete_document,
    update_settings,
)
from knowledge.models import Document, KnowledgeBase
from knowledge.search import Hit, SearchError, search
from knowledge.selectors import (
    MOVING,
    base_document,
    base_documents,
    knowledge_bases_listed,
    readable_base,
)

from ..forms.knowledge import (
    KnowledgeBaseCreateForm,
    KnowledgeBaseSettingsForm,
    SearchForm,
    UploadForm,
    add_service_errors,
)
from ..forms.sources import TryForm
from .editor import editable_recipe
from .runs import HtmxHttpRequest

LIST = "knowledge/base_list.html"
BASE = "knowledge/base_detail.html"
DOCUMENT = "knowledge/document.html"
CHUNKS_PER_PAGE = 50


def _base_or_404(request: HttpRequest, slug: str) -> KnowledgeBase:
    base = readable_base(request.user, slug)
    if base is None:
        raise Http404(f"No knowledge base '{slug}'.")
    return base


def _changeable_base(request: HttpRequest, slug: str) -> KnowledgeBase:
    """Return a base the user may change: 404 if they may not see it, 403 if not change it."""
    base = _base_or_404(request, slug)
    if not request.user.has_perm("knowledge.change_knowledgebase", base):
        raise PermissionDenied("You may not change this knowledge base.")
    return base


def _documents_context(request: HttpRequest, base: KnowledgeBase, **extra: Any) -> dict[str, Any]:
    """Return what the documents table needs (it polls every second while a document is still
    queued or being indexed)."""
    documents = list(base_documents(base))
    return {
        "base": base,
        "documents": documents,
        "polling": any(d.status in MOVING for d in documents),
        "chunk_count": base.chunks.count(),
        "can_change": request.user.has_perm("knowledge.change_knowledgebase", base),
        **extra,
    }


@login_required
@require_http_methods(["GET", "POST"])
def knowledge_list(request: HttpRequest) -> HttpResponse:
    """List the user's knowledge bases; create one."""
    form = KnowledgeBaseCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            base = create_base(
                owner=request.user,
                name=form.cleaned_data["name"],
                slug=form.cleaned_data["slug"],
                description=form.cleaned_data["description"],
                embedding_actor=form.cleaned_data["embedding_actor"],
            )
        except SettingsInvalid as exc:
            add_service_errors(form, exc.errors)
        except BaseConflict as exc:
            add_service_errors(form, [str(exc)])
        else:
            messages.success(request, f"Created the knowledge base “{base.name}”.")
            return redirect("knowledge-base", slug=base.slug)
    bases = knowledge_bases_listed(request.user)
    return render(
        request,
        LIST,
        {"bases": bases, "form": form},
        status=400 if form.is_bound else 200,
    )


@login_required
@require_GET
def knowledge_base(request: HttpRequest, slug: str) -> HttpResponse:
    """Show a base: its settings, the upload form, the documents and a search box."""
    base = _base_or_404(request, slug)
    return render(
        request,
        BASE,
        _documents_context(
            request,
            base,
            settings_form=KnowledgeBaseSettingsForm(base=base),
            upload_form=UploadForm(),
            search_form=SearchForm(),
            can_delete=request.user.has_perm("knowledge.delete_knowledgebase", base),
        ),
    )


@login_required
@require_POST
def knowledge_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """Save a base's settings; a change of chunking or embedding re-indexes every document."""
    base = _changeable_base(request, slug)
    form = KnowledgeBaseSettingsForm(request.POST, base=base)
    saved = reindexing = False
    if form.is_valid():
        before = base.settings_revision
        try:
            base = update_settings(base, **form.cleaned_data)
        except SettingsInvalid as exc:
            add_service_errors(form, exc.errors)
        else:
            saved = True
            reindexing = base.settings_revision != before
            form = KnowledgeBaseSettingsForm(base=base)
    return render(
        request,
        f"{BASE}#settings",
        _documents_context(
            request,
            base,
            settings_form=form,
            saved=saved,
            reindexing=reindexing,
            oob_documents=reindexing,
        ),
    )


@dataclass(frozen=True)
class UploadOutcome:
    filename: str
    document: Document | None
    created: bool
    error: str


@login_required
@require_POST
def knowledge_upload(request: HttpRequest, slug: str) -> HttpResponse:
    """Add the uploaded files; each one is converted now and indexed in the background."""
    base = _changeable_base(request, slug)
    form = UploadForm(request.POST, request.FILES)
    outcomes: list[UploadOutcome] = []
    if form.is_valid():
        for upload in form.cleaned_data["files"]:
            name = upload.name or "unnamed"
            try:
                check_size(upload.size)  # before the file is read into memory
                document, created = add_document(
                    base, request.user, name, upload.read(), upload.content_type
                )
            except ConversionError as exc:
                outcomes.append(UploadOutcome(name, None, False, str(exc)))
            else:
                outcomes.append(UploadOutcome(name, document, created, ""))
    return render(
        request,
        f"{BASE}#upload",
        _documents_context(
            request,
            base,
            upload_form=UploadForm() if form.is_valid() else form,
            outcomes=outcomes,
            oob_documents=True,
        ),
    )


@login_required
@require_GET
def knowledge_documents(request: HttpRequest, slug: str) -> HttpResponse:
    """Render the documents table (polled every second while a document is being indexed)."""
    base = _base_or_404(request, slug)
    return render(request, f"{BASE}#documents", _documents_context(request, base))


@login_required
@require_GET
def knowledge_document(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """Show one document: its status, its error, and its chunks as search sees them."""
    base = _base_or_404(request, slug)
    document = get_object_or_404(base_documents(base), pk=pk)
    chunks = Paginator(document.chunks.defer("embedding").order_by("ordinal"), CHUNKS_PER_PAGE)
    return render(
        request,
        DOCUMENT,
        {"base": base, "document": document, "page": chunks.get_page(request.GET.get("page"))},
    )


@login_required
@require_POST
def knowledge_document_delete(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """Delete a document and its chunks; answer with the documents table."""
    base = _changeable_base(request, slug)
    document = base_document(base, pk)
    if document is None:
        raise Http404(f"No document {pk} in '{slug}'.")
    title = document.title
    delete_document(document)
    return render(request, f"{BASE}#documents", _documents_context(request, base, deleted=title))


@login_required
@require_POST
def knowledge_delete(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Delete a whole base (its owner or staff only)."""
    base = _base_or_404(request, slug)
    if not request.user.has_perm("knowledge.delete_knowledgebase", base):
        raise PermissionDenied("Only the owner may delete this knowledge base.")
    name = base.name
    delete_base(base)
    messages.success(request, f"Deleted the knowledge base “{name}”.")
    if request.htmx:
        return HttpResponseClientRedirect(reverse("knowledge-list"))
    return redirect("knowledge-list")


@login_required
@require_GET
def knowledge_search(request: HttpRequest, slug: str) -> HttpResponse:
    """Search the base; answer with the hits (or why there are none)."""
    base = _base_or_404(request, slug)
    form = SearchForm(request.GET)
    hits: list[Hit] = []
    error = ""
    if form.is_valid():
        try:
            hits = search(
                base,
                form.cleaned_data["q"],
                mode=form.cleaned_data["mode"],
                top_k=form.cleaned_data["top_k"],
            )
        except SearchError as exc:
            error = str(exc)
    return render(
        request,
        f"{BASE}#search-results",
        {
            "base": base,
            "form": form,
            "hits": hits,
            "error": error,
            "tried": True,
            "query": form.cleaned_data.get("q", "") if form.is_valid() else "",
        },
    )


# -- the step panel's sources ----------------------------------------------------------------

_ROW = re.compile(r"sources-\d{1,4}")
_ROW_FIELDS = ("knowledge_base", "query", "top_k", "min_score", "mode", "sample")


def _source_fields(request: HttpRequest) -> dict[str, str]:
    """Return the posted fields of the source row whose Try was pressed, without its prefix.

    The button sits in the step form, whose other rows are posted too; it names its own row.
    """
    row = request.POST.get("try_source", "")
    if not _ROW.fullmatch(row):
        return {}
    return {name: request.POST.get(f"{row}-{name}", "") for name in _ROW_FIELDS}


@login_required
@require_POST
def source_try(request: HttpRequest, slug: str) -> HttpResponse:
    """Run one source of the step being edited, with a sample query; show its hits inline."""
    editable_recipe(request, slug)
    form = TryForm(_source_fields(request), user=request.user)
    hits: list[Hit] = []
    error = ""
    if form.is_valid():
        base = readable_base(request.user, form.cleaned_data["knowledge_base"])
        if base is None:
            error = f"No knowledge base '{form.cleaned_data['knowledge_base']}' that you may read."
        else:
            try:
                hits = search(
                    base,
                    form.query(),
                    mode=form.cleaned_data["mode"],
                    top_k=form.cleaned_data["top_k"],
                    min_score=form.cleaned_data["min_score"],
                )
            except SearchError as exc:
                error = str(exc)
    return render(
        request,
        "knowledge/_hits.html",
        {"hits": hits, "error": error, "form": form, "tried": True},
    )

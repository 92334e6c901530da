"""The knowledge bases API's routes (under /api/)."""

from __future__ import annotations

from workflows.urls import SLUG, api
from workflows.validators import WHOLE_NUMBER

from .apis import views

BASE = f"knowledge-bases/{SLUG}"
# A document id is a whole number in ASCII digits that fits a bigint: any other is no document.
DOCUMENT = f"(?P<document_id>{WHOLE_NUMBER})"

urlpatterns = [
    api("knowledge-bases", views.KnowledgeBaseListApi.as_view(), "knowledge-base-list"),
    api(BASE, views.KnowledgeBaseDetailApi.as_view(), "knowledge-base-detail"),
    api(f"{BASE}/documents", views.DocumentListApi.as_view(), "knowledge-document-list"),
    api(
        f"{BASE}/documents/{DOCUMENT}",
        views.DocumentDetailApi.as_view(),
        "knowledge-document-detail",
    ),
    api(f"{BASE}/search", views.SearchApi.as_view(), "knowledge-search"),
]

"""The knowledge bases API: bases (CRUD by slug), their documents (upload, progress, delete),
and search. Another user's base does not exist here (404), as with recipes."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import QueryDict
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.apis.errors import InputRefused
from workflows.apis.pagination import MAX_LIMIT, window, window_parameters
from workflows.apis.parsers import JSONParser, MultiPartParser
from workflows.apis.schema import errors

from .. import ingest, search, selectors
from ..convert import ConversionError, FileTooLarge, check_size
from ..models import Document, KnowledgeBase
from .serializers import (
    DocumentOutput,
    DocumentUploadInput,
    DocumentUploadOutput,
    KnowledgeBaseCreateInput,
    KnowledgeBaseDetailOutput,
    KnowledgeBaseOutput,
    KnowledgeBasePatchInput,
    SearchInput,
    SearchOutput,
)


def _base_for(request: Request, slug: str, *, perm: str | None = None) -> KnowledgeBase:
    """Return the base if the user may see it (404 if not), and do `perm` to it (403 if not)."""
    base = selectors.readable_base(request.user, slug)
    if base is None:
        raise NotFound(f"No knowledge base '{slug}'.")
    if perm is not None and not request.user.has_perm(perm, base):
        raise PermissionDenied("You may not change this knowledge base.")
    return base


def _detail(base: KnowledgeBase) -> dict[str, Any]:
    return dict(KnowledgeBaseDetailOutput(selectors.base_with_counts(base)).data)


def _conflict(message: str) -> Response:
    return Response({"errors": [message]}, status=status.HTTP_409_CONFLICT)


class KnowledgeBaseListApi(APIView):
    @extend_schema(
        parameters=window_parameters(MAX_LIMIT), responses=KnowledgeBaseOutput(many=True)
    )
    def get(self, request: Request) -> Response:
        bases = selectors.knowledge_bases_listed(request.user)
        page = window(bases, request, default_limit=MAX_LIMIT)
        return Response(KnowledgeBaseOutput(page, many=True).data)

    @extend_schema(
        request=KnowledgeBaseCreateInput,
        responses={201: KnowledgeBaseDetailOutput, **errors(409)},
    )
    def post(self, request: Request) -> Response:
        """Create a knowledge base owned by the caller."""
        data = KnowledgeBaseCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            base = ingest.create_base(owner=request.user, **data.validated_data)
        except ingest.SettingsInvalid as exc:
            raise InputRefused(exc.errors) from None
        except ingest.BaseConflict as exc:
            return _conflict(str(exc))
        return Response(_detail(base), status=status.HTTP_201_CREATED)


class KnowledgeBaseDetailApi(APIView):
    @extend_schema(responses=KnowledgeBaseDetailOutput)
    def get(self, request: Request, slug: str) -> Response:
        return Response(_detail(_base_for(request, slug)))

    @extend_schema(request=KnowledgeBasePatchInput, responses=KnowledgeBaseDetailOutput)
    def patch(self, request: Request, slug: str) -> Response:
        """Rename, describe or share the base, or change how it is indexed (a new chunk size,
        overlap or embedding actor queues every document again)."""
        base = _base_for(request, slug, perm="knowledge.change_knowledgebase")
        data = KnowledgeBasePatchInput(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        users = fields.pop("shared_with_users", None)
        groups = fields.pop("shared_with_groups", None)
        try:
            if fields:
                ingest.update_settings(base, **fields)
        except ingest.SettingsInvalid as exc:
            raise InputRefused(exc.errors) from None
        if users is not None or groups is not None:
            ingest.share_base(
                base,
                users=users if users is not None else base.shared_with_users.all(),
                groups=groups if groups is not None else base.shared_with_groups.all(),
            )
        return Response(_detail(base))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str) -> Response:
        """Delete the base with its documents (the owner or staff only)."""
        ingest.delete_base(_base_for(request, slug, perm="knowledge.delete_knowledgebase"))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DocumentListApi(APIView):
    parser_classes = [JSONParser, MultiPartParser]

    @extend_schema(parameters=window_parameters(MAX_LIMIT), responses=DocumentOutput(many=True))
    def get(self, request: Request, slug: str) -> Response:
        """List the base's documents, newest first, with their ingestion status."""
        documents: QuerySet[Document] = selectors.base_documents(_base_for(request, slug))
        page = window(documents, request, default_limit=MAX_LIMIT)
        return Response(DocumentOutput(page, many=True).data)

    @extend_schema(
        # A multipart upload (field `file`) is read too, and is the way for large files, but
        # is not documented: daphne (Twisted) answers a multipart body it cannot parse with a
        # bare 400 before the app sees it.
        request=DocumentUploadInput,
        responses={
            201: OpenApiResponse(DocumentUploadOutput, description="stored, ingestion queued"),
            200: OpenApiResponse(DocumentUploadOutput, description="the same file was there"),
        },
    )
    def post(self, request: Request, slug: str) -> Response:
        """Add a document (text, Markdown, HTML, PDF or DOCX): a multipart upload of field
        `file`, or a JSON body with its base64-encoded content (as large as a JSON body may be).

        It is converted at once: a file that cannot be read is a 400 saying why, and nothing
        is stored. Chunking and embedding go on in the background (`status`, `progress`).
        """
        base = _base_for(request, slug, perm="knowledge.change_knowledgebase")
        try:
            name, data, content_type = _uploaded(request)
            document, created = ingest.add_document(base, request.user, name, data, content_type)
        except FileTooLarge as exc:
            return Response(
                {"errors": [f"file: {exc}"]}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
            )
        except ConversionError as exc:
            raise InputRefused([f"file: {exc}"]) from None
        return Response(
            {**DocumentOutput(document).data, "created": created},
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


def _uploaded(request: Request) -> tuple[str, bytes, str | None]:
    """Return the uploaded file's name, bytes and media type (multipart or JSON)."""
    upload = request.FILES.get("file")
    if upload is not None:
        # Refused before reading: an upload may be far larger than memory should hold.
        check_size(upload.size or 0)
        return upload.name or "", upload.read(), upload.content_type
    if isinstance(request.data, QueryDict):  # a form without the file
        raise InputRefused(["file: upload the document as multipart field 'file'"])
    body = DocumentUploadInput(data=request.data)
    body.is_valid(raise_exception=True)
    fields = body.validated_data
    return fields["filename"], fields["content_base64"], fields["content_type"] or None


class DocumentDetailApi(APIView):
    def _document(self, request: Request, slug: str, document_id: str) -> Document:
        base = _base_for(request, slug)
        document = selectors.base_document(base, int(document_id))
        if document is None:
            raise NotFound(f"No document {document_id} in '{slug}'.")
        return document

    @extend_schema(responses=DocumentOutput)
    def get(self, request: Request, slug: str, document_id: str) -> Response:
        """Return the document with its ingestion status, progress and error."""
        return Response(DocumentOutput(self._document(request, slug, document_id)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str, document_id: str) -> Response:
        """Delete the document and its chunks."""
        document = self._document(request, slug, document_id)
        if not request.user.has_perm("knowledge.change_knowledgebase", document.knowledge_base):
            raise PermissionDenied("You may not change this knowledge base.")
        ingest.delete_document(document)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SearchApi(APIView):
    @extend_schema(parameters=[SearchInput], responses={200: SearchOutput})
    def get(self, request: Request, slug: str) -> Response:
        """Search the base: full text, by meaning (its embedding actor), or both (hybrid)."""
        base = _base_for(request, slug)
        params = SearchInput(data=request.query_params)
        params.is_valid(raise_exception=True)
        query = params.validated_data
        try:
            hits = search.search(
                base,
                query["q"],
                mode=query["mode"],
                top_k=query["top_k"],
                min_score=query["min_score"],
            )
        except search.SearchError as exc:
            raise InputRefused([f"$: {exc}"]) from None
        return Response(
            {"query": query["q"], "mode": query["mode"], "hits": [hit.as_json() for hit in hits]}
        )

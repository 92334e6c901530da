"""The recipes API (DESIGN.md §5): actors, recipes CRUD, import, export, publish, lint."""

from __future__ import annotations

from django.conf import settings
from django.db.models import F
from django.http import HttpResponse, QueryDict
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import permissions, status, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.parsers import FileUploadParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .. import selectors, services
from ..adapters import document_from_recipe
from ..models import Actor, Recipe
from ..recipe_format import json_schema
from ..validators import WHOLE_NUMBER, RecipeRejected, whole_number
from .pagination import MAX_LIMIT, TOTAL_COUNT_HEADER, cursor_page, cursor_parameters
from .parsers import JSONParser, MultiPartParser
from .schema import JSON, RECIPE_DOCUMENT, WHOLE_NUMBER_MAX, errors
from .serializers import (
    ActorSerializer,
    ImportOutput,
    LintOutput,
    PublishInput,
    RecipeDetailOutput,
    RecipePatchInput,
    RecipeSummarySerializer,
    RecipeUpdateInput,
    VersionSerializer,
)


class IsStaffOrReadOnly(permissions.BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return bool(request.user and request.user.is_authenticated)
        return bool(request.user and request.user.is_staff)


@extend_schema_view(
    update=extend_schema(responses={200: ActorSerializer, **errors(409)}),
    partial_update=extend_schema(responses={200: ActorSerializer, **errors(409)}),
    destroy=extend_schema(responses={204: None, **errors(409)}),
)
class ActorViewSet(viewsets.ModelViewSet):
    """Actors are shared by everyone; only staff change them. API keys stay in env vars.

    An actor that published versions name cannot be deleted, renamed or change kind (409).
    """

    serializer_class = ActorSerializer
    permission_classes = [IsStaffOrReadOnly]
    queryset = selectors.actors_list()
    # An id in ASCII digits that fits a bigint, or no actor (404), never a 500.
    lookup_value_regex = WHOLE_NUMBER

    def perform_update(self, serializer: ActorSerializer) -> None:
        serializer.instance = services.actor_update(
            actor=serializer.instance, changes=serializer.validated_data
        )

    def perform_destroy(self, instance: Actor) -> None:
        services.actor_delete(actor=instance)


def _recipe_for(request: Request, slug: str, *, perm: str = "workflows.change_recipe") -> Recipe:
    recipe = selectors.recipe_get(user=request.user, slug=slug)
    if not request.user.has_perm(perm, recipe):
        raise PermissionDenied("You may not change this recipe.")
    return recipe


def _recipe_detail(recipe: Recipe) -> dict:
    return {
        **RecipeSummarySerializer(recipe).data,
        "shared_with_users": [u.username for u in recipe.shared_with_users.all()],
        "shared_with_groups": [g.name for g in recipe.shared_with_groups.all()],
        "versions": VersionSerializer(recipe.versions.published(), many=True).data,
        "document": document_from_recipe(recipe),
    }


def _import_data(request: Request) -> str | bytes | dict:
    upload = request.FILES.get("file")
    if upload is not None:
        limit = settings.RECIPE_MAX_BYTES
        if upload.size > limit:
            # Refused before reading: an upload may be far larger than memory should hold.
            raise RecipeRejected([f"$: the file is {upload.size} bytes; the limit is {limit}"])
        return upload.read()
    # A form body (QueryDict) holds lists of strings, not a recipe: it must carry the file.
    if (
        isinstance(request.data, dict)
        and not isinstance(request.data, QueryDict)
        and "file" not in request.data
    ):
        return dict(request.data)
    raise ValidationError({"file": "send the recipe as a JSON body, or upload it as 'file'"})


# What `?replace=` may say (a flag a client may write several ways).
REPLACE_FLAGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


class RecipeListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("q", str, description="search in name, slug, description"),
            *cursor_parameters(MAX_LIMIT),
            TOTAL_COUNT_HEADER,
        ],
        responses=RecipeSummarySerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """The recipes the caller may see, by name."""
        query = request.query_params.get("q", "").strip()
        recipes = selectors.recipes_listed(request.user, query=query)
        # Counted: a user sees few recipes, and the search reads them all anyway.
        page = cursor_page(recipes, request, default_limit=MAX_LIMIT, count=True)
        return Response(RecipeSummarySerializer(page.items, many=True).data, headers=page.headers)

    @extend_schema(request={JSON: RECIPE_DOCUMENT}, responses={201: ImportOutput, **errors(409)})
    def post(self, request: Request) -> Response:
        """Create a recipe from a format-v1 document."""
        result = services.recipe_import(user=request.user, data=_import_data(request))
        return Response(
            {"slug": result.recipe.slug, "name": result.recipe.name, "warnings": result.warnings},
            status=status.HTTP_201_CREATED,
        )


class RecipeDetailApi(APIView):
    @extend_schema(responses=RecipeDetailOutput)
    def get(self, request: Request, slug: str) -> Response:
        return Response(_recipe_detail(selectors.recipe_get(user=request.user, slug=slug)))

    @extend_schema(request=RecipeUpdateInput, responses={200: RecipeDetailOutput, **errors(409)})
    def put(self, request: Request, slug: str) -> Response:
        """Replace the draft (one with errors is kept as written); send the `revision` you edited
        to be told of a conflicting save."""
        recipe = _recipe_for(request, slug)
        data = RecipeUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        saved = services.recipe_draft_save(
            recipe=recipe,
            document=data.validated_data["document"],
            expected_revision=data.validated_data.get("revision"),
        )
        # A draft with errors is saved as written; `errors` lists what publishing will refuse.
        return Response(
            {**_recipe_detail(recipe), "warnings": saved.warnings, "errors": saved.errors}
        )

    @extend_schema(request=RecipePatchInput, responses=RecipeDetailOutput)
    def patch(self, request: Request, slug: str) -> Response:
        """Rename, describe, or share the recipe."""
        recipe = _recipe_for(request, slug)
        data = RecipePatchInput(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        edits = {name: fields[name] for name in ("name", "description") if name in fields}
        if edits:
            # Name and description are part of the draft document: bump its revision, so a
            # PUT made from the previous revision is refused instead of undoing this edit.
            held = {}
            if recipe.draft_document is not None:  # a draft saved with errors holds them too
                held = {"draft_document": {**recipe.draft_document, **edits}}
            Recipe.objects.filter(pk=recipe.pk).update(
                **edits, **held, revision=F("revision") + 1, updated_at=timezone.now()
            )
            recipe.refresh_from_db()
        if "shared_with_users" in fields or "shared_with_groups" in fields:
            services.recipe_share(
                recipe=recipe,
                users=fields.get("shared_with_users", list(recipe.shared_with_users.all())),
                groups=fields.get("shared_with_groups", list(recipe.shared_with_groups.all())),
            )
        return Response(_recipe_detail(recipe))

    @extend_schema(responses={204: None, **errors(409)})
    def delete(self, request: Request, slug: str) -> Response:
        services.recipe_delete(recipe=_recipe_for(request, slug, perm="workflows.delete_recipe"))
        return Response(status=status.HTTP_204_NO_CONTENT)


class RecipeImportApi(APIView):
    parser_classes = [JSONParser, MultiPartParser, FileUploadParser]

    @extend_schema(
        parameters=[OpenApiParameter("replace", bool, description="replace an existing draft")],
        # A multipart upload is read too, but not documented: daphne (Twisted) answers a
        # multipart body it cannot parse with a bare 400 before the app sees it.
        request={JSON: RECIPE_DOCUMENT},
        responses={201: ImportOutput, 200: ImportOutput, **errors(409)},
    )
    def post(self, request: Request) -> Response:
        """Import a recipe file (JSON or YAML): a JSON body, or a multipart upload named 'file'."""
        replace = request.query_params.get("replace", "false").lower()
        if replace not in REPLACE_FLAGS:
            raise ValidationError({"replace": "true or false"})
        result = services.recipe_import(
            user=request.user, data=_import_data(request), replace=REPLACE_FLAGS[replace]
        )
        return Response(
            {"slug": result.recipe.slug, "name": result.recipe.name, "warnings": result.warnings},
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )


class RecipeExportApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "version",
                {"type": "integer", "minimum": 1, "maximum": WHOLE_NUMBER_MAX},
                description="export a published version",
            )
        ],
        responses={200: RECIPE_DOCUMENT},
    )
    def get(self, request: Request, slug: str) -> Response:
        recipe = selectors.recipe_get(user=request.user, slug=slug)
        number = request.query_params.get("version")
        if number is None:
            document = document_from_recipe(recipe)
        else:
            wanted = whole_number(number)
            if not wanted:
                raise ValidationError({"version": f"no version {number} of '{slug}'"})
            version = recipe.versions.published().filter(number=wanted).first()
            if version is None:
                raise NotFound(f"No version {number} of '{slug}'.")
            document = version.document
        response = Response(document)
        response["Content-Disposition"] = f'attachment; filename="{slug}.json"'
        return response


class RecipePublishApi(APIView):
    @extend_schema(request=PublishInput, responses={201: VersionSerializer})
    def post(self, request: Request, slug: str) -> Response:
        recipe = _recipe_for(request, slug)
        data = PublishInput(data=request.data)
        data.is_valid(raise_exception=True)
        version = services.recipe_publish(
            recipe=recipe, user=request.user, note=data.validated_data["note"]
        )
        return Response(VersionSerializer(version).data, status=status.HTTP_201_CREATED)


class RecipeVersionsApi(APIView):
    @extend_schema(responses=VersionSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        recipe = selectors.recipe_get(user=request.user, slug=slug)
        return Response(VersionSerializer(recipe.versions.published(), many=True).data)


class RecipeLintApi(APIView):
    @extend_schema(responses=LintOutput)
    def get(self, request: Request, slug: str) -> Response:
        recipe = selectors.recipe_get(user=request.user, slug=slug)
        return Response({"warnings": services.recipe_lint(recipe=recipe)})


class RecipeFormatSchemaApi(APIView):
    """The JSON Schema of recipe format v1."""

    @extend_schema(responses=dict)
    def get(self, request: Request) -> HttpResponse:
        return Response(json_schema())

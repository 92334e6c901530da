from __future__ import annotations

from django.urls import include, re_path
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.routers import DefaultRouter

from .apis import views
from .apis.parsers import FormParser, JSONParser, MultiPartParser

router = DefaultRouter()
router.register("actors", views.ActorViewSet, basename="actor")


def api(route: str, view, name: str):  # type: ignore[no-untyped-def]
    """Route `route` with or without a trailing slash (DESIGN.md writes both)."""
    return re_path(rf"^{route}/?$", view, name=name)


# DRF's token view names its own parsers: give it ours, which refuse malformed input cleanly.
obtain_auth_token = ObtainAuthToken.as_view(
    parser_classes=[JSONParser, FormParser, MultiPartParser]
)

SLUG = r"(?P<slug>[a-z0-9][a-z0-9_-]*)"

urlpatterns = [
    api("auth/token", obtain_auth_token, "api-token"),
    api("recipes", views.RecipeListApi.as_view(), "recipe-list"),
    api("recipes/import", views.RecipeImportApi.as_view(), "recipe-import"),
    api("recipes/format-schema", views.RecipeFormatSchemaApi.as_view(), "recipe-format-schema"),
    api(f"recipes/{SLUG}", views.RecipeDetailApi.as_view(), "recipe-detail"),
    api(f"recipes/{SLUG}/export", views.RecipeExportApi.as_view(), "recipe-export"),
    api(f"recipes/{SLUG}/publish", views.RecipePublishApi.as_view(), "recipe-publish"),
    api(f"recipes/{SLUG}/versions", views.RecipeVersionsApi.as_view(), "recipe-versions"),
    api(f"recipes/{SLUG}/lint", views.RecipeLintApi.as_view(), "recipe-lint"),
    re_path(r"^", include(router.urls)),
]

from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.utils.functional import lazy
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from runner.metrics import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico whatever a page links; the icon is a static file (lazy: the
    # static files storage is read when asked, not at import).
    path(
        "favicon.ico",
        RedirectView.as_view(url=lazy(static, str)("favicon.ico"), permanent=True),
        name="favicon",
    ),
    # Prometheus scrapes /metrics, without a trailing slash, by default.
    path("metrics", metrics_view, name="metrics"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/", include("runner.urls")),
    path("api/", include("workflows.urls")),
    path("api/", include("knowledge.urls")),
    path("api/", include("tools.urls")),
    path("api/", include("triggers.urls")),
    path("", include("editor.urls")),
]

# Errors raised outside views, and addresses nothing serves: JSON under /api/, and 503 for an
# outage (config/middleware.py).
handler400 = "config.middleware.bad_request"
handler403 = "config.middleware.permission_denied"
handler404 = "config.middleware.page_not_found"
handler500 = "config.middleware.server_error"

"""ASGI entry point: HTTP through Django, websockets through Channels."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from config.middleware import RefuseUnstorableCredentials, SessionUser  # noqa: E402
from runner.websocket_urls import websocket_urlpatterns  # noqa: E402

if settings.EMBEDDED_WORKER:
    from runner import embedded

    embedded.start()

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            RefuseUnstorableCredentials(SessionUser(URLRouter(websocket_urlpatterns)))
        ),
    }
)

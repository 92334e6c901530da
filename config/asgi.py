"""ASGI entry point: HTTP through Django, websockets through Channels."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from autobahn import util as autobahn_util  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from config.middleware import RefuseUnstorableCredentials, SessionUser  # noqa: E402
from runner.websocket_urls import websocket_urlpatterns  # noqa: E402

if settings.EMBEDDED_WORKER:
    from runner import embedded

    embedded.start()

# autobahn (daphne's websocket protocol) colours the arguments of its debug log lines with click,
# which Celery installs, for every frame it sends, whether debug logging is on or not: about a
# tenth of what sending a frame costs the server (benchmarks/ws_fanout.py). Its plain-text
# fallback for a machine without click gives the same log lines, uncoloured.
autobahn_util._HAS_CLICK = False

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            RefuseUnstorableCredentials(SessionUser(URLRouter(websocket_urlpatterns)))
        ),
    }
)

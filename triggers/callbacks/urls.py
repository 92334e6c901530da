"""The callbacks' API routes (under /api/, through triggers/urls.py)."""

from __future__ import annotations

from workflows.urls import api
from workflows.validators import WHOLE_NUMBER

from . import apis

RUN = f"runs/(?P<run_id>{WHOLE_NUMBER})"
DELIVERY = (
    r"(?P<delivery_id>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
)

urlpatterns = [
    api(f"{RUN}/callbacks", apis.RunCallbacksApi.as_view(), "run-callbacks"),
    api(
        f"{RUN}/callbacks/{DELIVERY}/resend",
        apis.CallbackResendApi.as_view(),
        "run-callback-resend",
    ),
]

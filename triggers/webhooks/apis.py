"""`POST /api/hooks/{slug}/{name}`: another system starts a run (DESIGN.md §9).

No session or token: the request's Standard Webhooks signature is its authentication, and the
run belongs to the recipe's owner. The body is read as bytes, since the signature covers them.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.apis.schema import ErrorOutput

from . import services


class WebhookDeliveryOutput(serializers.Serializer):
    run = serializers.IntegerField(help_text="the id of the run the delivery started")
    url = serializers.URLField(help_text="the run in the API")
    delivery = serializers.IntegerField(help_text="the id of the recorded delivery")
    webhook_id = serializers.CharField(help_text="the message's `webhook-id`")
    repeat = serializers.BooleanField(
        help_text="true when an earlier delivery of this `webhook-id` started the run"
    )


def _refusal(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorOutput, description=description)


SIGNATURE_HEADERS = [
    OpenApiParameter(
        header,
        str,
        OpenApiParameter.HEADER,
        required=True,
        description=description,
    )
    for header, description in (
        (services.ID_HEADER, "the message's id: a repeat of an accepted id gets its run back"),
        (services.TIMESTAMP_HEADER, "when it was signed, in Unix seconds (5 minutes' tolerance)"),
        (
            services.SIGNATURE_HEADER,
            "`v1,BASE64` signatures of `id.timestamp.body`, space separated",
        ),
    )
]


class WebhookApi(APIView):
    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    parser_classes: list[Any] = []

    @extend_schema(
        request={"application/json": {"type": "object"}},
        parameters=SIGNATURE_HEADERS,
        responses={
            200: WebhookDeliveryOutput,
            201: WebhookDeliveryOutput,
            401: _refusal("The signature is missing, forged, stale or replayed."),
            409: _refusal("The recipe is not published, or its version cannot run."),
            413: _refusal("The body is larger than WEBHOOK_MAX_BYTES."),
            422: _refusal("The payload does not give the recipe's inputs (each one is named)."),
            429: _refusal("The hook's deliveries a minute are used up; retry after Retry-After."),
            503: _refusal("The hook's secret is not set on the server."),
        },
    )
    def post(self, request: Request, slug: str, name: str) -> Response:
        """Start a run from a signed delivery: 201 with the run, 200 with the same run for a
        repeat of an accepted `webhook-id`."""
        limit = settings.WEBHOOK_MAX_BYTES
        body = request._request.read(limit + 1)
        if len(body) > limit:
            return _errors(413, [f"$: the body is larger than {limit} bytes"])
        try:
            received = services.webhook_receive(
                slug=slug, name=name, body=body, headers=request.headers
            )
        except services.HookRefused as exc:
            response = _errors(exc.status, exc.errors)
            if exc.retry_after is not None:
                response["Retry-After"] = str(exc.retry_after)
            return response
        run = received.run
        output = WebhookDeliveryOutput(
            {
                "run": run.pk,
                "url": request.build_absolute_uri(reverse("run-detail", kwargs={"run_id": run.pk})),
                "delivery": received.delivery.pk,
                "webhook_id": received.delivery.webhook_id,
                "repeat": received.repeat,
            }
        )
        code = status.HTTP_200_OK if received.repeat else status.HTTP_201_CREATED
        return Response(output.data, status=code)


def _errors(code: int, errors: list[str]) -> Response:
    return Response({"errors": errors}, status=code)

"""The API of a run's callbacks: `GET /api/runs/{id}/callbacks` lists its deliveries with
their attempts; `POST /api/runs/{id}/callbacks/{delivery}/resend` sends one again."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from runner.selectors import run_get
from workflows.apis.schema import errors

from . import selectors, services
from .models import CallbackAttempt, CallbackDelivery


class AttemptOutput(serializers.ModelSerializer):
    class Meta:
        model = CallbackAttempt
        fields = [
            "number",
            "manual",
            "started_at",
            "status_code",
            "latency_ms",
            "error",
            "next_attempt_at",
        ]


class CallbackDeliveryOutput(serializers.ModelSerializer):
    id = serializers.CharField(help_text="the message's webhook-id")
    attempt_log = AttemptOutput(many=True, read_only=True)

    class Meta:
        model = CallbackDelivery
        # The env var's name is shown, never its value.
        fields = [
            "id",
            "event_seq",
            "event_type",
            "url",
            "secret_env",
            "status",
            "attempts",
            "next_attempt_at",
            "created_at",
            "delivered_at",
            "payload",
            "attempt_log",
        ]


class RunCallbacksApi(APIView):
    @extend_schema(responses=CallbackDeliveryOutput(many=True))
    def get(self, request: Request, run_id: int) -> Response:
        run = run_get(user=request.user, run_id=run_id)
        return Response(CallbackDeliveryOutput(selectors.run_deliveries(run), many=True).data)


class CallbackResendApi(APIView):
    @extend_schema(request=None, responses={202: CallbackDeliveryOutput, **errors(409)})
    def post(self, request: Request, run_id: int, delivery_id: str) -> Response:
        run = run_get(user=request.user, run_id=run_id)
        delivery = selectors.delivery_of_run(run=run, delivery_id=delivery_id)
        if not selectors.may_resend(request.user, run):
            raise PermissionDenied("You may not change this run's recipe.")
        try:
            delivery = services.delivery_resend(delivery=delivery)
        except services.DeliveryBusy as exc:
            return Response({"errors": [str(exc)]}, status=status.HTTP_409_CONFLICT)
        return Response(CallbackDeliveryOutput(delivery).data, status=status.HTTP_202_ACCEPTED)

"""The deliveries an inbound webhook received (those whose signature was valid)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from runner.models import Run
from workflows.models import Recipe


class WebhookDelivery(models.Model):
    """One signed request to a recipe's hook: the run it started, or why it was refused.

    A forged, stale or replayed request leaves no row. The sender's `webhook-id` names the
    message: a repeat of an accepted one (sent again, signed afresh) gets the same run back,
    so at most one accepted delivery holds each id. Only the body's hash is kept: payloads
    may carry what the sender would not have stored.
    """

    class Status(models.TextChoices):
        ACCEPTED = "accepted", "accepted"
        REFUSED = "refused", "refused"

    recipe = models.ForeignKey(
        Recipe, on_delete=models.CASCADE, related_name="webhook_deliveries", db_index=False
    )
    hook = models.CharField(max_length=100)
    webhook_id = models.CharField(max_length=255)
    # The message's `webhook-timestamp`, as signed: the same id at the same time is a replay.
    signed_at = models.DateTimeField()
    body_sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=Status.choices)
    http_status = models.PositiveSmallIntegerField()
    error = models.TextField(blank=True)
    run = models.OneToOneField(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="webhook_delivery"
    )
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["recipe", "hook", "webhook_id"],
                condition=models.Q(status="accepted"),
                name="one_accepted_delivery_per_webhook_id",
            ),
        ]
        indexes = [
            models.Index(fields=["recipe", "hook", "webhook_id"], name="webhook_delivery_id_idx"),
            models.Index(
                fields=["recipe", "hook", "-received_at"], name="webhook_delivery_newest_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.hook} {self.webhook_id} ({self.status})"

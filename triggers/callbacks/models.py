"""Callback deliveries and their attempts: what was sent to whom, and how each try went.

No secret is stored: a delivery keeps the name of the env var its secret is read from at
each attempt, never the secret or the signature made with it.
"""

from __future__ import annotations

import uuid

from django.db import models

from runner.models import Run


class CallbackDelivery(models.Model):
    """One message: an event of a run, for one of its recipe's callbacks.

    Its id is the message's `webhook-id` (Standard Webhooks): the same on every attempt and on
    a "Send again", so that a receiver can tell a message it has already handled.
    """

    class Status(models.TextChoices):
        PENDING = "pending"  # an attempt is queued or scheduled
        DELIVERED = "delivered"  # the receiver answered 2xx
        FAILED = "failed"  # refused for good, or still failing after a day of retries

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="callback_deliveries")
    event_seq = models.PositiveIntegerField(help_text="the event's number in the run's log")
    event_type = models.CharField(max_length=50)
    # The callback's position in the recipe version's `callbacks`.
    callback_index = models.PositiveSmallIntegerField()
    url = models.CharField(max_length=2000)
    secret_env = models.CharField(max_length=200, help_text="the env var's name, not its value")
    # The message's JSON body (type, timestamp, data), the same on every attempt.
    payload = models.JSONField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0, help_text="attempts made so far")
    # The first attempt of the current series of retries (1, or the attempt of a "Send
    # again"): the backoff and the day of retries count from it.
    series_first = models.PositiveIntegerField(default=1)
    series_started_at = models.DateTimeField(auto_now_add=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "event_seq", "callback_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "event_seq", "callback_index"], name="one_delivery_per_event"
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status="pending"),
                name="triggers_callback_due_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} of run {self.run_id} to {self.url}"


class CallbackAttempt(models.Model):
    """One POST of a delivery: its answer's status code, how long it took, or why it failed."""

    delivery = models.ForeignKey(
        CallbackDelivery, on_delete=models.CASCADE, related_name="attempt_log"
    )
    number = models.PositiveIntegerField(help_text="the delivery's attempt, from 1")
    manual = models.BooleanField(default=False, help_text='made by a "Send again"')
    started_at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    # When the next attempt is scheduled, if this one failed and the delivery goes on.
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="one_attempt_per_number"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery_id}"

    @property
    def succeeded(self) -> bool:
        """Tell whether the receiver took the message (answered 2xx)."""
        return self.status_code is not None and 200 <= self.status_code < 300

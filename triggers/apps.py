"""What starts runs and what hears of them besides people: schedules, inbound webhooks and
callbacks out. Each is one module (with its models, services and API); the editor's Triggers
tab shows them."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_save


class TriggersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "triggers"
    verbose_name = "Triggers (schedules, webhooks, callbacks)"

    def ready(self) -> None:
        from runner import embedded
        from runner.signals import run_events_committed
        from workflows.models import RecipeVersion

        from .callbacks import tasks  # noqa: F401 (registers the Celery tasks)
        from .callbacks.hooks import callbacks_sweep, on_events_committed
        from .schedules import services

        # The runner says when events are committed; it may not import this app.
        run_events_committed.connect(on_events_committed, dispatch_uid="triggers.callbacks")
        # Publishing a version makes its schedules the recipe's, in the publish transaction.
        post_save.connect(
            services.on_version_saved, sender=RecipeVersion, dispatch_uid="triggers-schedules"
        )
        # The embedded default has no beat process: its beat thread runs the round.
        embedded.add_duty(services.schedules_tick)
        embedded.add_duty(callbacks_sweep)

from django.apps import AppConfig


class RunnerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runner"
    verbose_name = "Runs"

    def ready(self) -> None:
        """Set up tracing once in every process that loads the apps: web servers (and the
        embedded worker inside them), `celery worker` (its pool's forks restart the export
        thread), management commands. Off unless an OTLP endpoint is set."""
        # They read the models, which load only once the apps are ready; run_files's receiver
        # deletes a run's files' blobs with their rows.
        from . import run_files, tracing  # noqa: F401

        tracing.setup()

from django.apps import AppConfig


class RunnerConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runner"
    verbose_name = "Runs"

    def ready(self) -> None:
        """Set up tracing once in every process that loads the apps: web servers (and the
        embedded worker inside them), `celery worker` (its pool's forks restart the export
        thread), management commands. Off unless an OTLP endpoint is set."""
        from . import tracing  # it reads the models, which load only once the apps are ready

        tracing.setup()

"""Recipe tests: a saved dry run (inputs and scripted answers) with the path it should take."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runner.models import Run
from workflows.models import Recipe


class RecipeTest(models.Model):
    """A test case of a recipe; its result and the branches it took come from its last run."""

    class Result(models.TextChoices):
        NOT_RUN = "", "not run"
        RUNNING = "running", "running"
        PASSED = "passed", "passed"
        FAILED = "failed", "failed"
        ERROR = "error", "could not run"

    recipe = models.ForeignKey(Recipe, on_delete=models.CASCADE, related_name="tests")
    name = models.CharField(max_length=200)
    inputs = models.JSONField(default=dict, blank=True)
    # Per actor alias, the scripted answers in order (DESIGN.md §4, dry runs).
    script = models.JSONField(default=dict, blank=True)
    # Step keys in the order the run should execute them.
    expected_path = models.JSONField(default=list)
    # The run status the test expects, e.g. "succeeded"; blank accepts any finished status.
    expected_status = models.CharField(max_length=20, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The real run the test was recorded from (its answers are the script); kept when the run
    # is deleted, since the test holds everything it needs.
    source_run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="recorded_tests"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    last_run_id = models.BigIntegerField(null=True, blank=True)
    last_result = models.CharField(max_length=10, choices=Result.choices, blank=True)
    last_path = models.JSONField(default=list, blank=True)
    # [[step key, branch name], ...] the last run took.
    last_taken = models.JSONField(default=list, blank=True)
    last_message = models.CharField(max_length=500, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["recipe", "name"]
        constraints = [
            models.UniqueConstraint(fields=["recipe", "name"], name="unique_test_name_per_recipe"),
        ]

    def __str__(self) -> str:
        return f"{self.recipe.slug}: {self.name}"

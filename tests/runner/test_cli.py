"""`manage.py run_recipe`: start a run from the terminal and follow it."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from runner.models import Run
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_runs_a_recipe_and_prints_its_progress(worker: Any, story_recipe: Recipe) -> None:
    out = StringIO()

    call_command(
        "run_recipe", "story", "--input", "topic=owls", "--wait", "--timeout", "20", stdout=out
    )

    printed = out.getvalue()
    assert "queued" in printed
    assert "▶ #1 write (llm, actor writer)" in printed
    assert "great: judge scored 9" in printed
    assert printed.rstrip().endswith("succeeded (approved)")
    assert Run.objects.get().status == "succeeded"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no recipe 'nope'"),
        (["story"], "inputs.topic: required"),
        (["story", "--input", "topic"], "--input takes NAME=VALUE"),
        (["story", "--input", "topic=x", "--script", "{"], "--script is not JSON"),
    ],
)
def test_it_explains_what_is_wrong(story_recipe: Recipe, args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("run_recipe", *args)
    assert Run.objects.count() == 0

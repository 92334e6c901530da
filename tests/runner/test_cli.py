"""`manage.py run_recipe`: start a run from the terminal and follow it."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from runner.models import Run
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


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


def test_it_starts_a_run_per_line_of_an_inputs_file_and_waits_for_them_all(
    worker: Any, story_recipe: Recipe, tmp_path: Path
) -> None:
    inputs = tmp_path / "topics.jsonl"
    inputs.write_text('{"topic": "owls"}\n\n{"topic": "tides"}\n{"topic": "lamps"}\n')
    out = StringIO()

    call_command(
        "run_recipe", "story", "--inputs-file", str(inputs), "--wait", "--timeout", "30", stdout=out
    )

    printed = out.getvalue()
    assert "3 runs of story v1 queued" in printed
    assert printed.rstrip().endswith("3 succeeded")
    assert sorted(Run.objects.values_list("inputs__topic", flat=True)) == ["lamps", "owls", "tides"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"topic": "owls"}\n{"topic": 3}\n', r"no run started(.|\n)*line 2: inputs.topic"),
        ('{"topic": "owls"}\n{"topic": \n', "line 2: not JSON"),
        ('["owls"]\n', "line 1: not an object of inputs"),
        ("\n\n", "no line of inputs"),
    ],
)
def test_an_inputs_file_with_a_bad_line_starts_nothing_and_names_the_line(
    story_recipe: Recipe, tmp_path: Path, text: str, message: str
) -> None:
    inputs = tmp_path / "topics.jsonl"
    inputs.write_text(text)

    with pytest.raises(CommandError, match=message):
        call_command("run_recipe", "story", "--inputs-file", str(inputs))
    assert Run.objects.count() == 0


def test_it_says_where_to_decide_when_the_run_waits_for_a_reviewer(
    worker: Any, story_recipe: Recipe
) -> None:
    out = StringIO()

    with pytest.raises(CommandError, match="still waiting_human after 8 s; it goes on"):
        call_command(
            "run_recipe",
            "story",
            "--input",
            "topic=owls",
            "--script",
            '{"judge": ["2"]}',
            "--wait",
            "--timeout",
            "8",
            stdout=out,
        )

    task = Run.objects.get().tasks.get()
    assert "The run waits for a reviewer of 'test-editors'" in out.getvalue()
    assert f"/api/tasks/{task.pk}/decide" in out.getvalue()


@pytest.mark.slow  # a fresh database migrated and seeded in processes of its own: a minute
def test_the_readme_example_works_in_a_fresh_shell(tmp_path: Path) -> None:
    """Run the README's `run_recipe` line as printed, with nothing but PATH in the environment
    (no SECRET_KEY), on a database `make run` would have migrated and seeded."""
    readme = (ROOT / "README.md").read_text()
    line = next(
        line for line in readme.splitlines() if "manage.py run_recipe creative-writing-qc" in line
    )
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    for setup in ("migrate --noinput", "seed_demo"):
        subprocess.run(
            f"DEBUG=1 .venv/bin/python manage.py {setup}",
            shell=True,
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )

    done = subprocess.run(
        line.replace(".venv/bin/python", sys.executable) + " --timeout 15",
        shell=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert "The run waits for a reviewer of 'editors'" in done.stdout, done.stderr
    assert "it goes on without this command" in done.stderr


def test_it_does_not_say_the_run_waits_when_a_script_decides(
    worker: Any, story_recipe: Recipe
) -> None:
    out = StringIO()

    call_command(
        "run_recipe",
        "story",
        "--input",
        "topic=owls",
        "--script",
        '{"judge": ["2"], "editors": ["approve"]}',
        "--wait",
        "--timeout",
        "20",
        stdout=out,
    )

    assert "waits for a reviewer" not in out.getvalue()
    assert "script chose approve" in out.getvalue()

"""Design note 000's instruction 100 through a real run: its branch set as the note writes it
(two branches at priority 3), a timeout that passes the branches reading the answer, and
`model_timeout` asking its alternative actor twice (`max_retries: 2`)."""

from __future__ import annotations

from typing import Any

import pytest

from runner import services
from runner.models import Run
from runner.status import RunStatus, StepStatus
from tests.factories import JUDGE, WRITER, ActorFactory
from tests.runner.recipes import drive, publish_document
from tests.workflows.test_note_branches import note_document

pytestmark = pytest.mark.django_db

# The scripted actor's own reason for its failure (the step's timeout_s is 300).
NOT_APPLICABLE = "not applicable: the step failed: scripted timeout after 300 s"

LONG_STORY = (
    "Once upon a time a lighthouse keeper found a map inside a bottle. She followed it along "
    "the cliffs, past the old harbour and the sleeping boats, to a cave where the tide kept a "
    "chest of letters that sailors had written home and never sent."
)


def steps(run: Run) -> list[tuple[str, str, str]]:
    return [(s.step_key, s.actor_alias, s.status) for s in run.steps.order_by("seq")]


def test_a_timeout_takes_model_timeout_and_asks_the_alternative_twice(owner: Any) -> None:
    ActorFactory(name=WRITER, config={"replies": ["@timeout"]})
    ActorFactory(name="note-dolphin", config={"replies": ["@timeout", LONG_STORY]})
    ActorFactory(name=JUDGE, config={"replies": ["9"]})
    recipe = publish_document(owner, note_document())

    run = drive(services.run_start(user=owner, recipe=recipe, inputs={"topic": "owls"}))

    timed_out = StepStatus.TIMED_OUT
    assert steps(run) == [
        ("generate_story", "writer", timed_out),
        ("generate_story", "dolphin", timed_out),
        ("generate_story", "dolphin", StepStatus.SUCCEEDED),
    ]
    first, second, third = run.steps.order_by("seq")
    for failed in (first, second):
        evaluations = [(e.branch, e.matched, e.taken, e.reason) for e in failed.evaluations.all()]
        # The four branches that read the answer are passed over; the timeout is handled.
        assert evaluations[:4] == [
            ("story_too_short", False, False, NOT_APPLICABLE),
            ("inappropriate_content", False, False, NOT_APPLICABLE),
            ("high_quality_story", False, False, NOT_APPLICABLE),
            ("enhance_prompt", False, False, NOT_APPLICABLE),
        ]
        assert evaluations[4][:3] == ("model_timeout", True, True)
    taken = [e.branch for e in third.evaluations.all() if e.taken]
    assert taken == ["high_quality_story"]  # the judge scored the alternative's story 9
    assert run.status == RunStatus.SUCCEEDED

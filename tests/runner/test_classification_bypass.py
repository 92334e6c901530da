"""A classification bypassed for the whole deployment (CLASSIFICATION_BYPASS) or for one run
(`"classification": "bypass"` at its start): classify steps select their always-active routes
without asking their model, and say why in their record."""

from __future__ import annotations

from typing import Any

import pytest

from runner.models import ModelCall, Run
from tests.conftest import api_client
from tests.factories import ActorFactory
from tests.runner.recipes import DEFAULT, branch, drive, publish_document
from workflows.models import Recipe

pytestmark = pytest.mark.django_db

ROUTES = [
    {"name": "billing", "instructions": "About an invoice."},
    {"name": "respond", "instructions": "Always answer.", "always_active": True},
]


@pytest.fixture
def owner_api(owner: Any) -> Any:
    return api_client(owner)


@pytest.fixture
def recipe(owner: Any) -> Recipe:
    # Asked, the classifier declines billing: only a bypass selects it.
    ActorFactory(name="c-classifier", config={"replies": ['{"selected": false}']})
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": "triage",
            "name": "Triage",
            "inputs": {"text": {"type": "string", "required": True}},
            "actors": {"classifier": "c-classifier"},
            "steps": [
                {
                    "key": "triage",
                    "name": "Triage",
                    "kind": "classify",
                    "actor": "classifier",
                    "prompt": "{text}",
                    "routes": ROUTES,
                    "branches": [branch("done", 1, DEFAULT, "@complete")],
                }
            ],
        },
    )


def start(api: Any, **body: Any) -> tuple[Run, dict[str, Any]]:
    response = api.post(
        "/api/recipes/triage/runs",
        {"inputs": {"text": "My invoice is wrong"}, **body},
        format="json",
    )
    assert response.status_code == 201, response.json()
    run = drive(Run.objects.get(pk=response.json()["id"]))
    (step,) = api.get(f"/api/runs/{run.pk}/").json()["steps"]
    return run, step


def test_a_run_started_with_classification_bypass_asks_no_model(
    owner_api: Any, recipe: Recipe
) -> None:
    run, step = start(owner_api, classification="bypass")

    assert run.status == "succeeded", run.error
    assert run.options == {"classification": "bypass"}
    assert step["details"]["selected"] == ["billing", "respond"]
    assert step["details"]["bypassed"] == 'the run was started with classification "bypass"'
    assert step["details"]["trace"][0] == (
        'bypass: the run was started with classification "bypass": all routes selected '
        "(billing, respond)"
    )
    assert not ModelCall.objects.filter(run=run).exists()


def test_without_the_option_the_model_is_asked(owner_api: Any, recipe: Recipe) -> None:
    run, step = start(owner_api)

    assert step["details"]["selected"] == ["respond"]
    assert "bypassed" not in step["details"]
    assert ModelCall.objects.filter(run=run).count() == 1


def test_the_setting_bypasses_every_run_unless_one_asks(
    owner_api: Any, recipe: Recipe, settings: Any
) -> None:
    settings.CLASSIFICATION_BYPASS = True

    _, bypassed = start(owner_api)
    _, asked = start(owner_api, classification="ask")

    assert bypassed["details"]["selected"] == ["billing", "respond"]
    assert bypassed["details"]["bypassed"] == "the CLASSIFICATION_BYPASS setting is on"
    assert asked["details"]["selected"] == ["respond"]


def test_an_unknown_classification_mode_is_refused(owner_api: Any, recipe: Recipe) -> None:
    response = owner_api.post(
        "/api/recipes/triage/runs",
        {"inputs": {"text": "x"}, "classification": "sometimes"},
        format="json",
    )

    assert response.status_code == 400
    assert "classification" in str(response.json())


def test_the_run_form_starts_a_bypassed_run(owner: Any, recipe: Recipe, client: Any) -> None:
    client.force_login(owner)
    page = client.get("/recipes/triage/run/").content.decode()
    assert 'name="classification"' in page

    response = client.post(
        "/recipes/triage/run/", {"input_text": "My invoice", "classification": "bypass"}
    )

    assert response.status_code == 302, response.content.decode()
    run = drive(Run.objects.get())
    assert run.options == {"classification": "bypass"}
    assert run.steps.get().details["selected"] == ["billing", "respond"]

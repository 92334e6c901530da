"""An llm step's images through real runs: an image input sent as it was stored and a PDF's
pages rendered as PNGs reach the stub model server (OpenAI-compatible and Ollama wire formats);
too many images, pages beyond the PDF or a file that is no image fail the step before any call;
the step's record says what was sent, never the bytes; an actor without vision is refused at
publish."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client
from PIL import Image

from runner import services
from runner.file_images import MAX_SIDE
from runner.models import Run, RunEvent, RunFile
from runner.status import StepStatus
from tests.documents import pdf, png
from tests.factories import ActorFactory, UserFactory
from tests.runner.providers.stub_server import StubServer, reply, stub_server
from tests.runner.recipes import drive, publish_document, steps
from workflows.models import Actor, Recipe
from workflows.services import recipe_import, recipe_publish
from workflows.validators import RecipeRejected

__all__ = ["stub_server"]

pytestmark = pytest.mark.django_db

PHOTO = png(40, 30, (10, 200, 10))
INPUTS = {
    "photo": {"type": "file", "accept": ["image/*"]},
    "scan": {"type": "file", "accept": ["application/pdf", "image/*"]},
}


@pytest.fixture
def owner() -> Any:
    return UserFactory(username="looker")


@pytest.fixture(params=[Actor.Provider.OPENAI, Actor.Provider.OLLAMA])
def served(request: pytest.FixtureRequest, stub_server: StubServer, settings: Any) -> str:
    """A vision actor of the stub model server, in one wire format or the other; its name."""
    settings.PROVIDER_URL_ALLOWLIST = [stub_server.address]
    provider = request.param
    url = stub_server.base_url if provider == Actor.Provider.OPENAI else stub_server.url
    ActorFactory(
        name=f"eyes-{provider}",
        provider=provider,
        model="stub-vl",
        base_url=url,
        api_key_env="",
        timeout_s=5,
        config={},
        capabilities=["vision"],
    )
    return f"eyes-{provider}"


def document(actor: str, images: list[Any]) -> dict[str, Any]:
    look = {
        "key": "look",
        "name": "Look",
        "actor": "writer",
        "prompt": "Describe what you see.",
        "images": images,
    }
    return {
        "format": "branchline.recipe/v1",
        "slug": "looks",
        "name": "Looks",
        "inputs": INPUTS,
        "actors": {"writer": actor},
        "steps": [look],
    }


def stored(run: Run, input_name: str, name: str, media_type: str, data: bytes) -> RunFile:
    """Keep a file as the run's input (as an upload would), its ref in the run's inputs."""
    run_file = RunFile.objects.create(
        run=run,
        input_name=input_name,
        name=name,
        media_type=media_type,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        blob=ContentFile(data, name=name),
    )
    run.inputs[input_name] = {
        "file": str(run_file.pk),
        "name": name,
        "media_type": media_type,
        "size": len(data),
        "pages": 0,
        "image_count": 1,
    }
    run.save(update_fields=["inputs"])
    return run_file


def started(owner: Any, recipe: Recipe, files: dict[str, tuple[str, str, bytes]]) -> Run:
    run = services.run_start(user=owner, recipe=recipe, inputs={})
    for input_name, (name, media_type, data) in files.items():
        stored(run, input_name, name, media_type, data)
    return drive(run)


def sent_images(stub_server: StubServer) -> list[bytes]:
    [sent] = stub_server.chat_requests
    parts = sent.json["messages"][-1]["content"]
    assert parts[0] == {"type": "text", "text": "Describe what you see."}
    urls = [part["image_url"]["url"] for part in parts[1:]]
    assert all(url.startswith("data:image/") for url in urls)
    return [base64.b64decode(url.split(",", 1)[1]) for url in urls]


def test_an_image_and_a_pdfs_pages_reach_the_model(
    owner: Any, served: str, stub_server: StubServer
) -> None:
    recipe = publish_document(owner, document(served, ["photo", {"input": "scan", "pages": "2-3"}]))
    stub_server.enqueue(reply("A green square and two pages."))
    scan = pdf(["Cover", "Page two", "Page three", "Page four"], images_on=[3])

    run = started(
        owner,
        recipe,
        {"photo": ("leaf.png", "image/png", PHOTO), "scan": ("scan.pdf", "application/pdf", scan)},
    )

    look = steps(run)["look"]
    assert look.status == StepStatus.SUCCEEDED, look.error
    assert look.response == "A green square and two pages."
    photo, page_two, page_three = sent_images(stub_server)
    assert photo == PHOTO  # sent as it was stored
    for page in (page_two, page_three):
        rendered = Image.open(io.BytesIO(page))
        assert rendered.format == "PNG"
        assert max(rendered.size) <= MAX_SIDE
        assert rendered.size[0] < rendered.size[1]  # an A4 page, upright
    assert page_two != page_three
    assert [(i["input"], i["name"], i.get("page")) for i in look.details["images"]] == [
        ("photo", "leaf.png", None),
        ("scan", "scan.pdf", 2),
        ("scan", "scan.pdf", 3),
    ]
    assert look.details["images"][0]["bytes"] == len(PHOTO)
    assert look.details["images"][1]["bytes"] == len(page_two)
    # The bytes went to the model only: neither the step's record nor the events hold them.
    encoded = base64.b64encode(PHOTO).decode()
    assert encoded not in json.dumps(look.details)
    events = json.dumps(list(RunEvent.objects.filter(run=run).values_list("data", flat=True)))
    assert encoded not in events
    assert encoded not in look.prompt


def test_the_monitor_says_which_images_the_step_showed(
    owner: Any, served: str, stub_server: StubServer, client: Client
) -> None:
    recipe = publish_document(owner, document(served, ["photo", {"input": "scan", "pages": "2"}]))
    stub_server.enqueue(reply("Seen."))
    scan = pdf(["One", "Two"])
    run = started(
        owner,
        recipe,
        {
            "photo": ("<b>leaf</b>.png", "image/png", PHOTO),
            "scan": ("s.pdf", "application/pdf", scan),
        },
    )
    client.force_login(owner)

    html = client.get(f"/runs/{run.pk}/").content.decode()

    assert 'Images shown <span class="muted">(2)</span>' in html
    assert "&lt;b&gt;leaf&lt;/b&gt;.png <span" in html and "<b>leaf</b>" not in html
    assert "s.pdf, page 2" in html


def test_each_answer_of_the_validation_loop_is_shown_the_images_and_its_judge_is_not(
    owner: Any, served: str, stub_server: StubServer
) -> None:
    doc = document(served, ["photo"])
    doc["steps"][0]["validation"] = {"max_attempts": 2, "threshold": 0.8, "fallback": "?"}
    recipe = publish_document(owner, doc)
    low = json.dumps(dict.fromkeys(("relevance", "helpfulness", "accuracy", "completeness"), 5))
    high = json.dumps(dict.fromkeys(("relevance", "helpfulness", "accuracy", "completeness"), 25))
    stub_server.enqueue(reply("A square."), reply(low), reply("A green square."), reply(high))

    run = started(owner, recipe, {"photo": ("leaf.png", "image/png", PHOTO)})

    look = steps(run)["look"]
    assert look.status == StepStatus.SUCCEEDED, look.error
    assert look.response == "A green square."
    contents = [sent.json["messages"][-1]["content"] for sent in stub_server.chat_requests]
    answer, judge, again, judge_again = contents
    for shown in (answer, again):
        assert isinstance(shown, list) and shown[1]["type"] == "image_url"
    assert isinstance(judge, str) and isinstance(judge_again, str)


def test_a_pdf_named_without_pages_shows_every_page(
    owner: Any, served: str, stub_server: StubServer
) -> None:
    recipe = publish_document(owner, document(served, ["scan"]))
    stub_server.enqueue(reply("Two pages."))

    run = started(owner, recipe, {"scan": ("two.pdf", "application/pdf", pdf(["One", "Two"]))})

    assert steps(run)["look"].status == StepStatus.SUCCEEDED
    assert len(sent_images(stub_server)) == 2


@pytest.mark.parametrize(
    ("images", "files", "message"),
    [
        (
            ["scan"],
            {"scan": ("long.pdf", "application/pdf", pdf([f"Page {n}" for n in range(1, 4)]))},
            "the step's images are 3 pictures, more than the 2 a model call may show "
            "(LLM_MAX_IMAGES)",
        ),
        (
            [{"input": "scan", "pages": "2"}],
            {"scan": ("one.pdf", "application/pdf", pdf(["Only page"]))},
            "images[0] ('scan'): pages 2 are beyond 'one.pdf' (1 pages)",
        ),
        (
            [{"input": "scan", "pages": "1"}],
            {"scan": ("leaf.png", "image/png", PHOTO)},
            "images[0] ('scan'): 'leaf.png' is an image; only a PDF has pages",
        ),
        (
            ["scan"],
            {"scan": ("broken.pdf", "application/pdf", b"%PDF-1.4 not really")},
            "images[0] ('scan'): 'broken.pdf': it could not be read as a PDF",
        ),
        (
            ["scan"],
            {"scan": ("notes.txt", "text/plain", b"Just words.")},
            "images[0] ('scan'): 'notes.txt' (text/plain) is neither an image",
        ),
    ],
)
def test_a_step_whose_images_cannot_be_sent_fails_before_any_call(
    owner: Any,
    served: str,
    stub_server: StubServer,
    settings: Any,
    images: list[Any],
    files: dict[str, tuple[str, str, bytes]],
    message: str,
) -> None:
    settings.LLM_MAX_IMAGES = 2
    recipe = publish_document(owner, document(served, images))

    run = started(owner, recipe, files)

    look = steps(run)["look"]
    assert look.status == StepStatus.FAILED
    assert message in look.error
    assert stub_server.chat_requests == []


def test_a_step_with_images_whose_input_was_not_given_shows_none(
    owner: Any, served: str, stub_server: StubServer
) -> None:
    recipe = publish_document(owner, document(served, ["photo"]))
    stub_server.enqueue(reply("Nothing to see."))

    run = started(owner, recipe, {})

    assert steps(run)["look"].status == StepStatus.SUCCEEDED
    [sent] = stub_server.chat_requests
    assert sent.json["messages"][-1]["content"] == "Describe what you see."


def test_publish_refuses_images_for_an_actor_without_vision(owner: Any) -> None:
    blind = ActorFactory(name="blind", capabilities=["vision"])
    # Imported while the actor saw; it declares it does not since.
    recipe = recipe_import(user=owner, data=document("blind", ["photo"])).recipe
    Actor.objects.filter(pk=blind.pk).update(capabilities=["tools"])

    with pytest.raises(RecipeRejected) as caught:
        recipe_publish(recipe=recipe, user=owner)

    assert "steps[0] ('look').images: actor 'writer' lacks vision" in caught.value.errors
    assert not recipe.versions.exists()

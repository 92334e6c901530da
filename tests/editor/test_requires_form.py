"""The editor's step panel shows and writes a step's `requires`."""

from __future__ import annotations

import pytest

from editor.forms.document import DocumentContext
from editor.forms.step import StepForm
from workflows.models import Actor, Recipe

from .conftest import story_document
from .test_forms import step_data

pytestmark = pytest.mark.django_db


def test_the_step_form_shows_and_writes_what_a_step_requires(story: Recipe) -> None:
    doc = story_document()
    doc["steps"][0]["requires"] = ["vision", {"context": 8192}]
    context = DocumentContext(doc)
    assert StepForm.initial_from(doc["steps"][0])["requires"] == ["vision", {"context": 8192}]

    form = StepForm(step_data(doc, 0, requires='["tools"]'), context=context, index=0)

    assert form.is_valid(), form.errors
    assert form.result is not None and form.result["requires"] == ["tools"]


def test_the_step_form_shows_the_engines_error_on_an_unknown_capability(story: Recipe) -> None:
    doc = story_document()
    form = StepForm(step_data(doc, 0, requires='["x-ray"]'), context=DocumentContext(doc), index=0)

    assert not form.is_valid()
    assert form.errors["requires"][0].startswith("unknown capability 'x-ray'")


def test_the_step_form_shows_and_writes_the_images_of_a_step(story: Recipe) -> None:
    doc = story_document()
    doc["inputs"]["photo"] = {"type": "file", "accept": ["image/*"]}
    doc["steps"][0]["images"] = ["photo"]
    # Images need an actor that declares vision.
    Actor.objects.filter(name=doc["actors"]["writer"]).update(capabilities=["vision"])
    context = DocumentContext(doc)
    assert StepForm.initial_from(doc["steps"][0])["images"] == ["photo"]

    written = '[{"input": "photo"}]'
    form = StepForm(step_data(doc, 0, images=written), context=context, index=0)

    assert form.is_valid(), form.errors
    assert form.result is not None and form.result["images"] == [{"input": "photo"}]


def test_the_step_form_shows_the_engines_error_on_images_of_no_file_input(story: Recipe) -> None:
    doc = story_document()
    form = StepForm(step_data(doc, 0, images='["topic"]'), context=DocumentContext(doc), index=0)

    assert not form.is_valid()
    assert form.errors["images"][0].startswith("'topic' is not a file input of the recipe")

"""Pages refuse text the database cannot hold, by one rule, the same on SQLite and PostgreSQL:

- as posted (a query parameter or a form field, the only way a NUL reaches a page): the door
  (config/middleware.py) answers 400 with the field's name, before any view;
- inside JSON the page posts (the editor's document, JSON form fields), where `\\u0000` and
  `\\ud800` are escapes: a form error on the field, or the editor's 400, with the path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from editor.forms import testrun
from editor.forms.condition import ConditionForm
from editor.forms.document import DocumentContext
from editor.forms.fields import PrettyJSONField, StorableJSONField
from editor.forms.recipe import InputForm
from editor.forms.testrun import RecipeTestForm
from editor.models import RecipeTest
from runner.models import HumanTask, Run
from tests.editor.conftest import draft, htmx_post, live_answer, story_document
from tests.editor.test_runs_pages import start
from tests.factories import UserFactory
from workflows.models import Recipe, RecipeVersion
from workflows.services import recipe_publish

pytestmark = pytest.mark.django_db

NUL = "contains a NUL character"


@pytest.fixture
def published(story: Recipe, author: Any, reviewers: Group) -> Recipe:
    recipe_publish(recipe=story, user=author)
    story.shared_with_groups.add(reviewers)
    return story


@pytest.fixture
def task(author: Any, published: Recipe, reviewers: Group) -> HumanTask:
    author.groups.add(reviewers)
    run = start(author, published, judge=["5"])
    return HumanTask.objects.get(run=run)


@pytest.fixture
def browser(author: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(author)
    return client


def snapshot() -> list[Any]:
    """Return what a refused request must leave as it was."""
    return [
        list(Recipe.objects.values()),
        list(RecipeVersion.objects.values_list("pk", flat=True)),
        list(Run.objects.values_list("pk", "status")),
        list(HumanTask.objects.values_list("pk", "status", "comment")),
        list(RecipeTest.objects.values_list("pk", flat=True)),
    ]


def assert_refused_at_the_door(response: Any, error: str) -> None:
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"].startswith("text/html")
    assert error.removeprefix("$: ") in response.content.decode()
    assert response["X-Request-ID"] in response.content.decode()


# Every page, with a parameter it reads or one it does not.
PAGE_QUERIES = [
    ("/", "q"),
    ("/runs/", "recipe"),
    ("/runs/", "status"),
    ("/runs/", "page"),
    ("/runs/{run}/", "after"),
    ("/inbox/", "x"),
    ("/recipes/story/", "x"),
    ("/recipes/story/versions/", "x"),
    ("/recipes/story/versions/diff/", "a"),
    ("/recipes/story/versions/diff/", "b"),
    ("/recipes/story/testrun/result/", "run"),
    ("/recipes/story/tests/", "x"),
    ("/recipes/story/run/", "x"),
    ("/login/", "next"),
    ("/admin/workflows/actor/", "q"),
]


@pytest.mark.parametrize(("url", "name"), PAGE_QUERIES)
def test_a_page_refuses_a_nul_in_any_query_parameter(
    browser: Client, author: Any, task: HumanTask, url: str, name: str
) -> None:
    author.is_staff = author.is_superuser = True
    author.save()

    response = browser.get(f"{url.format(run=task.run_id)}?{name}=a%00b")

    assert_refused_at_the_door(response, f"{name}: {NUL}")


def test_a_page_refuses_a_nul_in_its_address(browser: Client) -> None:
    response = browser.get("/recipes/st%00ory/")

    assert_refused_at_the_door(response, "$: the address contains a NUL character")


# (page, the form it posts, the field holding a NUL)
FORM_POSTS = [
    ("/login/", {"username": "ada\x00", "password": "x"}, "username"),
    ("/recipes/new/", {"create": "1", "name": "Evil\x00", "slug": "evil"}, "name"),
    ("/recipes/story/versions/", {"note": "v1\x00"}, "note"),
    ("/recipes/story/versions/", {"note": "v1", "revision": "\x00"}, "revision"),
    ("/inbox/tasks/{task}/decide/", {"decision": "approve", "comment": "ok\x00"}, "comment"),
    ("/inbox/tasks/{task}/decide/", {"decision": "approve\x00"}, "decision"),
    ("/runs/{run}/cancel/", {"reason": "\x00"}, "reason"),
    (
        "/recipes/story/tests/",
        {"name": "t\x00", "inputs": "{}", "script": "{}", "expected_path": "write"},
        "name",
    ),
    ("/recipes/story/panels/step/", {"document": "{}", "step": "0", "element": "\x00"}, "element"),
    ("/recipes/story/run/", {"input_topic": "owls\x00"}, "input_topic"),
]


@pytest.mark.parametrize("encoding", ["urlencoded", "multipart"])
@pytest.mark.parametrize(("url", "fields", "name"), FORM_POSTS)
def test_a_page_refuses_a_nul_in_any_form_field(
    browser: Client, task: HumanTask, url: str, fields: dict[str, str], name: str, encoding: str
) -> None:
    before = snapshot()
    url = url.format(task=task.pk, run=task.run_id)

    if encoding == "multipart":
        response = browser.post(url, fields)
    else:
        body = "&".join(f"{k}={v.replace(chr(0), '%00')}" for k, v in fields.items())
        response = browser.post(url, body, content_type="application/x-www-form-urlencoded")

    assert_refused_at_the_door(response, f"{name}: {NUL}")
    assert snapshot() == before


def test_a_form_post_cannot_carry_a_lone_surrogate(browser: Client, published: Recipe) -> None:
    # A lone surrogate's UTF-8 form is not UTF-8: Django reads replacement characters (text).
    body = "note=%ED%A0%80"

    response = browser.post(
        "/recipes/story/versions/", body, content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 200
    assert RecipeVersion.objects.filter(note="\ufffd\ufffd\ufffd").exists()


# -- JSON inside what a page posts ------------------------------------------------------------

UNSTORABLE_JSON = [
    pytest.param("\x00", NUL, id="NUL"),
    pytest.param("\ud800", "contains a lone surrogate (U+D800)", id="surrogate"),
]


@pytest.mark.parametrize(("text", "problem"), UNSTORABLE_JSON)
@pytest.mark.parametrize(
    "panel",
    [
        "recipe-check",
        "recipe-step-panel",
        "recipe-branch-panel",
        "recipe-settings-panel",
    ],
)
def test_the_editor_refuses_a_document_holding_unstorable_text(
    browser: Client, story: Recipe, panel: str, text: str, problem: str
) -> None:
    document = story_document()
    document["steps"][0]["prompt"] = f"Write {text}"

    response = htmx_post(
        browser, reverse(panel, args=[story.slug]), document, step="0", branch="0", apply="1"
    )

    assert response.status_code == 400
    assert f"document.steps[0].prompt: {problem}" in response.content.decode()


@pytest.mark.parametrize(("text", "problem"), UNSTORABLE_JSON)
def test_saving_a_test_refuses_inputs_holding_unstorable_text(
    browser: Client, published: Recipe, text: str, problem: str
) -> None:
    fields = {
        "name": "owls",
        "inputs": json.dumps({"topic": f"owls{text}"}),
        "script": json.dumps({"writer": ["ok"]}),
        "expected_path": "write",
    }

    response = browser.post("/recipes/story/tests/", fields, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert f"topic: {problem}" in response.content.decode()
    assert not RecipeTest.objects.exists()


@pytest.mark.parametrize(
    "field", [StorableJSONField(), PrettyJSONField()], ids=["json field", "pretty json field"]
)
@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"a": "x\\u0000"}', f"a: {NUL}"),
        ('["ok", "\\udfff"]', "[1]: contains a lone surrogate (U+DFFF)"),
        ('{"\\u0000": 1}', f"$: a key {NUL}"),
        ('{"n": NaN}', "n: the number nan is out of range"),
        ("[" * 70 + "]" * 70, "nested deeper than 64 levels"),
        ("9" * 5000, "Enter a valid JSON."),
        ("[" * 100_000 + "]" * 100_000, "Enter a valid JSON."),
    ],
    ids=["NUL", "surrogate", "NUL key", "NaN", "deep", "5000 digits", "too deep to parse"],
)
def test_a_json_form_field_refuses_what_the_database_cannot_hold(
    field: StorableJSONField, text: str, error: str
) -> None:
    with pytest.raises(Exception) as refused:
        field.clean(text)

    assert error in " ".join(refused.value.messages)  # type: ignore[attr-defined]


def test_a_json_form_field_takes_plain_json() -> None:
    assert StorableJSONField().clean('{"a": ["b", 1, 2.5, null, true]}') == {
        "a": ["b", 1, 2.5, None, True]
    }


@pytest.mark.parametrize("field", ["tree", "leaf_targets", "routes"])
def test_a_step_panel_refuses_an_unreadable_json_setting_beside_it(
    browser: Client, story: Recipe, field: str
) -> None:
    response = htmx_post(
        browser,
        reverse("recipe-step-panel", args=[story.slug]),
        draft(story),
        step="0",
        apply="1",
        kind="decision_tree",
        **{field: "9" * 5000},
    )

    answer = live_answer(response)
    assert "Enter a valid JSON." in answer["errors"][field]
    assert "9" * 5000 not in json.dumps(answer["result"])  # kept as typed in the browser only


@pytest.mark.parametrize(
    "document",
    [
        '{"steps": [], "name": ' + "9" * 5000 + "}",
        '{"steps": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["5000 digits", "too deep"],
)
def test_the_editor_refuses_a_document_it_cannot_read(
    browser: Client, story: Recipe, document: str
) -> None:
    response = browser.post(
        reverse("recipe-check", args=[story.slug]), {"document": document}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 400
    assert "document: not JSON" in response.content.decode()


def test_an_input_default_refuses_unstorable_json() -> None:
    form = InputForm({"name": "tags", "type": "array", "default": '["a", "\\u0000"]'})

    assert not form.is_valid()
    assert form.errors["default"] == [f"[1]: {NUL}"]
    unreadable = InputForm({"name": "n", "type": "integer", "default": "9" * 5000})
    assert not unreadable.is_valid()
    assert unreadable.errors["default"] == ["Write the default as JSON for a integer."]


def test_a_condition_keeps_no_unstorable_fields_the_page_carries() -> None:
    form = ConditionForm(
        {"type": "default", "prev_type": "default", "extra": '{"note": "\\ud800"}'},
        context=DocumentContext(story_document()),
    )

    assert not form.is_valid()
    assert form.errors["extra"] == ["note: contains a lone surrogate (U+D800)"]


def test_a_test_run_refuses_an_object_input_holding_unstorable_text() -> None:
    document = {"inputs": {"meta": {"type": "object", "required": True}}, "actors": {}}

    form = testrun.TestRunForm({"input_meta": '{"k": "\\u0000"}'}, document=document)

    assert not form.is_valid()
    assert form.errors["input_meta"] == [f"k: {NUL}"]


def test_the_saved_test_form_refuses_an_unstorable_script(story: Recipe) -> None:
    form = RecipeTestForm(
        {"name": "t", "inputs": "{}", "script": '{"writer": ["\\u0000"]}', "expected_path": "w"},
        recipe=story,
    )

    assert not form.is_valid()
    assert form.errors["script"] == [f"writer[0]: {NUL}"]


def test_an_ordinary_post_still_works(browser: Client, story: Recipe) -> None:
    response = htmx_post(browser, reverse("recipe-check", args=[story.slug]), draft(story))

    assert response.status_code == 200
    assert response["X-Request-ID"]


def test_a_stranger_is_refused_before_anything_else_only_for_clean_input(
    story: Recipe, db: None
) -> None:
    stranger = Client(raise_request_exception=False)
    stranger.force_login(UserFactory(username="eve"))

    assert stranger.get("/recipes/story/?x=ok").status_code == 404
    assert stranger.get("/recipes/story/?x=%00").status_code == 400


@pytest.mark.parametrize("digits", [19, 30, 5000])
@pytest.mark.parametrize(
    ("method", "template"),
    [
        ("get", "/runs/{id}/"),
        ("get", "/runs/{id}/header/"),
        ("get", "/runs/1/steps/{id}/"),
        ("post", "/runs/{id}/cancel/"),
        ("get", "/inbox/tasks/{id}/"),
        ("post", "/inbox/tasks/{id}/decide/"),
        ("post", "/recipes/story/versions/{id}/restore/"),
    ],
)
def test_an_id_past_any_integer_in_a_page_address_is_not_found(
    browser: Client, published: Recipe, method: str, template: str, digits: int
) -> None:
    response = getattr(browser, method)(template.format(id="9" * digits))

    assert response.status_code == 404


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (json.dumps(story_document(slug="nul", name="a\x00b")), f"name: {NUL}"),
        (
            json.dumps(story_document(slug="lone", description="\ud800")),
            "description: contains a lone surrogate (U+D800)",
        ),
    ],
    ids=["NUL", "surrogate"],
)
@pytest.mark.parametrize("page", ["recipe-new", "recipe-draft-import"])
def test_a_recipe_file_holding_unstorable_text_is_refused_with_its_path(
    browser: Client, story: Recipe, page: str, content: str, error: str
) -> None:
    before = snapshot()
    upload = SimpleUploadedFile("recipe.json", content.encode())
    url = reverse(page) if page == "recipe-new" else reverse(page, args=[story.slug])

    response = browser.post(url, {"import": "1", "file": upload}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert error in response.content.decode()
    assert snapshot() == before

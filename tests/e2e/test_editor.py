"""The recipe editor in a real browser: draw, edit, save, lint, publish, test-run, test, cover."""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

from editor.models import RecipeTest
from tests.editor.conftest import STORY, story_document
from tests.factories import ActorFactory, GroupFactory
from workflows.adapters import document_from_recipe
from workflows.models import Recipe
from workflows.services import recipe_import, recipe_publish, recipe_update

from .conftest import BrowserPage

pytestmark = pytest.mark.e2e


# -- helpers ---------------------------------------------------------------------------------


def apply_panel(page: Any) -> None:
    click_settled(page, "#panel button.primary[type=submit]")
    page.wait_for_selector("#panel .applied")


def wait_saved(page: Any) -> None:
    page.wait_for_function("document.getElementById('save-state').textContent === 'Saved'")


def wait_settled(page: Any) -> None:
    """Wait until the editor has nothing in flight: no edit still to check, no request.

    The lint panel's answer to the last edit can change its height and move the side panel:
    a drag planned on the old layout would drop on the wrong row. And htmx wires up what it
    swapped in only when the swap settles: a form clicked before that submits as a plain form.
    """
    page.wait_for_function("branchline.settled()")


def click_settled(page: Any, selector: str) -> None:
    """Click a control of a panel once htmx has wired it up."""
    page.wait_for_selector(selector)
    wait_settled(page)
    page.click(selector)


def canvas_point(page: Any, js_element: str) -> dict[str, float]:
    """Return the page coordinates of a canvas element's rendered centre."""
    return page.evaluate(
        """(expr) => {
            const ele = eval(expr);
            const box = document.getElementById('cy').getBoundingClientRect();
            const p = ele.isNode() ? ele.renderedPosition() : ele.renderedMidpoint();
            return {x: box.left + p.x, y: box.top + p.y};
        }""",
        js_element,
    )


def drag_branch(page: Any, source_key: str, target_key: str) -> None:
    """Draw a branch with the mouse: from the source step's handle to the target step."""
    wait_settled(page)
    source = canvas_point(page, f"branchline.nodeByKey('{source_key}')")
    target = canvas_point(page, f"branchline.nodeByKey('{target_key}')")
    page.mouse.move(source["x"], source["y"])
    page.wait_for_selector("#eh-handle:not([hidden])")
    handle = page.locator("#eh-handle").bounding_box()
    start = {"x": handle["x"] + handle["width"] / 2, "y": handle["y"] + handle["height"] / 2}
    page.mouse.move(start["x"], start["y"])
    page.mouse.down()
    page.mouse.move(target["x"], target["y"], steps=12)
    # Edge handles snaps to a step once the pointer has rested on it (its hover delay).
    page.wait_for_function(f"branchline.nodeByKey('{target_key}').hasClass('eh-target')")
    page.mouse.up()


def selected_key(page: Any) -> str | None:
    return page.evaluate(
        "() => { const s = branchline.cy.$(':selected'); return s.length ? s.data('key') : null; }"
    )


def edge_classes(page: Any, step: str, branch: str) -> list[str]:
    return page.evaluate("([s, b]) => branchline.edgeByName(s, b).classes()", [step, branch])


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def story_actors(transactional_db: None) -> None:
    GroupFactory(name="editor-reviewers")
    ActorFactory(name="editor-writer", config={"replies": [STORY]})
    ActorFactory(name="editor-judge", config={"replies": ["9"]})


@pytest.fixture
def story(e2e_user: Any, story_actors: None) -> Recipe:
    return recipe_import(user=e2e_user, data=story_document()).recipe


# -- tests -----------------------------------------------------------------------------------


def test_an_author_draws_a_recipe_saves_it_and_publishes_it(
    browser_page: BrowserPage, e2e_user: Any
) -> None:
    ActorFactory(name="scripted-writer")
    page = browser_page.open("/")
    page.click("text=New recipe")
    page.fill("#id_name", "Story QC")
    page.click("button[name=create]")
    browser_page.wait_ready()
    assert page.url.endswith("/recipes/story-qc/")

    page.click("button[data-add-step=llm]")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    page.fill("#panel [name=name]", "Write")
    page.fill("#panel [name=key]", "write")
    page.select_option("#panel [name=actor]", "+scripted-writer")
    page.fill("#panel [name=prompt]", "Write a short story.")
    apply_panel(page)

    page.click("button[data-add-step=llm]")
    page.wait_for_function("document.querySelector('#panel [name=key]')?.value === 'step_1'")
    page.fill("#panel [name=name]", "Polish")
    page.fill("#panel [name=key]", "polish")
    page.click("#panel .chip[data-insert='step1_response']")
    assert page.input_value("#panel [name=prompt]") == "{step1_response}"
    page.fill("#panel [name=prompt]", "Polish this: {step1_response} {tone}")
    page.wait_for_selector("#prompt-check .warn")
    assert "{tone}: not an input" in page.inner_text("#prompt-check")
    page.fill("#panel [name=prompt]", "Polish this: {step1_response}")
    apply_panel(page)
    page.wait_for_function("document.getElementById('save-state').textContent.includes('Unsaved')")

    drag_branch(page, "write", "polish")
    page.wait_for_selector("#panel form[data-editor-form=branch]")
    page.select_option("#panel [name='c-type']", "length_check")
    page.wait_for_selector("#panel [name='c-value']")
    page.select_option("#panel [name='c-operator']", "less_than")
    page.fill("#panel [name='c-value']", "200")
    page.select_option("#panel [name=action]", "REQUEST_MORE_DETAIL")
    page.fill("#panel [name=retry_suffix]", "Longer, please.")
    page.fill("#panel [name=max_retries]", "2")
    apply_panel(page)
    assert "runs this step again" in page.inner_text("#panel .note")
    browser_page.screenshot("drawn")

    page.click("#btn-save")
    wait_saved(page)
    saved = document_from_recipe(Recipe.objects.get(slug="story-qc"))
    assert [s["key"] for s in saved["steps"]] == ["write", "polish"]
    assert saved["steps"][0]["branches"] == [
        {
            "name": "to_polish",
            "priority": 1,
            "when": {"type": "length_check", "operator": "less_than", "value": 200},
            "action": "REQUEST_MORE_DETAIL",
            "target": "@repeat",
            "params": {"retry_suffix": "Longer, please.", "max_retries": 2},
        }
    ]
    assert saved["actors"] == {"scripted-writer": "scripted-writer"}
    assert all("position" in s for s in saved["steps"])

    page.reload()
    browser_page.wait_ready()
    outline = page.inner_text("#outline")
    assert "len < 200" in outline
    assert "REQUEST_MORE_DETAIL" in outline
    label = page.evaluate("branchline.edgeByName('write', 'to_polish').data('label')")
    assert label == "1 · len < 200\nREQUEST_MORE_DETAIL"
    assert page.evaluate("branchline.edgeByName('write', 'to_polish').isLoop()")

    page.click("#tab-versions")
    page.fill("#panel-versions [name=note]", "first cut")
    click_settled(page, "#panel-versions button.primary")
    page.wait_for_selector("#panel-versions .applied")
    assert "Published v1." in page.inner_text("#panel-versions")
    assert "first cut" in page.inner_text("#panel-versions")
    assert Recipe.objects.get(slug="story-qc").versions.get().note == "first cut"
    browser_page.screenshot("published")


def test_an_unreachable_step_shows_in_the_lint_panel_and_clicking_selects_it(
    browser_page: BrowserPage, e2e_user: Any, story_actors: None
) -> None:
    doc = story_document(slug="lonely")
    doc["steps"].append(
        {
            "key": "lonely",
            "name": "Lonely",
            "kind": "llm",
            "actor": "writer",
            "prompt": "",
            "position": {"x": 700, "y": 300},
            "branches": [],
        }
    )
    doc["steps"][1]["branches"].append(
        {
            "name": "otherwise",
            "priority": 9,
            "when": {"type": "default"},
            "action": "CONTINUE",
            "target": "@complete",
        }
    )
    recipe_import(user=e2e_user, data=doc)
    page = browser_page.open_editor("lonely")
    problem = page.locator("#lint .problem", has_text="never reached")
    problem.wait_for()
    assert "steps[2]" in problem.inner_text()
    problem.locator("button").click()
    page.wait_for_selector("#panel form[data-editor-form=step]")
    assert selected_key(page) == "lonely"
    # The step list is a keyboard path to every step and branch.
    page.focus("#outline .outline-item.step >> nth=0")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.path") == "steps[0].branches[1]"
    page.keyboard.press("End")
    assert page.evaluate("document.activeElement.dataset.path") == "steps[2]"
    page.keyboard.press("Enter")
    page.wait_for_function("branchline.cy.$(':selected').data('key') === 'lonely'")
    assert page.input_value("#panel [name=key]") == "lonely"
    assert "has-warning" in page.evaluate("branchline.nodeByKey('lonely').classes()")
    browser_page.screenshot("lint")


def test_the_keyboard_deletes_undoes_and_redoes_and_branches_reorder(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.step >> text=Review")
    page.wait_for_selector("#panel form[data-editor-form=step]")
    page.focus("#cy")
    page.keyboard.press("Delete")
    page.wait_for_function("branchline.nodeByKey('review').empty()")
    page.wait_for_selector("#lint .problem.error")  # the branch that led there is now broken
    page.keyboard.press("Control+z")
    page.wait_for_function("branchline.nodeByKey('review').nonempty()")
    assert (
        page.evaluate("branchline.edgeByName('write', 'to_review').target().data('key')")
        == "review"
    )
    page.keyboard.press("Control+Shift+z")
    page.wait_for_function("branchline.nodeByKey('review').empty()")
    page.keyboard.press("Control+z")
    page.wait_for_function("branchline.nodeByKey('review').nonempty()")

    page.click("#outline .outline-item.step >> text=Write")
    page.wait_for_selector("#panel .branch-order li")
    page.click("#panel .branch-order li[data-branch='0'] [data-move=down]")
    page.wait_for_function("branchline.edgeByName('write', 'broken').data('branch').priority === 1")
    assert page.evaluate("branchline.edgeByName('write', 'too_short').data('branch').priority") == 2
    first = page.locator("#panel .branch-order li").first
    first.wait_for()
    page.wait_for_function(
        "document.querySelector('#panel .branch-order li button.link').textContent.includes('broken')"
    )
    wait_settled(page)
    # Dragging in the list reorders too; the priorities keep their values, in the new order.
    page.drag_and_drop(
        "#panel .branch-order li[data-branch='3']", "#panel .branch-order li[data-branch='0']"
    )
    page.wait_for_function(
        "branchline.edgeByName('write', 'to_review').data('branch').priority === 1"
    )
    assert page.evaluate("branchline.edgeByName('write', 'great').data('branch').priority") == 999
    page.wait_for_function("branchline.dirty")
    page.keyboard.press("Control+s")
    wait_saved(page)
    branches = document_from_recipe(story)["steps"][0]["branches"]
    assert [(b["name"], b["priority"]) for b in branches] == [
        ("to_review", 1),
        ("broken", 2),
        ("too_short", 3),
        ("great", 999),
    ]


def test_a_save_from_another_tab_is_a_clear_conflict_not_a_lost_edit(
    browser_page: BrowserPage, open_page: Any, e2e_user: Any, story: Recipe
) -> None:
    mine = browser_page.open_editor(story.slug)
    theirs_page = open_page(e2e_user, "other-tab")
    theirs = theirs_page.open_editor(story.slug)

    theirs.click("#outline .outline-item.step >> text=Review")
    theirs.wait_for_selector("#panel [name=name]")
    theirs.fill("#panel [name=name]", "Their review")
    apply_panel(theirs)
    theirs.click("#btn-save")
    wait_saved(theirs)

    mine.click("#outline .outline-item.step >> text=Write")
    mine.wait_for_selector("#panel [name=name]")
    mine.fill("#panel [name=name]", "My write")
    apply_panel(mine)
    mine.click("#btn-save")
    mine.wait_for_selector("#conflict:not([hidden])")
    assert "Someone else saved this draft" in mine.inner_text("#conflict")
    assert mine.inner_text("#save-state") == "● Unsaved changes"
    browser_page.screenshot("conflict")
    story.refresh_from_db()
    assert document_from_recipe(story)["steps"][1]["name"] == "Their review"

    mine.click("#btn-conflict-overwrite")
    wait_saved(mine)
    assert document_from_recipe(story)["steps"][0]["name"] == "My write"


def test_a_test_run_highlights_its_path_and_becomes_a_passing_test_with_coverage(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe, run_worker: Any
) -> None:
    recipe_publish(recipe=story, user=e2e_user)
    page = browser_page.open_editor(story.slug)
    page.click("#tab-testrun")
    page.wait_for_selector("#panel-testrun [name=input_topic]")
    page.fill("#panel-testrun [name=input_topic]", "a lighthouse")
    page.fill("#panel-testrun [name=script_writer]", f"Too short.\n---\n{STORY}")
    page.fill("#panel-testrun [name=script_judge]", "9")
    click_settled(page, "#panel-testrun button.primary")
    page.wait_for_selector("#testrun-live[data-run]")
    page.wait_for_function("branchline.testRunFinished", timeout=30000)
    page.wait_for_selector("#testrun-result .run-result")

    assert "run-visited" in page.evaluate("branchline.nodeByKey('write').classes()")
    assert "run-visited" not in page.evaluate("branchline.nodeByKey('review').classes()")
    assert "run-taken" in edge_classes(page, "write", "too_short")
    assert "run-taken" in edge_classes(page, "write", "great")
    assert "run-lost" in edge_classes(page, "write", "broken")
    reason = page.evaluate("branchline.edgeByName('write', 'broken').data('runReason')")
    assert reason.startswith("not taken: ")
    point = canvas_point(page, "branchline.edgeByName('write', 'broken')")
    page.mouse.move(point["x"], point["y"])
    page.wait_for_selector("#edge-tip:not([hidden])")
    assert "not taken: " in page.inner_text("#edge-tip")
    browser_page.screenshot("test-run")

    result = page.inner_text("#testrun-result")
    assert "succeeded" in result
    assert "write → write" in result
    assert page.input_value("#test-save [name=expected_path]") == "write → write"
    page.fill("#test-save [name=name]", "short then approved")
    click_settled(page, "#test-save button[type=submit]")
    page.wait_for_selector("#test-save .applied")
    assert "it passed" in page.inner_text("#test-save")

    page.click("#tab-tests")
    page.wait_for_selector("#tests .test-row")
    first_run = RecipeTest.objects.get().last_run_id
    wait_settled(page)  # the list reloads when a test is saved
    page.evaluate("window.listBeforeRun = document.getElementById('tests')")
    with page.expect_response(lambda response: "/tests/run/" in response.url):
        click_settled(page, "#tests button.primary")
    assert RecipeTest.objects.get().last_run_id != first_run
    page.wait_for_function(
        "document.getElementById('tests') !== window.listBeforeRun"
        " && document.querySelector('#tests .test-row .badge')?.textContent === 'passed'"
        " && !document.querySelector('#tests[hx-trigger]')",
        timeout=30000,
    )
    assert RecipeTest.objects.get().last_result == "passed"
    coverage = page.inner_text("#tests")
    assert "2 of 7" in coverage
    untaken = page.locator("#tests .untaken")
    assert "to_review" in untaken.inner_text()
    assert "great" not in untaken.inner_text()
    page.click("#btn-show-coverage")
    assert "uncovered" in edge_classes(page, "write", "to_review")
    assert "covered" in edge_classes(page, "write", "great")
    browser_page.screenshot("coverage")


def test_versions_compare_and_restore(
    browser_page: BrowserPage, e2e_user: Any, story: Recipe
) -> None:
    recipe_publish(recipe=story, user=e2e_user, note="original")
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.branch >> text=len < 40")
    page.wait_for_selector("#panel [name='c-value']")
    page.fill("#panel [name='c-value']", "80")
    apply_panel(page)
    page.click("#tab-versions")
    page.fill("#panel-versions [name=note]", "longer minimum")
    click_settled(page, "#panel-versions button.primary")  # saves the draft first, then publishes
    page.wait_for_selector("#panel-versions .applied")
    assert story.versions.count() == 2
    click_settled(page, "#panel-versions form[aria-label='Compare versions'] button[type=submit]")
    page.wait_for_selector("#version-diff .diff")
    diff = page.inner_text("#version-diff")
    assert "From v1 to v2" in diff
    assert "too_short" in diff
    with page.expect_navigation():
        click_settled(page, "#panel-versions tr:has-text('v1') button:has-text('Restore')")
    browser_page.wait_ready()
    assert "len < 40" in page.inner_text("#outline")
    story.refresh_from_db()
    assert document_from_recipe(story)["steps"][0]["branches"][0]["when"]["value"] == 40


def test_a_publish_includes_the_save_in_flight_and_refuses_a_draft_saved_elsewhere(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.branch >> text=len < 40")
    page.wait_for_selector("#panel [name='c-value']")
    page.fill("#panel [name='c-value']", "60")
    apply_panel(page)
    page.click("#tab-versions")
    page.wait_for_selector("#panel-versions [name=note]")
    wait_settled(page)
    # Saving and publishing at once: the publish waits for the save and carries its revision.
    page.evaluate(
        "() => { branchline.save(false);"
        " document.querySelector('#panel-versions button.primary').click(); }"
    )
    page.wait_for_selector("#panel-versions .applied")
    assert story.versions.get().document["steps"][0]["branches"][0]["when"]["value"] == 60

    story.refresh_from_db()
    recipe_update(recipe=story, document={**document_from_recipe(story), "name": "Theirs"})
    click_settled(page, "#panel-versions button.primary")
    page.wait_for_selector("#panel-versions .error")
    assert "saved elsewhere" in page.inner_text("#panel-versions")
    assert story.versions.count() == 1


def test_every_demo_recipe_opens_renders_and_round_trips_unchanged(
    browser_page: BrowserPage, e2e_user: Any
) -> None:
    call_command("seed_demo", stdout=io.StringIO())
    e2e_user.is_staff = True
    e2e_user.save()
    files = sorted((settings.BASE_DIR / "workflows" / "demo" / "recipes").glob("*.json"))
    assert files, "no demo recipes found"
    for path in files:
        slug = json.loads(path.read_text())["slug"]
        recipe = Recipe.objects.get(slug=slug)
        before = copy.deepcopy(document_from_recipe(recipe))
        revision = recipe.revision
        page = browser_page.open_editor(slug)
        counts = page.evaluate(
            "() => [branchline.cy.nodes('[kind = \"step\"]').length,"
            " branchline.cy.edges('[kind = \"branch\"]').length,"
            " branchline.cy.nodes('[kind = \"missing\"]').length]"
        )
        branches = sum(len(s.get("branches", [])) for s in before["steps"])
        assert counts == [len(before["steps"]), branches, 0], slug
        page.wait_for_selector("#lint .count")
        assert "0 errors" in page.inner_text("#lint .count"), slug
        browser_page.screenshot(f"demo-{slug}")
        assert page.evaluate("branchline.save(false)"), slug
        recipe.refresh_from_db()
        assert recipe.revision == revision + 1, slug
        assert document_from_recipe(recipe) == before, slug


def test_export_downloads_the_draft_and_import_replaces_it(
    browser_page: BrowserPage, story: Recipe, tmp_path: Any
) -> None:
    page = browser_page.open_editor(story.slug)
    with page.expect_download() as download:
        page.click("#btn-export")
    exported = json.loads(download.value.path().read_text())
    assert exported == document_from_recipe(story)

    changed = story_document(slug="whatever", name="Imported over the draft")
    changed["steps"][0]["branches"][0]["when"]["value"] = 120
    upload = tmp_path / "recipe.json"
    upload.write_text(json.dumps(changed))
    page.click("#tab-recipe")
    page.wait_for_selector("#import-file")
    page.set_input_files("#import-file", str(upload))
    with page.expect_navigation():
        click_settled(page, ".import-draft button[type=submit]")
    browser_page.wait_ready()
    assert page.inner_text("#recipe-title") == "Imported over the draft"
    assert "len < 120" in page.inner_text("#outline")
    story.refresh_from_db()
    assert story.slug == "story"

    bad = tmp_path / "bad.yaml"
    bad.write_text("format: nope\nsteps: []\n")
    page.click("#tab-recipe")
    page.wait_for_selector("#import-file")
    page.set_input_files("#import-file", str(bad))
    click_settled(page, ".import-draft button[type=submit]")
    page.wait_for_selector("#import-result .error")
    assert "The file was not imported" in page.inner_text("#import-result")


def test_the_test_run_tab_follows_a_publish_made_after_it_opened(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#tab-testrun")
    page.wait_for_selector("#panel-testrun #testrun")
    assert "Publish the recipe" in page.inner_text("#panel-testrun")
    page.click("#tab-versions")
    click_settled(page, "#panel-versions button.primary")
    page.wait_for_selector("#panel-versions .applied")
    page.click("#tab-testrun")
    page.wait_for_selector("#panel-testrun [name=input_topic]")
    assert "Runs v1" in page.inner_text("#panel-testrun")


def test_the_step_form_shows_the_settings_of_its_kind_only(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#outline .outline-item.step >> text=Write")
    page.wait_for_selector("#panel [name=kind]")
    assert not page.is_visible("#panel [name=options]")
    assert not page.is_visible("#panel [name=tree]")
    page.select_option("#panel [name=kind]", "human")
    assert page.is_visible("#panel [name=options]")
    page.select_option("#panel [name=kind]", "decision_tree")
    assert page.is_visible("#panel [name=tree]")
    assert not page.is_visible("#panel [name=options]")


# Drafts list branches by priority (as the rows are read back); equal priorities keep their order.
ODD_DOCUMENTS = [
    {**story_document(), "extra_top_level": {"kept": True}},
    story_document(
        steps=[
            {
                "key": "a",
                "name": "A",
                "kind": "llm",
                "actor": "writer",
                "prompt": "",
                "position": {"x": 1.5, "y": -2},
                "branches": [
                    {
                        "name": "dangling",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "nowhere",
                        "active": False,
                    },
                    {
                        "name": "skip",
                        "priority": 2,
                        "when": {"type": "default"},
                        "action": "SKIP_TO_END",
                        "target": "",
                    },
                    {
                        "name": "self",
                        "priority": 3,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": "a",
                        "params": {"x": [1, {"y": None}]},
                    },
                ],
            },
            {
                "key": "b",
                "name": "B",
                "kind": "decision_tree",
                "prompt": "",
                "tree": {"version": "1", "tree": {"type": "leaf", "prompt": "a"}},
                "leaf_targets": {"a": "@end"},
                "branches": [],
            },
            {
                "key": "c",
                "name": "C",
                "kind": "human",
                "actor": "editors",
                "prompt": "",
                "options": ["approve"],
                "branches": [
                    {
                        "name": "same_priority",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "ENHANCE_PROMPT",
                        "target": "",
                        "params": {"prompt_enhancement": "x"},
                    },
                    {
                        "name": "same_priority_2",
                        "priority": 1,
                        "when": {"type": "default"},
                        "action": "END_RECIPE",
                        "target": "@end",
                    },
                ],
            },
        ]
    ),
]


def test_the_converter_gives_back_the_document_it_was_given(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    for document in ODD_DOCUMENTS:
        back = page.evaluate(
            """(doc) => {
                const built = RecipeGraph.toElements(doc);
                const cy = cytoscape({headless: true, elements: built.elements});
                RecipeGraph.syncEdges(cy);
                return RecipeGraph.toDocument(cy, built.meta).document;
            }""",
            document,
        )
        assert back == document

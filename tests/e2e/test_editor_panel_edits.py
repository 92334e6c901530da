"""The side panel never loses an edit: fields apply as typed, an invalid one waits beside its
error while the others apply, the save state says what is not applied, and a broken reference
is fixed in one click."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from tests.editor.conftest import story_document
from tests.factories import ActorFactory
from workflows.models import Recipe
from workflows.services import recipe_draft_save, recipe_import

from .conftest import BrowserPage
from .editor_page import apply_panel, wait_settled
from .test_everywhere import axe_violations

pytestmark = pytest.mark.e2e


def step_data(page: Any, key: str) -> dict[str, Any]:
    return page.evaluate(f"branchline.nodeByKey('{key}').data('step')")


def open_step(page: Any, name: str) -> None:
    page.click(f"#outline .outline-item.step >> text={name}")
    page.wait_for_function(f"document.querySelector('#panel [name=name]')?.value === {name!r}")


def watch_save_state(page: Any) -> None:
    """Record every text the save state shows from now on (`window.saveStates`)."""
    page.evaluate(
        """() => {
            window.saveStates = [];
            const state = document.getElementById('save-state');
            new MutationObserver(() => window.saveStates.push(state.textContent))
              .observe(state, {childList: true, characterData: true, subtree: true});
        }"""
    )


def test_an_edit_is_kept_after_switching_steps_without_apply(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.fill("#panel [name=name]", "Draft")
    # Another step at once, before the pause that applies it: the edit applies all the same.
    open_step(page, "Review")
    wait_settled(page)
    assert step_data(page, "write")["name"] == "Draft"

    # An edit that is not right yet is kept too, with its error, when the step is opened again.
    open_step(page, "Draft")
    page.fill("#panel [name=prompt]", "Reply to {message}")
    open_step(page, "Review")
    wait_settled(page)
    assert page.inner_text("#save-state") == "● Unapplied changes: Prompt"
    open_step(page, "Draft")
    wait_settled(page)
    assert page.input_value("#panel [name=prompt]") == "Reply to {message}"
    assert "message" in page.inner_text("#panel .prompt-editor .field-error")

    # Undo takes back the applied name, one change per pause.
    page.click("#btn-undo")
    wait_settled(page)
    assert step_data(page, "write")["name"] == "Write"


def test_an_invalid_field_is_shown_beside_itself_while_the_valid_ones_apply(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.fill("#panel [name=name]", "Draft")
    page.fill("#panel [name=prompt]", "Reply to {message}")
    wait_settled(page)
    step = step_data(page, "write")
    assert step["name"] == "Draft"
    assert step["prompt"] == "Write a story about {topic}"
    errors = page.locator("#panel .field-error")
    assert errors.count() == 1  # beside the prompt, not repeated at the top
    assert page.locator("#panel .prompt-editor .field-error").count() == 1
    assert page.inner_text("#panel .panel-state") == "Not applied: Prompt (see below)"
    assert page.get_attribute("#panel [name=prompt]", "aria-invalid") == "true"
    browser_page.screenshot("panel-invalid-field")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert axe_violations(page) == [], scheme


def test_the_save_state_never_says_saved_over_unapplied_work(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    assert page.is_checked("#autosave")
    open_step(page, "Write")
    watch_save_state(page)
    page.fill("#panel [name=name]", "Draft")
    page.fill("#panel [name=prompt]", "Reply to {message}")
    # The valid name applies and is autosaved; the prompt is not applied, and the state says so.
    page.wait_for_function("window.saveStates.includes('Saving…')", timeout=10000)
    wait_settled(page)
    story.refresh_from_db()
    assert page.inner_text("#save-state") == "● Unapplied changes: Prompt"
    assert "Saved" not in page.evaluate("window.saveStates")
    assert page.evaluate(
        "() => { const e = new Event('beforeunload', {cancelable: true});"
        " window.dispatchEvent(e); return e.defaultPrevented; }"
    )

    # Declared in one click, the input lets the prompt apply; then it is saved.
    page.click("#panel .prompt-editor button.fix:text('Add `message` as an input')")
    page.wait_for_function("document.getElementById('save-state').textContent === 'Saved'")
    assert step_data(page, "write")["prompt"] == "Reply to {message}"


def test_add_input_fix_declares_the_input_and_applies_the_prompt_in_one_undo(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.fill("#panel [name=prompt]", "Reply to {message}")
    fix = page.wait_for_selector("#panel .prompt-editor button.fix")
    assert fix.inner_text() == "Add `message` as an input"
    fix.click()
    apply_panel(page)
    assert step_data(page, "write")["prompt"] == "Reply to {message}"
    inputs = page.evaluate("branchline.meta().inputs")
    assert inputs["message"] == {"type": "string"}
    assert page.locator("#panel .field-error").count() == 0
    # The prompt's names offer the new input now.
    assert page.locator("#panel .chip[data-insert='message']").count() == 1

    page.click("#btn-undo")
    wait_settled(page)
    assert "message" not in page.evaluate("branchline.meta().inputs")
    assert step_data(page, "write")["prompt"] == "Write a story about {topic}"


def judged_recipe(user: Any) -> Recipe:
    """The story, saved with a judge that names an actor the recipe has no alias for."""
    doc = story_document(slug="judged", name="Judged")
    doc["actors"].pop("judge")
    doc["steps"][0]["validation"] = {
        "threshold": 0.5,
        "judge": "editor-judge",
        "fallback": "Sorry.",
    }
    doc["steps"][0]["branches"] = [
        b for b in doc["steps"][0]["branches"] if "evaluator" not in b["when"]
    ]
    recipe = recipe_import(user=user, data=story_document(slug="judged")).recipe
    recipe_draft_save(recipe=recipe, document=doc)  # saved with its error, as a draft may be
    return recipe


def test_a_judge_naming_an_actor_without_alias_is_fixed_in_one_click(
    browser_page: BrowserPage, e2e_user: Any, story_actors: None
) -> None:
    page = browser_page.open_editor(judged_recipe(e2e_user).slug)
    open_step(page, "Write")
    page.fill("#panel [name=name]", "Draft")
    wait_settled(page)
    fix = page.locator("#panel button.fix:text('Add judge alias for editor-judge')")
    assert fix.count() == 1
    fix.click()
    apply_panel(page)
    assert page.evaluate("branchline.meta().actors")["editor-judge"] == "editor-judge"
    assert step_data(page, "write")["validation"]["judge"] == "editor-judge"
    assert page.locator("#panel .field-error").count() == 0


def test_every_actor_picker_lists_every_actor_and_adds_the_alias(
    browser_page: BrowserPage, story: Recipe
) -> None:
    ActorFactory(name="other-judge")
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.click("#panel summary:text('Validation')")
    page.check("#panel [name=validation_enabled]")
    judges = page.eval_on_selector_all(
        "#panel [name=judge] option", "options => options.map(o => o.value)"
    )
    actors = page.eval_on_selector_all(
        "#panel [name=actor] option", "options => options.map(o => o.value)"
    )
    assert judges[1:] == actors[1:]  # one list, from one place
    page.fill("#panel [name=fallback]", "Sorry.")
    page.select_option("#panel [name=judge]", "+other-judge")
    apply_panel(page)
    assert step_data(page, "write")["validation"]["judge"] == "other-judge"
    assert page.evaluate("branchline.meta().actors")["other-judge"] == "other-judge"
    # Drawn again from the document, the picker names the new alias.
    assert page.input_value("#panel [name=judge]") == "other-judge"


def test_the_evaluator_picker_lists_every_actor_and_fixes_a_missing_alias_in_one_click(
    browser_page: BrowserPage, e2e_user: Any, story_actors: None
) -> None:
    doc = story_document(slug="evaluated", name="Evaluated")
    doc["actors"].pop("judge")
    doc["steps"][0]["branches"][2]["when"]["evaluator"] = "editor-judge"
    recipe = recipe_import(user=e2e_user, data=story_document(slug="evaluated")).recipe
    recipe_draft_save(recipe=recipe, document=doc)  # saved with its error, as a draft may be
    page = browser_page.open_editor(recipe.slug)
    open_step(page, "Write")
    actors = page.eval_on_selector_all(
        "#panel [name=actor] option", "options => options.map(o => o.value)"
    )
    page.click('#outline [data-path="steps[0].branches[2]"]')
    page.wait_for_selector("#panel [name=c-evaluator]")
    evaluators = page.eval_on_selector_all(
        "#panel [name=c-evaluator] option", "options => options.map(o => o.value)"
    )
    assert set(actors) <= set(evaluators)  # every actor, as the step's picker lists them
    assert "+editor-judge" in evaluators
    page.fill("#panel [name=name]", "very_good")
    wait_settled(page)
    fix = page.locator("#panel button.fix:text('Add judge alias for editor-judge')")
    assert fix.count() == 1
    fix.click()
    apply_panel(page)
    assert page.evaluate("branchline.meta().actors")["editor-judge"] == "editor-judge"
    branch = page.evaluate("branchline.edgeByName('write', 'very_good').data('branch')")
    assert branch["when"]["evaluator"] == "editor-judge"
    assert page.locator("#panel .field-error").count() == 0


def test_the_recipe_tab_applies_as_typed_and_keeps_what_is_not_right_across_tabs(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    page.click("#tab-recipe")
    page.wait_for_selector("#panel-recipe [name='recipe-description']")
    page.fill("#panel-recipe [name='recipe-description']", "Stories, reviewed.")
    page.fill("#panel-recipe [name='recipe-name']", "")
    wait_settled(page)
    assert "Name" in page.inner_text("#save-state")
    assert page.evaluate("branchline.meta().description") == "Stories, reviewed."
    assert page.evaluate("branchline.meta().name") == story.name
    page.click("#tab-properties")
    page.click("#tab-recipe")
    page.wait_for_selector("#panel-recipe [name='recipe-name']")
    wait_settled(page)
    assert page.input_value("#panel-recipe [name='recipe-name']") == ""
    assert page.locator("#panel-recipe .field-error").count() == 1
    page.fill("#panel-recipe [name='recipe-name']", "Stories")
    wait_settled(page)
    assert page.evaluate("branchline.meta().name") == "Stories"
    assert page.evaluate("branchline.meta().description") == "Stories, reviewed."


class HeldAnswers:
    """Hold the panels' live requests (those that ask for JSON) until released, or fail them."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.held: list[Any] = []
        self.answer: dict[str, Any] | None = None  # a made-up answer, else the server's
        self.fail = False
        page.route("**/*", self._route)

    def _route(self, route: Any) -> None:
        if route.request.headers.get("accept") != "application/json":
            route.continue_()
        elif self.fail:
            route.abort()
        elif self.answer is not None:
            route.fulfill(**self.answer)
        else:
            self.held.append(route)

    def wait_held(self, count: int = 1) -> None:
        for _ in range(100):
            if len(self.held) >= count:
                return
            self.page.wait_for_timeout(50)
        raise AssertionError(f"{len(self.held)} requests held, not {count}")

    def release(self) -> None:
        """Let the held requests through, and those to come."""
        held, self.held = self.held, []
        for route in held:
            route.continue_()
        self.page.unroute("**/*", self._route)


def branch_data(page: Any, step: str, name: str) -> Any:
    return page.evaluate(f"branchline.edgeByName('{step}', '{name}')?.data('branch')")


def open_branch(page: Any, path: str) -> None:
    page.click(f'#outline .outline-item[data-path="{path}"]')
    page.wait_for_selector("#panel [data-editor-form=branch]")
    wait_settled(page)


def test_a_bad_condition_value_waits_beside_itself_while_the_rest_of_the_branch_applies(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    open_branch(page, "steps[0].branches[0]")
    page.fill("#panel [name=name]", "much_too_short")
    page.fill("#panel [name=c-value]", "abc")
    wait_settled(page)
    branch = branch_data(page, "write", "much_too_short")
    assert branch is not None
    assert branch["when"]["value"] == 40
    assert page.input_value("#panel [name=c-value]") == "abc"
    # The error is the field's description, and it is not shouted again on every answer.
    error = page.locator("#panel .field-error")
    assert error.count() == 1
    described = page.get_attribute("#panel [name=c-value]", "aria-describedby") or ""
    assert error.get_attribute("id") in described.split()
    assert page.locator("#panel [role=alert]").count() == 0
    error.evaluate("(p) => { p.dataset.seen = '1'; }")
    page.fill("#panel [name=name]", "far_too_short")
    wait_settled(page)
    assert branch_data(page, "write", "far_too_short") is not None
    assert page.get_attribute("#panel .field-error", "data-seen") == "1"  # the same paragraph


def test_edits_of_several_panels_wait_behind_a_slow_answer_and_all_apply(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    answers = HeldAnswers(page)
    open_step(page, "Write")
    page.fill("#panel [name=name]", "Draft")
    page.press("#panel [name=name]", "Enter")
    answers.wait_held()
    # Two more panels edited while the first answer is on its way: each waits its turn.
    open_step(page, "Review")
    page.fill("#panel [name=name]", "Check")
    page.wait_for_timeout(700)  # its pause passes: it waits behind the first
    page.click("#tab-recipe")
    page.wait_for_selector("#panel-recipe [name='recipe-description']")
    page.fill("#panel-recipe [name='recipe-description']", "Stories, checked.")
    page.wait_for_timeout(700)
    answers.release()
    wait_settled(page)
    assert step_data(page, "write")["name"] == "Draft"
    assert step_data(page, "review")["name"] == "Check"
    assert page.evaluate("branchline.meta().description") == "Stories, checked."
    assert "Unapplied" not in page.inner_text("#save-state")


def test_undo_while_an_edit_applies_takes_back_that_edit_and_redo_brings_it_back(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.fill("#panel [name=name]", "Draft")
    apply_panel(page)
    answers = HeldAnswers(page)
    page.fill("#panel [name=prompt]", "Once upon a {topic}")
    answers.wait_held()
    page.click("#btn-undo")
    answers.release()
    wait_settled(page)
    # The edit that was applying applied, and was the one undone: the name stays.
    step = step_data(page, "write")
    assert step["name"] == "Draft"
    assert step["prompt"] == "Write a story about {topic}"
    page.click("#btn-redo")
    wait_settled(page)
    assert step_data(page, "write")["prompt"] == "Once upon a {topic}"
    assert page.input_value("#panel [name=prompt]") == "Once upon a {topic}"


def test_a_failed_request_keeps_an_unticked_box_unticked_and_says_why_clearly(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    answers = HeldAnswers(page)
    answers.fail = True
    open_branch(page, "steps[0].branches[0]")
    page.uncheck("#panel [name=active]")
    page.wait_for_selector("#panel .panel-state.unapplied")
    assert page.inner_text("#panel .panel-state") == (
        "Not applied: The server could not be reached. Your edits are kept here."
    )
    open_step(page, "Review")
    answers.release()
    open_branch(page, "steps[0].branches[0]")
    assert not page.is_checked("#panel [name=active]")
    assert branch_data(page, "write", "too_short").get("active") is False


def test_a_refused_request_and_an_ended_session_say_so(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    answers = HeldAnswers(page)
    reason = "The editor sent something unexpected (step: out of range). Reload the page."
    answers.answer = {"status": 400, "body": reason, "content_type": "text/html"}
    open_step(page, "Write")
    page.fill("#panel [name=name]", "Draft")
    page.wait_for_selector("#panel .panel-state.unapplied")
    assert page.inner_text("#panel .panel-state") == (
        f"Not applied: {reason} Your edits are kept here."
    )
    answers.release()
    # The session ends (the CSRF cookie stays): the sign-in page answers.
    page.context.clear_cookies(name=settings.SESSION_COOKIE_NAME)
    page.fill("#panel [name=name]", "Drafted")
    page.wait_for_selector("#panel .panel-state.unapplied")
    assert "session has ended" in page.inner_text("#panel .panel-state")
    assert page.input_value("#panel [name=name]") == "Drafted"


def test_a_fix_keeps_focus_on_its_field_and_its_input_goes_once_declared(
    browser_page: BrowserPage, story: Recipe
) -> None:
    page = browser_page.open_editor(story.slug)
    open_step(page, "Write")
    page.fill("#panel [name=prompt]", "Reply to {message}")
    wait_settled(page)
    watch = """() => { window.announced = [];
        const region = document.querySelector('#panel [data-panel-announce]');
        new MutationObserver(() => window.announced.push(region.textContent))
          .observe(region, {childList: true, characterData: true, subtree: true}); }"""
    page.evaluate(watch)
    answers = HeldAnswers(page)
    page.click("#panel button.fix:text('Add `message` as an input')")
    answers.wait_held()
    assert page.evaluate("document.activeElement.name") == "prompt"
    page.fill("#panel [name=name]", "Draft")  # typed before the fix is answered
    answers.release()
    wait_settled(page)
    step = step_data(page, "write")
    assert (step["name"], step["prompt"]) == ("Draft", "Reply to {message}")
    # Declared, the input is not asked for again (it would come back if deleted since).
    assert page.locator("#panel input[name=add_input]").count() == 0
    assert page.evaluate("window.announced") == ["All changes applied."]
    assert page.get_attribute("#panel [data-panel-state]", "role") is None

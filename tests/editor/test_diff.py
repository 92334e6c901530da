"""What changed between two recipe documents."""

from __future__ import annotations

import copy

from editor.diff import documents_diff

from .conftest import story_document


def test_it_finds_no_change_between_equal_documents() -> None:
    diff = documents_diff(story_document(), story_document())
    assert diff.is_empty
    assert not diff.steps_moved


def test_it_lists_steps_and_branches_added_removed_and_changed() -> None:
    old = story_document()
    new = copy.deepcopy(old)
    new["steps"][0]["prompt"] = "Write a long story about {topic}"
    new["steps"][0]["branches"][0]["when"]["value"] = 80
    del new["steps"][0]["branches"][1]
    new["steps"][0]["branches"].append(
        {
            "name": "fallback",
            "priority": 5,
            "when": {"type": "default"},
            "action": "CONTINUE",
            "target": "review",
        }
    )
    new["steps"].append(
        {
            "key": "extra",
            "name": "Extra",
            "kind": "llm",
            "actor": "writer",
            "prompt": "",
            "branches": [],
        }
    )
    new["steps"][1]["position"] = {"x": 0, "y": 0}
    diff = documents_diff(old, new)
    assert [c.step for c in diff.steps_added] == ["extra"]
    assert [(c.step, c.fields) for c in diff.steps_changed] == [("write", ["prompt"])]
    assert [(c.step, c.branch) for c in diff.branches_removed] == [("write", "broken")]
    assert [(c.step, c.branch) for c in diff.branches_added] == [("write", "fallback")]
    assert [(c.branch, c.fields, c.summary) for c in diff.branches_changed] == [
        ("too_short", ["when"], "len < 80")
    ]
    assert diff.steps_moved == ["review"]
    assert not diff.order_changed


def test_it_reports_removed_steps_with_their_branches_and_reordering() -> None:
    old = story_document()
    new = copy.deepcopy(old)
    new["steps"].reverse()
    new["name"] = "Renamed"
    diff = documents_diff(old, new)
    assert diff.order_changed
    assert diff.recipe_fields == ["name"]
    gone = documents_diff(old, {**old, "steps": old["steps"][:1]})
    assert [c.step for c in gone.steps_removed] == ["review"]
    assert {c.branch for c in gone.branches_removed} == {"approved", "rejected", "revise"}


def test_it_reads_broken_documents_without_failing() -> None:
    diff = documents_diff({"steps": "no"}, {"steps": [1, {"key": 2}, {"key": "a"}]})
    assert [c.step for c in diff.steps_added] == ["a"]

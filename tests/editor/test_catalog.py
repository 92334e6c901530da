"""The editor's reading of the engine's catalog: types, actions, step kinds' fields."""

from __future__ import annotations

from editor.catalog import (
    canonical_action,
    catalog,
    condition_type,
    kinds_taking,
    new_operand,
    operator_names,
    repeats,
)


def test_a_new_operand_is_the_first_condition_type_with_its_first_operator() -> None:
    first = catalog()["conditions"][0]
    assert new_operand() == {"type": first["type"], "operator": first["operators"][0]["name"]}


def test_it_finds_a_condition_type_by_its_alias() -> None:
    spec = condition_type("check_count")
    assert spec is not None
    assert spec["type"] == "field_compare"
    assert condition_type("no_such_type") is None
    assert condition_type(["length_check"]) is None


def test_it_lists_operators_with_their_aliases_last() -> None:
    spec = condition_type("length_check")
    assert spec is not None
    names = operator_names(spec)
    assert names[0] == "less_than"
    assert names[-2:] == ["greater_than_or_equal", "less_than_or_equal"]


def test_it_resolves_action_aliases() -> None:
    assert canonical_action("retry_different_actor") == "RETRY_WITH_DIFFERENT_ACTOR"
    assert canonical_action("HUMAN_REVIEW_NEEDED") == "HUMAN_REVIEW"
    assert canonical_action("CONTINUE") == "CONTINUE"
    assert repeats("REQUEST_MORE_DETAIL")
    assert not repeats("CONTINUE")


def test_it_tells_which_step_kinds_hold_a_field() -> None:
    assert kinds_taking("options") == ["human"]
    assert kinds_taking("routes") == ["classify"]
    assert "decision_tree" not in kinds_taking("actor")

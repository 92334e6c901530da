"""The format documentation's tables of step kinds and condition types come from the registries."""

from __future__ import annotations

from workflows.engine.conditions.registry import TYPES
from workflows.engine.docs import PAGE, conditions_table, rewrite, step_kinds_table
from workflows.engine.step_kinds.registry import KINDS


def test_the_tables_of_the_format_page_are_up_to_date() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert rewrite(page) == page, "run `python -m workflows.engine.docs` to rewrite the tables"


def test_the_step_kinds_table_has_a_row_per_kind_with_its_actor() -> None:
    rows = step_kinds_table().splitlines()[2:]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| `llm`", "a model"],
        ["| `human`", "a reviewer group (`@human:GROUP`)"],
        ["| `decision_tree`", "—"],
        ["| `classify`", "a model"],
        ["| `retrieve`", "—"],
        ["| `tool`", "—"],
        ["| `intent`", "a model"],
        ["| `transform`", "—"],
        ["| `http`", "—"],
    ]
    assert len(rows) == len(KINDS)
    assert "`escalate_to` (actor)" in rows[1]
    assert "`options` (list, default `approve`, `reject`, `revise`)" in rows[1]
    assert "`sources` (text)" in rows[0]
    assert "`sources` (text, required)" in rows[4]


def test_the_table_has_a_row_per_condition_type_and_one_for_the_combinators() -> None:
    rows = conditions_table().splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [
        *(f"| `{kind.name}`" + (" (`check_count`)" if kind.aliases else "") for kind in TYPES),
        "| `and`, `or`, `not`",
    ]
    assert "`unit` (one of `chars`, `words`, default `chars`)" in rows[1]
    assert "`flags` (text from `i`, `m`, `s`)" in rows[0]

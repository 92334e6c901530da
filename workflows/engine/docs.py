"""Write the tables of step kinds, condition types and budget limits of `docs/recipe-format.md`
from the registries.

Run `python -m workflows.engine.docs` after changing a step kind or a condition type: it
rewrites the part of the page between each pair of markers below. A test fails while the page
is out of date.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from workflows.engine.budget import FIELDS as BUDGET_FIELDS
from workflows.engine.conditions.base import ConditionType
from workflows.engine.conditions.logical import HELP as LOGICAL_HELP
from workflows.engine.conditions.logical import LOGICAL_TYPES
from workflows.engine.conditions.registry import TYPES
from workflows.engine.field_spec import FieldSpec
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.registry import KINDS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "recipe-format.md"
# What a step kind's actor must name, as the table says it.
_ACTORS = {"model": "a model", "reviewers": "a reviewer group (`@human:GROUP`)", None: "—"}


def step_kinds_table() -> str:
    """Return the Markdown table of every step kind: its actor, fields and what it does."""
    rows = [
        "| kind | actor | fields | what it does |",
        "|---|---|---|---|",
        *(_kind_row(kind) for kind in KINDS),
    ]
    return "\n".join(rows)


def _kind_row(kind: StepKind) -> str:
    fields = ", ".join(_field(f) for f in kind.fields if f.name != "actor") or "—"
    return _cells(f"`{kind.name}`", _ACTORS[kind.actor_kind], fields, kind.help)


def conditions_table() -> str:
    """Return the Markdown table of every condition type: operators, fields, when true."""
    rows = [
        "| type | operators (aliases) | fields | true when |",
        "|---|---|---|---|",
        *(_row(kind) for kind in TYPES),
        _cells(", ".join(f"`{name}`" for name in LOGICAL_TYPES), "—", "`conditions`", LOGICAL_HELP),
    ]
    return "\n".join(rows)


def _row(kind: ConditionType) -> str:
    name = f"`{kind.name}`"
    if kind.aliases:
        name += f" ({', '.join(f'`{a}`' for a in kind.aliases)})"
    operators = ", ".join(f"`{op}`" for op in kind.operator_names)
    if kind.operator_aliases:
        operators += f" ({', '.join(f'`{a}`' for a in kind.operator_aliases)})"
    fields = ", ".join(_field(f) for f in kind.fields) or "—"
    return _cells(name, operators, fields, kind.help)


def _field(spec: FieldSpec) -> str:
    choices = ", ".join(f"`{c}`" for c in spec.choices)
    if spec.kind == "choice":
        details = [f"one of {choices}"]
    else:
        details = [f"{spec.kind} from {choices}" if choices else spec.kind]
    if spec.required:
        details.append("required")
    elif isinstance(spec.default, tuple):
        details.append(f"default {', '.join(f'`{item}`' for item in spec.default)}")
    elif spec.default not in (None, ""):
        shown = str(spec.default).lower() if isinstance(spec.default, bool) else spec.default
        details.append(f"default `{shown}`")
    if spec.aliases:
        details.append(f"also read as {', '.join(f'`{alias}`' for alias in spec.aliases)}")
    return f"`{spec.name}` ({', '.join(details)})"


def budget_table() -> str:
    """Return the Markdown table of a recipe's budget limits."""
    rows = [
        "| limit | a run may spend at most |",
        "|---|---|",
        *(_cells(f"`{name}`", meaning) for name, meaning in BUDGET_FIELDS),
    ]
    return "\n".join(rows)


def not_applicable_list() -> str:
    """Return the line naming the condition types not applicable on a failed step."""
    names = ", ".join(f"`{kind.name}`" for kind in TYPES if kind.reads_answer)
    return f"The conditions that read the answer: {names}."


def _cells(*cells: str) -> str:
    # A `|` inside a cell would end it.
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


# Each table: the marker it follows, the marker it ends before, what writes it.
SECTIONS: tuple[tuple[str, str, Callable[[], str]], ...] = (
    (
        "<!-- step kinds table: written by `python -m workflows.engine.docs` -->",
        "<!-- end of the step kinds table -->",
        step_kinds_table,
    ),
    (
        "<!-- conditions table: written by `python -m workflows.engine.docs` -->",
        "<!-- end of the conditions table -->",
        conditions_table,
    ),
    (
        "<!-- budget table: written by `python -m workflows.engine.docs` -->",
        "<!-- end of the budget table -->",
        budget_table,
    ),
    (
        "<!-- answer conditions: written by `python -m workflows.engine.docs` -->",
        "<!-- end of the answer conditions -->",
        not_applicable_list,
    ),
)


def rewrite(page: str) -> str:
    """Return `page` with the text between each pair of markers replaced by its current table."""
    for begin, end_marker, table in SECTIONS:
        start, end = page.index(begin) + len(begin), page.index(end_marker)
        page = f"{page[:start]}\n{table()}\n{page[end:]}"
    return page


def main() -> int:
    """Rewrite the table in docs/recipe-format.md; say whether it changed."""
    text = PAGE.read_text(encoding="utf-8")
    updated = rewrite(text)
    if updated == text:
        print(f"{PAGE.name}: up to date")
        return 0
    PAGE.write_text(updated, encoding="utf-8")
    print(f"{PAGE.name}: tables rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())

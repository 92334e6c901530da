"""Demo data: scripted actors, one recipe per reference design, and a knowledge base of the
project's own documentation, loaded by `seed_demo`.

The recipe files in `recipes/` are written exactly as the export writes them, so importing and
exporting one gives the file back; a test holds them to that.
"""

from __future__ import annotations

from pathlib import Path

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"
# One file per demo recipe, named for its slug: its recipe tests (editor's `seed_demo_tests`).
RECIPE_TESTS_DIR = Path(__file__).resolve().parent / "recipe_tests"
PROJECT_DIR = Path(__file__).resolve().parents[2]

# The reviewer group the demo recipes' human steps ask, and the users seeded into it.
REVIEWER_GROUP = "editors"
DEMO_USERNAME = "demo"
REVIEWER_USERNAME = "reviewer"


def recipe_files() -> list[Path]:
    """Return the demo recipe files, sorted by name."""
    return sorted(RECIPES_DIR.glob("*.json"))


def recipe_test_files() -> list[Path]:
    """Return the demo recipes' test files, sorted by name."""
    return sorted(RECIPE_TESTS_DIR.glob("*.json"))


# The knowledge base `answer-with-citations` searches: the project's docs, embedded by a
# scripted actor (a local hashing of words, no server needed).
DOCS_BASE_SLUG = "branchline-docs"
DOCS_BASE_NAME = "Branchline documentation"
DOCS_BASE_DESCRIPTION = "The project's README and docs/*.md, loaded by seed_demo."
EMBEDDER = "demo-embedder"


def docs_files() -> list[Path]:
    """Return the files of the demo knowledge base: the README, then docs/*.md by name."""
    return [PROJECT_DIR / "README.md", *sorted((PROJECT_DIR / "docs").glob("*.md"))]

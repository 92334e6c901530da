"""Demo data: scripted actors and one recipe per reference design, loaded by `seed_demo`.

The recipe files in `recipes/` are written exactly as the export writes them, so importing and
exporting one gives the file back; a test holds them to that.
"""

from __future__ import annotations

from pathlib import Path

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"

# The reviewer group the demo recipes' human steps ask, and the users seeded into it.
REVIEWER_GROUP = "editors"
DEMO_USERNAME = "demo"
REVIEWER_USERNAME = "reviewer"


def recipe_files() -> list[Path]:
    """Return the demo recipe files, sorted by name."""
    return sorted(RECIPES_DIR.glob("*.json"))

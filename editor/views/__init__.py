"""The pages people use; each module holds the views of one page and its htmx partials."""

from __future__ import annotations

from .recipes import recipe_list, recipe_new

__all__ = ["recipe_list", "recipe_new"]

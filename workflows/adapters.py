"""The one place where recipe rows and recipe documents (format v1) are translated."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group

from . import engine
from .models import Actor, Branch, Recipe, RecipeActor, Step
from .recipe_format import FORMAT

# Step fields kept in Step.config, by kind; exported only when set.
STEP_CONFIG_FIELDS = (
    "failure_severity",
    "requires",
    "tree",
    "leaf_targets",
    "routes",
    "bypass",
    "max_reclassify",
    "options",
    "escalate_to",
    "material",
    "sources",
    "tools",
    "max_tool_calls",
    "max_tool_seconds",
    "tool",
    "arguments",
    "max_attempts",
    "variants",
    "candidates",
    "output_schema",
    "output_schema_attempts",
    "images",
    "set",
    "method",
    "url",
    "headers",
    "query",
    "body",
    "secret_env",
    "retries",
    "detect",
)


def document_from_recipe(recipe: Recipe) -> dict[str, Any]:
    """Return the recipe draft as a format-v1 document (no secrets: keys stay in env vars).

    A draft saved with errors is returned as it was written (it may not be a valid recipe).
    """
    if recipe.draft_document is not None:
        return {**recipe.draft_document, "slug": recipe.slug}
    steps = recipe.steps.prefetch_related("branches").order_by("order")
    aliases = recipe.actor_aliases.select_related("actor", "group")
    doc: dict[str, Any] = {
        "format": FORMAT,
        "slug": recipe.slug,
        "name": recipe.name,
        "description": recipe.description,
        "inputs": recipe.inputs,
        "actors": {a.alias: a.reference for a in aliases},
    }
    if recipe.budget:  # only when set: a recipe without limits exports as it always did
        doc["budget"] = recipe.budget
    if recipe.learning:  # likewise: the defaults are not written out
        doc["learning"] = recipe.learning
    if recipe.validation:  # likewise
        doc["validation"] = recipe.validation
    if recipe.webhooks:  # likewise: a recipe without hooks exports as it always did
        doc["webhooks"] = recipe.webhooks
    if recipe.callbacks:  # likewise
        doc["callbacks"] = recipe.callbacks
    if recipe.schedules:  # likewise
        doc["schedules"] = recipe.schedules
    doc["steps"] = [_step_document(step) for step in steps]
    return doc


def _step_document(step: Step) -> dict[str, Any]:
    doc: dict[str, Any] = {"key": step.key, "name": step.name, "kind": step.kind}
    if step.actor_alias:
        doc["actor"] = step.actor_alias
    doc["prompt"] = step.prompt
    if step.timeout_s is not None:
        doc["timeout_s"] = step.timeout_s
    if step.validation is not None:
        doc["validation"] = step.validation
    if step.position is not None:
        doc["position"] = step.position
    for field in STEP_CONFIG_FIELDS:
        if field in step.config:
            doc[field] = step.config[field]
    doc["branches"] = [_branch_document(b) for b in step.branches.all()]
    return doc


def _branch_document(branch: Branch) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": branch.name,
        "priority": branch.priority,
        "when": branch.condition,
        "action": branch.action,
        "target": branch.target,
    }
    if branch.params:
        doc["params"] = branch.params
    if not branch.active:
        doc["active"] = False
    if branch.counts_as:  # only when set: the action's default is not written out
        doc["counts_as"] = branch.counts_as
    return doc


def write_recipe_rows(
    recipe: Recipe, doc: dict[str, Any], actors: dict[str, Actor | Group]
) -> None:
    """Replace the draft's aliases, steps and branches with those of a validated document.

    The caller holds a transaction and has validated `doc` and resolved `actors`.
    """
    recipe.name = doc["name"]
    recipe.description = doc.get("description", "")
    recipe.inputs = doc.get("inputs", {})
    recipe.budget = doc.get("budget") or None
    recipe.learning = doc.get("learning") or None
    recipe.validation = doc.get("validation") or None
    recipe.webhooks = doc.get("webhooks") or None
    recipe.callbacks = doc.get("callbacks") or None
    recipe.schedules = doc.get("schedules") or None
    recipe.draft_document = None  # the rows are the draft again
    recipe.save()
    recipe.actor_aliases.all().delete()
    recipe.steps.all().delete()
    RecipeActor.objects.bulk_create(
        RecipeActor(
            recipe=recipe,
            alias=alias,
            actor=target if isinstance(target, Actor) else None,
            group=target if isinstance(target, Group) else None,
        )
        for alias, target in actors.items()
    )
    branches = []
    for order, step_doc in enumerate(doc["steps"], start=1):
        step = Step.objects.create(
            recipe=recipe,
            key=step_doc["key"],
            name=step_doc["name"],
            kind=step_doc.get("kind", engine.DEFAULT_STEP_KIND.name),
            actor_alias=step_doc.get("actor") or "",
            prompt=step_doc.get("prompt", ""),
            timeout_s=step_doc.get("timeout_s"),
            validation=step_doc.get("validation"),
            position=step_doc.get("position"),
            config={f: step_doc[f] for f in STEP_CONFIG_FIELDS if f in step_doc},
            order=order,
        )
        branches += [
            Branch(
                step=step,
                name=b["name"],
                priority=b["priority"],
                condition=b["when"],
                action=b["action"],
                target=b.get("target", ""),
                params=b.get("params", {}),
                active=b.get("active", True),
                counts_as=b.get("counts_as") or "",
            )
            # One spelling is kept (the seeds' judge keys in `params` become `when` fields).
            for b in map(engine.canonical_branch, step_doc.get("branches", []))
        ]
    Branch.objects.bulk_create(branches)

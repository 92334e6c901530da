"""`llm`: a model answers the rendered prompt, optionally checked by the validation loop."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workflows.engine.checks import is_int
from workflows.engine.field_spec import FieldSpec
from workflows.engine.graph import Variant
from workflows.engine.images import MAX_IMAGE_ITEMS, read_images
from workflows.engine.learner import MAX_VARIANT_NAME, MAX_VARIANTS, SUFFIX_MARK
from workflows.engine.output_schema import DEFAULT_ATTEMPTS as DEFAULT_SCHEMA_ATTEMPTS
from workflows.engine.output_schema import MAX_ATTEMPTS as MAX_SCHEMA_ATTEMPTS
from workflows.engine.output_schema import schema_problems
from workflows.engine.reading import DocumentReader
from workflows.engine.self_check import (
    DEFAULT_SCORING,
    DEFAULT_THRESHOLD,
    JUDGE_WEIGHT,
    RULE_BASE,
    RULE_WEIGHT,
    read_settings,
    weight_problem,
)
from workflows.engine.step_kinds.base import StepKind
from workflows.engine.step_kinds.common import (
    FAILURE_SEVERITY,
    MAX_TOOL_CALLS,
    MAX_TOOL_SECONDS,
    REQUIRES,
    TIMEOUT,
    TOOLS,
    actor,
    prompt,
    read_sources,
    read_tools,
    sources,
)
from workflows.engine.vocabulary import HUMAN_ACTOR_PREFIX

DEFAULT_MAX_ATTEMPTS = 5
# Note 001's settings: what a step gets that neither it nor its recipe sets.
DEFAULTS: dict[str, Any] = {
    **DEFAULT_SCORING.as_json(),
    "max_attempts": DEFAULT_MAX_ATTEMPTS,
}


def read_body(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read the sources searched before the call, the tools, the validation settings, and
    what the learner chooses among (variants, candidate actors)."""
    return {
        "sources": read_sources(doc, path, reader),
        **read_tools(doc, path, reader),
        "validation": _validation(doc, path, reader),
        "variants": _variants(doc, path, reader),
        "candidates": _candidates(doc, path, reader),
        **_output_schema(doc, path, reader),
        "images": read_images(doc, path, reader),
    }


def _output_schema(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> dict[str, Any]:
    """Read `output_schema` (checked as JSON Schema) and `output_schema_attempts`."""
    schema = doc.get("output_schema")
    attempts = doc.get("output_schema_attempts")
    if attempts is None:
        attempts = DEFAULT_SCHEMA_ATTEMPTS
    elif not is_int(attempts) or not 1 <= attempts <= MAX_SCHEMA_ATTEMPTS:
        reader.error(
            f"{path}.output_schema_attempts",
            f"must be a whole number from 1 to {MAX_SCHEMA_ATTEMPTS}, got {attempts!r}",
        )
        attempts = DEFAULT_SCHEMA_ATTEMPTS
    if schema is None:
        if doc.get("output_schema_attempts") is not None:
            reader.error(f"{path}.output_schema_attempts", "is set without an output_schema")
        return {"output_schema": None, "output_schema_attempts": attempts}
    where = f"{path}.output_schema"
    problems = schema_problems(schema)
    for below, message in problems:
        reader.error(f"{where}.{below}" if below else where, message)
    # Each is its own loop of answers asked again: one answer cannot go through both.
    for other, what in (("validation", "a validation loop"), ("tools", "tools")):
        if doc.get(other) not in (None, []):
            reader.error(where, f"a step with {what} has no output_schema (not yet)")
            problems.append((other, ""))
    return {"output_schema": None if problems else schema, "output_schema_attempts": attempts}


def _variants(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> tuple[Variant, ...]:
    """Read `variants`: each a unique `name` and a `prompt` template."""
    path = f"{path}.variants"
    value = doc.get("variants")
    if value in (None, []):
        return ()
    if not isinstance(value, list):
        reader.error(
            path, f"must be a list of {{name, prompt}} objects, got {type(value).__name__}"
        )
        return ()
    if len(value) > MAX_VARIANTS:
        reader.error(path, f"a step has at most {MAX_VARIANTS} variants, got {len(value)}")
        return ()
    variants: list[Variant] = []
    for i, item in enumerate(value):
        entry = reader.mapping(item, f"{path}[{i}]")
        if entry is None:
            continue
        name = reader.text(entry, "name", f"{path}[{i}].name", required=True)
        prompt = reader.text(entry, "prompt", f"{path}[{i}].prompt", required=True)
        if name is not None and (
            not name.strip() or name.startswith(SUFFIX_MARK) or len(name) > MAX_VARIANT_NAME
        ):
            reader.error(
                f"{path}[{i}].name",
                f"must be 1 to {MAX_VARIANT_NAME} characters, not starting with "
                f"'{SUFFIX_MARK}' (the mark of a variant learned from a repeat)",
            )
            name = None
        elif name is not None and any(v.name == name for v in variants):
            reader.error(f"{path}[{i}].name", f"the variant '{name}' is listed twice")
            name = None
        if prompt is not None:
            reader.check_template(prompt, f"{path}[{i}].prompt")
        if name is not None and prompt is not None:
            variants.append(Variant(name, prompt))
    return tuple(variants)


def _candidates(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> tuple[str, ...]:
    """Read `candidates`: the model aliases the learner may choose the step's actor among."""
    path = f"{path}.candidates"
    value = doc.get("candidates")
    if value in (None, []):
        return ()
    if not isinstance(value, list):
        reader.error(path, f"must be a list of actor aliases, got {type(value).__name__}")
        return ()
    aliases: list[str] = []
    for i, alias in enumerate(value):
        checked = reader.actor_alias(alias, f"{path}[{i}]")
        if checked is None:
            continue
        if reader.actors[checked].startswith(HUMAN_ACTOR_PREFIX):
            reader.error(f"{path}[{i}]", f"'{checked}' is a reviewer group, not a model")
        elif checked in aliases:
            reader.error(f"{path}[{i}]", f"'{checked}' is listed twice")
        else:
            aliases.append(checked)
    return tuple(aliases)


def _validation(doc: Mapping[str, Any], path: str, reader: DocumentReader) -> Any:
    """Read the validation settings, each unset one the recipe's `validation` default, else
    note 001's (None: the step is not validated)."""
    path = f"{path}.validation"
    inherited = reader.validation_defaults
    value = doc.get("validation")
    if value is False:
        return None  # this step opts out of the recipe's `every_step`
    if value is None and inherited.get("every_step"):
        value = {}  # note 001: every LLM response is validated
    settings = reader.mapping(value, path)
    if settings is None:
        return None
    given = read_settings(settings, path, reader.error)
    merged = {**DEFAULTS, **inherited, **given}
    problem = weight_problem(merged["rule_weight"], merged["judge_weight"])
    if problem and {"rule_weight", "judge_weight"} & given.keys():
        # Only where a weight is given: a bad pair of the recipe's own is reported there.
        inherited_weight = next(iter({"rule_weight", "judge_weight"} - given.keys()), None)
        if inherited_weight:
            problem += f" ({inherited_weight} is inherited: set it here too)"
        reader.error(path, problem)
    if settings.get("judge") is None:
        judge = inherited.get("judge")
    else:
        judge = reader.actor_alias(settings.get("judge"), f"{path}.judge")
    fallback = reader.text(settings, "fallback", f"{path}.fallback") or inherited.get(
        "fallback", ""
    )
    return {**merged, "judge": judge, "fallback": fallback}


def read_recipe_validation(value: object, reader: DocumentReader) -> dict[str, Any]:
    """Read a recipe's `validation`: the defaults of its steps' validation settings (scoring,
    attempts, judge, fallback). It validates no step by itself unless `every_step` is true:
    then every llm step without its own `validation` (or with `false`) is validated."""
    settings = reader.mapping(value, "validation")
    if settings is None:
        return {}
    defaults = read_settings(settings, "validation", reader.error)
    merged = {**DEFAULTS, **defaults}
    problem = weight_problem(merged["rule_weight"], merged["judge_weight"])
    if problem:
        reader.error("validation", problem)
    judge = reader.actor_alias(settings.get("judge"), "validation.judge")
    if judge:
        defaults["judge"] = judge
    fallback = reader.text(settings, "fallback", "validation.fallback")
    if fallback:
        defaults["fallback"] = fallback
    every_step = settings.get("every_step", False)
    if not isinstance(every_step, bool):
        reader.error("validation.every_step", f"must be true or false, got {every_step!r}")
    elif every_step:
        defaults["every_step"] = True
    return defaults


STEP_KIND = StepKind(
    name="llm",
    label="LLM",
    help="A model answers the rendered prompt.",
    fields=(
        actor("The model alias that answers, or @learned: the learner chooses it."),
        prompt("Prompt"),
        TIMEOUT,
        REQUIRES,
        FAILURE_SEVERITY,
        sources(
            "Searched before the call; the prompt shows the hits where it names {sources}, "
            "else under a Sources: heading at its end."
        ),
        TOOLS,
        MAX_TOOL_CALLS,
        MAX_TOOL_SECONDS,
        FieldSpec(
            "images",
            "Images",
            "list",
            help=(
                "File inputs the model is shown as images beside the prompt (at most "
                f'{MAX_IMAGE_ITEMS}): an input name, or {{"input": NAME, "pages": "1-3"}} for '
                "a PDF's pages (default: every page). The actor needs vision (see images)."
            ),
        ),
        FieldSpec(
            "validation.threshold",
            "Validation threshold",
            "number",
            default=DEFAULT_THRESHOLD,
            help=(
                "Validate the response: retry while its confidence (0 to 1) is below this. "
                "confidence = rule weight * rule score + judge weight * judge total / 100."
            ),
        ),
        FieldSpec(
            "validation.max_attempts",
            "Validation attempts",
            "integer",
            default=DEFAULT_MAX_ATTEMPTS,
        ),
        FieldSpec("validation.judge", "Validation judge", "actor"),
        FieldSpec(
            "validation.rule_base",
            "Rule score",
            "number",
            default=RULE_BASE,
            help="The rule score of an answer passing every rule check (a share for some).",
        ),
        FieldSpec("validation.rule_weight", "Rule weight", "number", default=RULE_WEIGHT),
        FieldSpec("validation.judge_weight", "Judge weight", "number", default=JUDGE_WEIGHT),
        FieldSpec(
            "variants",
            "Prompt variants",
            "text",
            help="Other prompts ({name, prompt}) the learner may ask with; see learning.",
        ),
        FieldSpec(
            "candidates",
            "Candidate actors",
            "text",
            help="The model aliases an @learned step or a retry with another actor may "
            "choose among (default: every model alias).",
        ),
        FieldSpec(
            "validation.fallback",
            "Fallback text",
            "text",
            help="Replaces the response when no attempt is confident enough.",
        ),
        FieldSpec(
            "output_schema",
            "Output schema",
            "text",
            help=(
                'JSON Schema ("type": "object") the answer must meet: sent to servers that '
                "enforce it, checked either way; its fields become facts (see structured "
                "output)."
            ),
        ),
        FieldSpec(
            "output_schema_attempts",
            "Schema attempts",
            "integer",
            default=DEFAULT_SCHEMA_ATTEMPTS,
            help=(
                f"How many answers (1 to {MAX_SCHEMA_ATTEMPTS}) the model may give, each "
                "after the last one's errors, before one that misses the schema fails the step."
            ),
        ),
    ),
    read_body=read_body,
    article="an",
)

"""The branch panel: the branch's form and its condition builder, checked together."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from workflows.engine.catalog import action_params
from workflows.engine.priority_bands import describe, legend
from workflows.engine.vocabulary import OUTCOMES

from ..catalog import actions, canonical_action, repeats
from ..selectors import document_errors
from .actors import ActorPicker
from .condition_tree import (
    ConditionNode,
    bound_node,
    initial_tree,
    posted_tree,
    tree_apply,
    unbound_node,
)
from .document import DocumentContext, errors_under, human_options
from .fields import PrettyJSONField, as_text, normalise_newlines


class BranchForm(forms.Form):
    name = forms.CharField(max_length=200)
    priority = forms.IntegerField(min_value=1, help_text="1 is evaluated first.")
    active = forms.BooleanField(required=False, initial=True)
    action = forms.ChoiceField(choices=())
    target = forms.ChoiceField(choices=(), required=False)
    retry_suffix = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    prompt_enhancement = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    alternative_actor = forms.ChoiceField(choices=(), required=False)
    max_retries = forms.IntegerField(min_value=0, required=False)
    counts_as = forms.ChoiceField(
        choices=[("", "— the action's default")] + [(o, o) for o in OUTCOMES],
        required=False,
        help_text="What taking this branch says of the step's attempt, for the learner: by "
        "default a failure for a retry, more detail or an error handler, a success for an "
        "approval, else neutral (the run's outcome decides).",
    )
    other_params = PrettyJSONField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Any other parameters, as a JSON object.",
    )

    MANAGED_PARAMS = ("retry_suffix", "prompt_enhancement", "alternative_actor", "max_retries")

    def __init__(
        self,
        *args: Any,
        context: DocumentContext,
        step_index: int,
        branch_index: int,
        **kwargs: Any,
    ) -> None:
        self.context = context
        self.step_index = step_index
        self.branch_index = branch_index
        self.step = context.steps[step_index]
        branches = self.step.get("branches") or []
        self.original = copy.deepcopy(branches[branch_index])
        if not args or args[0] is None:
            kwargs.setdefault("initial", self.initial_from(self.original))
        super().__init__(*args, **kwargs)
        action = as_text(self.original.get("action"))
        names = actions()
        if action and action not in names:
            names.append(action)
        self.fields["action"].choices = [(a, a) for a in names]
        targets: list[tuple[str, str]] = [("", "— none (next step in sequence)")]
        targets += [
            (s["key"], f"{s.get('name') or s['key']} ({s['key']})")
            for s in context.steps
            if isinstance(s.get("key"), str)
        ]
        targets += [
            ("@repeat", "@repeat — run this step again"),
            ("@end", "@end — stop the run"),
            ("@complete", "@complete — finish successfully"),
        ]
        current = as_text(self.original.get("target"))
        if current and current not in {t[0] for t in targets}:
            targets.append((current, f"{current} (missing step)"))
        self.fields["target"].choices = targets
        # The retry actor is picked from every actor, as a step's actor is.
        self.picker = ActorPicker(context)
        self.fields["alternative_actor"].choices = self.picker.choices(
            "— best other actor", self.initial_from(self.original)["alternative_actor"]
        )
        # The parameters shown follow the action and the target: changing either re-renders.
        for name in ("action", "target"):
            self.fields[name].widget.attrs["data-refresh"] = "true"
        # The band shown beside the priority follows it too.
        self.fields["priority"].widget.attrs["data-refresh"] = "true"
        self.fields["priority"].help_text = f"1 is evaluated first. Bands: {legend()}."
        self.notes: list[str] = []
        self.result: dict[str, Any] | None = None

    @property
    def priority_band(self) -> str:
        """Return the band of the priority shown (as typed, else as saved), or ""."""
        value: Any = self.data.get("priority") if self.is_bound else self.initial.get("priority")
        try:
            return describe(int(value))
        except (TypeError, ValueError):
            return ""

    @classmethod
    def initial_from(cls, branch: dict[str, Any]) -> dict[str, Any]:
        params = branch.get("params") if isinstance(branch.get("params"), dict) else {}
        # A list of alternative actors stays as written, among the other parameters: the
        # menu picks one actor.
        other = {
            k: v
            for k, v in params.items()
            if k not in cls.MANAGED_PARAMS or (k == "alternative_actor" and isinstance(v, list))
        }
        return {
            "name": branch.get("name", ""),
            "priority": branch.get("priority"),
            "active": branch.get("active", True) is not False,
            "action": branch.get("action", "CONTINUE"),
            "target": branch.get("target", ""),
            "retry_suffix": as_text(params.get("retry_suffix")),
            "prompt_enhancement": as_text(params.get("prompt_enhancement")),
            "alternative_actor": as_text(params.get("alternative_actor")),
            "max_retries": params.get("max_retries"),
            "counts_as": as_text(branch.get("counts_as")),
            "other_params": other or None,
        }

    @property
    def shown_params(self) -> tuple[str, ...]:
        """Return the managed parameters the branch's action and target read (shown in the
        form; the others are kept as hidden inputs, so nothing typed is lost on a change)."""
        values = self.data if self.is_bound else self.initial
        action = canonical_action(as_text(values.get("action")))
        return action_params(action, target=as_text(values.get("target")))

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        siblings = self.step.get("branches") or []
        for j, other in enumerate(siblings):
            if j != self.branch_index and isinstance(other, dict) and other.get("name") == name:
                raise ValidationError(f"Another branch of this step is called '{name}'.")
        return name

    def clean_other_params(self) -> dict[str, Any]:
        value = self.cleaned_data.get("other_params")
        if value in (None, ""):
            return {}
        if not isinstance(value, dict):
            raise ValidationError('Write a JSON object, e.g. {"note": "…"}.')
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        shown = self.shown_params
        for name in self.MANAGED_PARAMS:
            # A hidden parameter is not read by the action: a stale value there never blocks.
            if name not in shown and self._errors.pop(name, None):
                data.pop(name, None)
        if self.errors:
            return data
        action = canonical_action(data["action"])
        target = data.get("target") or ""
        key = self.step.get("key")
        steps = self.context.step_keys
        if repeats(action) and target not in ("", "@repeat", key):
            self.notes.append(f"{action} runs this step again, so the target is @repeat.")
            data["target"] = "@repeat"
        elif action == "END_RECIPE" and target not in ("", "@end"):
            self.notes.append("END_RECIPE stops the run, so the target is @end.")
            data["target"] = "@end"
        elif action == "SKIP_TO_END" and target not in ("", steps[-1] if steps else ""):
            self.notes.append("SKIP_TO_END goes to the last step, so the target is left empty.")
            data["target"] = ""
        return data

    def build(self, when: dict[str, Any]) -> dict[str, Any]:
        data = self.cleaned_data
        params = dict(data.get("other_params") or {})
        for name in ("retry_suffix", "prompt_enhancement"):
            if data.get(name):
                params[name] = normalise_newlines(data[name])
        if data.get("alternative_actor"):
            params["alternative_actor"] = self.picker.resolve(data["alternative_actor"])
        if data.get("max_retries") is not None:
            params["max_retries"] = data["max_retries"]
        branch = {
            k: v
            for k, v in self.original.items()
            if k
            not in ("name", "priority", "when", "action", "target", "params", "active", "counts_as")
        }
        branch.update(
            {
                "name": data["name"],
                "priority": data["priority"],
                "when": when,
                "action": data["action"],
                "target": data.get("target") or "",
            }
        )
        if params:
            branch["params"] = params
        if not data.get("active"):
            branch["active"] = False
        if data.get("counts_as"):
            branch["counts_as"] = data["counts_as"]
        return branch


FIELD_OF_BRANCH_PATH = {
    "name": "name",
    "priority": "priority",
    "action": "action",
    "target": "target",
    "active": "active",
}


@dataclass
class BranchPanel:
    """The branch form and its condition builder, validated together against the document."""

    context: DocumentContext
    step_index: int
    branch_index: int
    data: Any = None
    op: str = ""
    form: BranchForm = field(init=False)
    condition: ConditionNode = field(init=False)
    result: dict[str, Any] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        # The reviewer's choice on a branch of a human step is picked from the step's options.
        step = self.context.steps[self.step_index]
        self.context = replace(self.context, step_options=human_options(step))
        kwargs = {
            "context": self.context,
            "step_index": self.step_index,
            "branch_index": self.branch_index,
        }
        if self.data is None:
            self.form = BranchForm(**kwargs)
            self.condition = unbound_node(
                initial_tree(self.form.original.get("when")), self.context, picker=self.picker
            )
        elif self.op:
            # A builder button or a type change: re-render what was typed (errors are not shown).
            self.form = BranchForm(self.data, **kwargs)
            tree = tree_apply(posted_tree(self.data), self.op)
            self.condition = unbound_node(tree, self.context, picker=self.picker)
        else:
            self.form = BranchForm(self.data, **kwargs)
            self.condition = bound_node(self.data, self.context, picker=self.picker)

    @property
    def picker(self) -> ActorPicker:
        """The branch's one actor picker: the retry actor's and the condition's evaluators."""
        return self.form.picker

    @property
    def step(self) -> dict[str, Any]:
        return self.form.step

    def all_forms(self) -> list[forms.Form]:
        """Return the branch form and the forms of its condition, operands included."""
        found: list[forms.Form] = [self.form]
        nodes = [self.condition]
        while nodes:
            node = nodes.pop()
            found.append(node.form)
            nodes += node.children
        return found

    def is_valid(self) -> bool:
        if self.data is None or self.op:
            return False
        valid = self.form.is_valid()
        valid = self.condition.is_valid() and valid
        if not valid:
            return False
        branch = self.form.build(self.condition.condition())
        candidate = copy.deepcopy(self.context.document)
        candidate["steps"][self.step_index]["branches"][self.branch_index] = branch
        candidate["actors"] = self.form.picker.aliases()
        errors = document_errors(candidate)
        prefix = f"steps[{self.step_index}].branches[{self.branch_index}]"
        found = False
        for parts, message in errors_under(errors, prefix):
            found = True
            head = parts[0] if parts else ""
            if head == "when":
                self.condition.add_error(parts[1:], message)
            elif head == "params":
                name = parts[1] if len(parts) > 1 else ""
                target = name if name in BranchForm.MANAGED_PARAMS else "other_params"
                self.form.add_error(target, message)
            else:
                self.form.add_error(FIELD_OF_BRANCH_PATH.get(head), message)
        if found:
            return False
        self.result = branch
        return True

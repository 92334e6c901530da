"""What the editor's Triggers tab shows of a recipe's inbound webhooks."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from runner.versions import version_graph
from workflows import engine
from workflows.engine.webhooks import WebhookSpec
from workflows.models import Recipe, RecipeVersion

from .models import WebhookDelivery
from .services import hook_secrets

# How many of a hook's latest deliveries the tab lists.
LAST_DELIVERIES = 10
# An expression that is a plain path of fields (`issue.title`): the example payload can hold it.
_FIELD_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# An example value per input type.
_EXAMPLES: dict[str, Any] = {"string": "example", "number": 1, "integer": 1, "boolean": True}


@dataclass
class HookView:
    """One hook as the tab shows it: never its secret, only where it is kept."""

    name: str
    url: str
    secret_env: str
    secret_count: int  # how many secrets the variable holds on this server (0: unset)
    inputs: dict[str, str] | None
    curl: str
    deliveries: list[WebhookDelivery] = field(default_factory=list)


def webhooks_shown(
    *, request: HttpRequest, recipe: Recipe, version: RecipeVersion | None
) -> list[HookView]:
    """Return the hooks of the published `version`, with their latest deliveries."""
    if version is None:
        return []
    try:
        graph, _ = version_graph(version.pk, version.created_at)
    except engine.RecipeInvalid:
        return []
    hooks = []
    for spec in graph.webhooks:
        url = request.build_absolute_uri(
            reverse("webhook", kwargs={"slug": recipe.slug, "name": spec.name})
        )
        deliveries = WebhookDelivery.objects.filter(recipe=recipe, hook=spec.name).select_related(
            "run"
        )[:LAST_DELIVERIES]
        hooks.append(
            HookView(
                name=spec.name,
                url=url,
                secret_env=spec.secret_env,
                secret_count=len(hook_secrets(spec)),
                inputs=dict(spec.inputs) if spec.inputs is not None else None,
                curl=curl_example(url, spec, graph.inputs),
                deliveries=list(deliveries),
            )
        )
    return hooks


def curl_example(url: str, spec: WebhookSpec, inputs: Any) -> str:
    """Return shell lines that sign an example payload with the hook's secret (read from its
    variable) using the standardwebhooks library, and post it with curl."""
    body = json.dumps(example_payload(spec, inputs))
    sign = (
        "import os, sys, datetime; from standardwebhooks.webhooks import Webhook; "
        f'print(Webhook(os.environ["{spec.secret_env}"]).sign(sys.argv[1], '
        "datetime.datetime.fromtimestamp(int(sys.argv[2]), datetime.timezone.utc), sys.argv[3]))"
    )
    return "\n".join(
        [
            f"BODY={shlex.quote(body)}",
            'ID="msg_$(date +%s%N)"; TS="$(date +%s)"',
            f'SIG="$(python -c {shlex.quote(sign)} "$ID" "$TS" "$BODY")"',
            f"curl -sS -X POST {shlex.quote(url)} -H 'Content-Type: application/json' \\",
            '  -H "webhook-id: $ID" -H "webhook-timestamp: $TS" -H "webhook-signature: $SIG" \\',
            '  --data-binary "$BODY"',
        ]
    )


def example_payload(spec: WebhookSpec, inputs: Any) -> dict[str, Any]:
    """Return a payload the hook reads the recipe's inputs from (where its expressions are
    plain field paths; others are left for the author to fill in)."""

    def example(name: str) -> Any:
        return _EXAMPLES.get(inputs.get(name, {}).get("type", "string"), "example")

    if spec.inputs is None:
        return {name: example(name) for name in inputs}
    payload: dict[str, Any] = {}
    for name, expression in spec.inputs.items():
        if not _FIELD_PATH.fullmatch(expression):
            continue
        *parents, last = expression.split(".")
        node = payload
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            node[last] = example(name)
    return payload

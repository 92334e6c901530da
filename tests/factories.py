"""Factories for the rows and documents the tests need (factory-boy).

The recipe document factory builds a minimal valid format-v1 document that names the
`scripted-writer` actor: a test that imports it needs that actor (the `actors` fixture).
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group

from workflows.models import Actor

PASSWORD = "correct-horse-battery-staple"
WRITER = "scripted-writer"
JUDGE = "scripted-judge"
OPENAI = "openai-compatible"
REVIEWERS = "editors"
OPENAI_KEY_ENV = "BRANCHLINE_TEST_OPENAI_KEY"


@functools.cache
def _password_hash() -> str:
    # Hashing is slow on purpose; every test user shares the one hash of PASSWORD.
    return make_password(PASSWORD)


class GroupFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Group
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"group-{n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.LazyFunction(lambda: _password_hash())
    is_staff = False
    is_superuser = False

    @factory.post_generation
    def groups(self, create: bool, extracted: list[Group] | None, **kwargs: Any) -> None:
        if create and extracted:
            self.groups.add(*extracted)

    class Params:
        staff = factory.Trait(is_staff=True)
        superuser = factory.Trait(is_staff=True, is_superuser=True)


class ActorFactory(factory.django.DjangoModelFactory):
    """A scripted LLM actor; the `openai` and `human` traits give the other kinds."""

    class Meta:
        model = Actor
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"actor-{n}")
    kind = Actor.Kind.LLM
    provider = Actor.Provider.SCRIPTED
    model = ""
    config = factory.LazyFunction(lambda: {"replies": ["Once upon a time, a story."]})

    class Params:
        openai = factory.Trait(
            provider=Actor.Provider.OPENAI,
            model="gpt-4o-mini",
            base_url="https://llm.example.com/v1",
            api_key_env=OPENAI_KEY_ENV,
            config=factory.LazyFunction(dict),
        )
        human = factory.Trait(
            kind=Actor.Kind.HUMAN,
            provider="",
            group=factory.SubFactory(GroupFactory, name=REVIEWERS),
            config=factory.LazyFunction(dict),
        )


def _minimal_steps() -> list[dict[str, Any]]:
    return [
        {
            "key": "write",
            "name": "Write",
            "kind": "llm",
            "actor": "writer",
            "prompt": "Write a short story about {topic}",
            "branches": [],
        }
    ]


class RecipeDocumentFactory(factory.DictFactory):
    """A minimal valid recipe document, written as export writes it (so round trips compare)."""

    format = "branchline.recipe/v1"
    slug = factory.Sequence(lambda n: f"recipe-{n}")
    name = factory.LazyAttribute(lambda d: d.slug.replace("-", " ").title())
    description = ""
    inputs = factory.LazyFunction(lambda: {"topic": {"type": "string", "required": True}})
    actors = factory.LazyFunction(lambda: {"writer": WRITER})
    steps = factory.LazyFunction(_minimal_steps)


def recipe_document(**fields: Any) -> dict[str, Any]:
    """Return a fresh minimal valid document, with `fields` replacing its top-level keys."""
    return copy.deepcopy(RecipeDocumentFactory(**fields))


def chain_document(
    *,
    slug: str,
    actor: str,
    steps: int,
    branches: list[dict[str, Any]],
    name: str | None = None,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A linear recipe of LLM steps `s1`…`sN` by one `writer` alias (the actor named `actor`):
    each step has `branches`, then a default branch on to the next step (the last completes)."""
    keys = [f"s{i}" for i in range(1, steps + 1)]
    return {
        "format": "branchline.recipe/v1",
        "slug": slug,
        "name": name or slug.title(),
        "inputs": inputs or {"topic": {"type": "string", "required": True}},
        "actors": {"writer": actor},
        "steps": [
            {
                "key": key,
                "name": key.upper(),
                "kind": "llm",
                "actor": "writer",
                "prompt": f"Part {i} of a story about {{topic}}.",
                "branches": [
                    *copy.deepcopy(branches),
                    {
                        "name": "onward",
                        "priority": 999,
                        "when": {"type": "default"},
                        "action": "CONTINUE",
                        "target": keys[i] if i < steps else "@complete",
                    },
                ],
            }
            for i, key in enumerate(keys, start=1)
        ],
    }


def openai_actor(**fields: Any) -> dict[str, Any]:
    """Return the fields of an OpenAI-compatible actor named `remote`, for the API or the ORM."""
    return {"name": "remote", "provider": "openai", "model": "gpt-4o-mini", **fields}


def admin_form_data(actor: Actor) -> dict[str, Any]:
    """Return the admin form's fields for `actor`, as a browser would post them."""
    return {
        "name": actor.name,
        "kind": actor.kind,
        "provider": actor.provider,
        "model": actor.model,
        "base_url": actor.base_url,
        "api_key_env": actor.api_key_env,
        "params": json.dumps(actor.params or {}),
        "timeout_s": actor.timeout_s,
        "group": actor.group_id or "",
        "config": json.dumps(actor.config or {}),
        "price_in_per_million": actor.price_in_per_million or "",
        "price_out_per_million": actor.price_out_per_million or "",
        "currency": actor.currency,
    }

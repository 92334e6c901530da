"""Who may see and change what, through the API: owners, sharing, staff, actors, tokens."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import api_client
from tests.factories import PASSWORD, GroupFactory, UserFactory, recipe_document
from workflows.models import Actor, Recipe, RecipeVersion

pytestmark = pytest.mark.django_db

RECIPE = "/api/recipes/short-story"

# Every endpoint, with a body that would be accepted from someone allowed to call it.
EVERY_ENDPOINT: list[tuple[str, str]] = [
    ("get", "/api/recipes"),
    ("post", "/api/recipes"),
    ("post", "/api/recipes/import"),
    ("get", "/api/recipes/format-schema"),
    ("get", RECIPE),
    ("put", RECIPE),
    ("patch", RECIPE),
    ("delete", RECIPE),
    ("get", f"{RECIPE}/export"),
    ("post", f"{RECIPE}/publish"),
    ("get", f"{RECIPE}/versions"),
    ("get", f"{RECIPE}/lint"),
    ("get", "/api/actors/"),
    ("post", "/api/actors/"),
    ("get", "/api/actors/{actor}/"),
    ("put", "/api/actors/{actor}/"),
    ("patch", "/api/actors/{actor}/"),
    ("delete", "/api/actors/{actor}/"),
    ("get", "/api/schema/"),
    ("get", "/api/docs/"),
]

# The endpoints of one recipe, each with the status its owner gets.
RECIPE_ENDPOINTS: list[tuple[str, str, int]] = [
    ("get", RECIPE, 200),
    ("put", RECIPE, 200),
    ("patch", RECIPE, 200),
    ("get", f"{RECIPE}/export", 200),
    ("post", f"{RECIPE}/publish", 201),
    ("get", f"{RECIPE}/versions", 200),
    ("get", f"{RECIPE}/lint", 200),
    ("delete", RECIPE, 204),
]


def body_for(method: str, url: str, doc: dict[str, Any]) -> dict[str, Any] | None:
    if method == "put" and url.startswith("/api/recipes/"):
        return {"document": doc}
    if method == "patch" and url.startswith("/api/recipes/"):
        return {"description": "edited"}
    if method == "get":
        return None
    if url in ("/api/recipes", "/api/recipes/import"):
        return recipe_document(slug="brand-new")
    if url.startswith("/api/actors/"):
        return {"name": "new-bot", "kind": "llm", "provider": "scripted", "config": {}}
    return None


def call(client: APIClient, method: str, url: str, doc: dict[str, Any]) -> Any:
    data = body_for(method, url, doc)
    if data is None:
        return getattr(client, method)(url)
    return getattr(client, method)(url, data, format="json")


@pytest.mark.parametrize(("method", "url"), EVERY_ENDPOINT)
def test_it_refuses_anonymous_callers_everywhere(
    anon_api: APIClient, recipe: Recipe, actors: Any, doc: dict[str, Any], method: str, url: str
) -> None:
    url = url.format(actor=actors.writer.pk)

    response = call(anon_api, method, url, doc)

    assert response.status_code in (401, 403), (method, url, response.status_code)
    assert Recipe.objects.filter(slug="short-story").exists()
    assert not Recipe.objects.filter(slug="brand-new").exists()
    assert Actor.objects.filter(pk=actors.writer.pk).exists()


@pytest.mark.parametrize(("method", "url", "owner_status"), RECIPE_ENDPOINTS)
def test_the_owner_may_do_everything(
    api: APIClient, recipe: Recipe, doc: dict[str, Any], method: str, url: str, owner_status: int
) -> None:
    response = call(api, method, url, doc)

    assert response.status_code == owner_status, response.content


@pytest.mark.parametrize(("method", "url", "owner_status"), RECIPE_ENDPOINTS)
def test_someone_elses_recipe_does_not_exist(
    other_api: APIClient,
    recipe: Recipe,
    doc: dict[str, Any],
    method: str,
    url: str,
    owner_status: int,
) -> None:
    response = call(other_api, method, url, doc)

    assert response.status_code == 404, response.content
    assert "errors" in response.json() or "detail" in response.json()
    recipe.refresh_from_db()
    assert (recipe.revision, recipe.description) == (1, "")
    assert not RecipeVersion.objects.exists()


def test_someone_elses_recipe_is_not_listed(other_api: APIClient, recipe: Recipe) -> None:
    assert other_api.get("/api/recipes").json() == []


def test_a_superuser_who_is_not_staff_sees_only_what_the_lists_show(recipe: Recipe) -> None:
    admin = api_client(UserFactory(username="root", is_superuser=True, is_staff=False))

    assert admin.get("/api/recipes").json() == []
    assert admin.get(RECIPE).status_code == 404
    assert admin.post(f"{RECIPE}/runs", {"inputs": {}}, format="json").status_code == 404


def share_with_user(recipe: Recipe, other_user: Any) -> None:
    recipe.shared_with_users.add(other_user)


def share_with_group(recipe: Recipe, other_user: Any) -> None:
    group = GroupFactory(name="storytellers")
    other_user.groups.add(group)
    recipe.shared_with_groups.add(group)


@pytest.mark.parametrize("share", [share_with_user, share_with_group])
@pytest.mark.parametrize(
    ("method", "url", "status"),
    [*RECIPE_ENDPOINTS[:-1], ("delete", RECIPE, 403)],
)
def test_a_shared_recipe_is_visible_and_editable_but_not_deletable(
    other_api: APIClient,
    other_user: Any,
    recipe: Recipe,
    doc: dict[str, Any],
    share: Any,
    method: str,
    url: str,
    status: int,
) -> None:
    share(recipe, other_user)

    response = call(other_api, method, url, doc)

    assert response.status_code == status, response.content
    assert Recipe.objects.filter(slug="short-story").exists()


@pytest.mark.parametrize("share", [share_with_user, share_with_group])
def test_a_shared_recipe_is_listed_once(
    other_api: APIClient, other_user: Any, recipe: Recipe, share: Any
) -> None:
    share(recipe, other_user)
    # A second group of the same user must not list the recipe twice.
    other_group = GroupFactory(name="also-readers")
    other_user.groups.add(other_group)
    recipe.shared_with_groups.add(other_group)

    assert [r["slug"] for r in other_api.get("/api/recipes").json()] == ["short-story"]


def test_the_owner_shares_through_patch(
    api: APIClient, other_api: APIClient, recipe: Recipe, other_user: Any
) -> None:
    GroupFactory(name="storytellers")

    response = api.patch(
        RECIPE,
        {"shared_with_users": ["mallory"], "shared_with_groups": ["storytellers"]},
        format="json",
    )

    assert response.status_code == 200
    assert response.json()["shared_with_users"] == ["mallory"]
    assert response.json()["shared_with_groups"] == ["storytellers"]
    assert other_api.get(RECIPE).status_code == 200


def test_it_refuses_to_share_with_someone_who_does_not_exist(
    api: APIClient, recipe: Recipe
) -> None:
    response = api.patch(RECIPE, {"shared_with_users": ["nobody"]}, format="json")

    assert response.status_code == 400
    assert response.json()["errors"] == [
        "shared_with_users: Object with username=nobody does not exist."
    ]


def test_a_shared_user_may_replace_the_draft_by_import(
    other_api: APIClient, other_user: Any, recipe: Recipe, doc: dict[str, Any]
) -> None:
    recipe.shared_with_users.add(other_user)
    doc["name"] = "Edited By Mallory"

    response = other_api.post("/api/recipes/import?replace=true", doc, format="json")

    assert response.status_code == 200
    recipe.refresh_from_db()
    assert (recipe.name, recipe.owner.username) == ("Edited By Mallory", "alice")


def test_a_stranger_may_not_replace_the_draft_by_import(
    other_api: APIClient, recipe: Recipe, doc: dict[str, Any]
) -> None:
    doc["name"] = "Hijacked"

    response = other_api.post("/api/recipes/import?replace=true", doc, format="json")

    assert response.status_code == 409
    recipe.refresh_from_db()
    assert recipe.name == "Short Story"


@pytest.mark.parametrize(("method", "url", "owner_status"), RECIPE_ENDPOINTS)
def test_staff_may_do_everything(
    staff_api: APIClient,
    recipe: Recipe,
    doc: dict[str, Any],
    method: str,
    url: str,
    owner_status: int,
) -> None:
    response = call(staff_api, method, url, doc)

    assert response.status_code == owner_status, response.content


def test_staff_see_every_recipe(staff_api: APIClient, recipe: Recipe) -> None:
    assert [r["slug"] for r in staff_api.get("/api/recipes").json()] == ["short-story"]


class TestActors:
    def test_any_user_lists_actors(self, api: APIClient, actors: Any) -> None:
        response = api.get("/api/actors/")

        assert response.status_code == 200
        body = response.json()
        rows = body["results"] if isinstance(body, dict) else body
        assert {a["name"] for a in rows} == {
            "scripted-writer",
            "scripted-judge",
            "openai-compatible",
            "editors-desk",
        }
        desk = next(a for a in rows if a["name"] == "editors-desk")
        assert (desk["kind"], desk["group"]) == ("human", "editors")
        assert set(desk) >= {
            "name", "kind", "provider", "model", "base_url", "api_key_env",
            "params", "timeout_s", "group", "config",
        }  # fmt: skip

    def test_any_user_reads_one_actor(self, api: APIClient, actors: Any) -> None:
        response = api.get(f"/api/actors/{actors.openai.pk}/")

        assert response.status_code == 200
        assert response.json()["base_url"] == "https://llm.example.com/v1"

    @pytest.mark.parametrize(
        ("method", "url"),
        [
            ("post", "/api/actors/"),
            ("put", "/api/actors/{actor}/"),
            ("patch", "/api/actors/{actor}/"),
            ("delete", "/api/actors/{actor}/"),
        ],
    )
    def test_only_staff_change_actors(
        self, api: APIClient, actors: Any, doc: dict[str, Any], method: str, url: str
    ) -> None:
        response = call(api, method, url.format(actor=actors.judge.pk), doc)

        assert response.status_code == 403
        actors.judge.refresh_from_db()
        assert actors.judge.name == "scripted-judge"
        assert not Actor.objects.filter(name="new-bot").exists()

    def test_staff_create_an_actor(self, staff_api: APIClient, reviewers: Any) -> None:
        response = staff_api.post(
            "/api/actors/",
            {
                "name": "local-llama",
                "kind": "llm",
                "provider": "ollama",
                "model": "llama3.2:latest",
                "base_url": "http://127.0.0.1:11434",
                "params": {"temperature": 0.2},
                "timeout_s": 60,
            },
            format="json",
        )

        assert response.status_code == 201, response.content
        actor = Actor.objects.get(name="local-llama")
        assert (actor.provider, actor.params) == ("ollama", {"temperature": 0.2})

    def test_staff_create_a_human_actor(self, staff_api: APIClient, reviewers: Any) -> None:
        response = staff_api.post(
            "/api/actors/",
            {"name": "proofreaders", "kind": "human", "group": "editors"},
            format="json",
        )

        assert response.status_code == 201, response.content
        assert Actor.objects.get(name="proofreaders").group == reviewers

    def test_staff_update_an_actor(self, staff_api: APIClient, actors: Any) -> None:
        response = staff_api.patch(
            f"/api/actors/{actors.judge.pk}/", {"timeout_s": 30}, format="json"
        )

        assert response.status_code == 200
        actors.judge.refresh_from_db()
        assert actors.judge.timeout_s == 30

    def test_staff_cannot_delete_an_actor_a_recipe_uses(
        self, staff_api: APIClient, recipe: Recipe, actors: Any
    ) -> None:
        response = staff_api.delete(f"/api/actors/{actors.writer.pk}/")

        assert response.status_code == 409
        assert response.json()["errors"] == [
            "$: actor 'scripted-writer' is used by the drafts of: short-story"
        ]
        assert Actor.objects.filter(pk=actors.writer.pk).exists()

    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            ({"name": "h", "kind": "human"}, "group: a human actor needs a reviewer group"),
            ({"name": "m", "kind": "llm"}, "provider: an LLM actor needs a provider: *"),
            ({"name": "k", "provider": "openai", "api_key_env": "sk-123"}, "api_key_env: *"),
            ({"name": "p", "provider": "bard"}, 'provider: "bard" is not a valid choice.'),
            ({"name": "g", "kind": "human", "group": "ghosts"}, "group: *"),
            ({"name": "scripted-writer", "provider": "scripted"}, "name: *"),
            ({"name": "u", "provider": "openai", "base_url": "not a url"}, "base_url: *"),
        ],
    )
    def test_it_refuses_a_bad_actor_with_the_field(
        self, staff_api: APIClient, actors: Any, body: dict[str, Any], expected: str
    ) -> None:
        response = staff_api.post("/api/actors/", body, format="json")

        assert response.status_code == 400
        errors = response.json()["errors"]
        if expected.endswith("*"):
            assert any(e.startswith(expected[:-1]) for e in errors), errors
        else:
            assert expected in errors, errors


class TestTokens:
    def test_a_token_authenticates(self, recipe: Recipe, user: Any) -> None:
        client = api_client()
        response = client.post(
            "/api/auth/token", {"username": "alice", "password": PASSWORD}, format="json"
        )
        assert response.status_code == 200, response.content
        token = response.json()["token"]

        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

        assert [r["slug"] for r in client.get("/api/recipes").json()] == ["short-story"]
        assert client.get(RECIPE).status_code == 200
        assert client.post(f"{RECIPE}/publish").status_code == 201

    def test_a_token_sees_only_its_users_recipes(self, recipe: Recipe) -> None:
        UserFactory(username="trudy")
        client = api_client()
        token = client.post(
            "/api/auth/token", {"username": "trudy", "password": PASSWORD}, format="json"
        ).json()["token"]
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")

        assert client.get("/api/recipes").json() == []
        assert client.get(RECIPE).status_code == 404

    def test_it_refuses_a_wrong_password(self, user: Any) -> None:
        response = api_client().post(
            "/api/auth/token", {"username": "alice", "password": "guess"}, format="json"
        )

        assert response.status_code == 400
        assert response.json()["errors"] == ["$: Unable to log in with provided credentials."]

    @pytest.mark.parametrize("header", ["Token not-a-token", "Token ", "Bearer abc", "Token a b"])
    def test_it_refuses_a_bad_token(self, recipe: Recipe, header: str) -> None:
        client = api_client()
        client.credentials(HTTP_AUTHORIZATION=header)

        response = client.get("/api/recipes")

        assert response.status_code in (401, 403)

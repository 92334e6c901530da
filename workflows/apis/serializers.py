"""Input and output shapes of the recipes API."""

from __future__ import annotations

import copy

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework import serializers

from ..actor_urls import redact_url
from ..models import Actor, Recipe, RecipeVersion
from ..validators import json_value_errors
from .schema import JSONObjectField, RecipeDocumentField, StrictText


def _json_object(value: object) -> object:
    """Refuse a settings field that is not a JSON object every database can store."""
    if not isinstance(value, dict):
        raise serializers.ValidationError("must be a JSON object")
    if problems := json_value_errors(value):
        raise serializers.ValidationError(problems[0])
    return value


class ActorSerializer(StrictText, serializers.ModelSerializer):
    """An actor, checked as a whole on every write (`Actor.problems`)."""

    group = serializers.SlugRelatedField(
        slug_field="name", queryset=Group.objects.all(), required=False, allow_null=True
    )
    params = JSONObjectField(required=False)
    config = JSONObjectField(required=False)

    class Meta:
        model = Actor
        fields = [
            "id",
            "name",
            "kind",
            "provider",
            "model",
            "base_url",
            "api_key_env",
            "params",
            "timeout_s",
            "group",
            "config",
            "capabilities",
            "price_in_per_million",
            "price_out_per_million",
            "currency",
            "max_concurrency",
            "max_calls_per_minute",
        ]

    def validate_params(self, value: object) -> object:
        return _json_object(value)

    def validate_config(self, value: object) -> object:
        return _json_object(value)

    def validate(self, attrs: dict) -> dict:
        # The actor as it would be saved (a PATCH changes some fields of the stored one).
        actor = copy.copy(self.instance) if self.instance is not None else Actor()
        for name, value in attrs.items():
            setattr(actor, name, value)
        problems: dict[str, list[str]] = {}
        for path, message in actor.problems():
            problems.setdefault(path, []).append(message)
        if problems:
            raise serializers.ValidationError(problems)
        return attrs

    def to_representation(self, instance: Actor) -> dict:
        data = super().to_representation(instance)
        # Rows written before credentials were refused must not show them to every user.
        if data.get("base_url"):
            data["base_url"] = redact_url(data["base_url"])
        return data


class VersionSerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = RecipeVersion
        fields = ["number", "note", "created_by", "created_at"]


class RecipeSummarySerializer(serializers.ModelSerializer):
    owner = serializers.SlugRelatedField(slug_field="username", read_only=True)
    latest_version = serializers.SerializerMethodField()

    class Meta:
        model = Recipe
        fields = [
            "slug",
            "name",
            "description",
            "owner",
            "revision",
            "latest_version",
            "updated_at",
        ]

    def get_latest_version(self, recipe: Recipe) -> int | None:
        if hasattr(recipe, "latest_version_number"):  # annotated by selectors.recipes_listed
            return recipe.latest_version_number  # type: ignore[no-any-return]
        version = recipe.latest_version
        return version.number if version else None


class RecipeDetailOutput(RecipeSummarySerializer):
    """A recipe with its sharing, versions and draft document (what the detail views answer)."""

    shared_with_users = serializers.ListField(child=serializers.CharField())
    shared_with_groups = serializers.ListField(child=serializers.CharField())
    versions = VersionSerializer(many=True)
    document = RecipeDocumentField()
    warnings = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="lint warnings (after PUT)"
    )
    errors = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="after PUT: the errors of a draft saved as written; publishing refuses them",
    )

    class Meta(RecipeSummarySerializer.Meta):
        fields = [
            *RecipeSummarySerializer.Meta.fields,
            "shared_with_users",
            "shared_with_groups",
            "versions",
            "document",
            "warnings",
            "errors",
        ]


class RecipeUpdateInput(serializers.Serializer):
    document = RecipeDocumentField()
    revision = serializers.IntegerField(required=False, min_value=1)

    def validate_document(self, value: object) -> object:
        if not isinstance(value, dict):
            raise serializers.ValidationError("a recipe document is a JSON object")
        return value


class RecipePatchInput(StrictText, serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    shared_with_users = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(), many=True, required=False
    )
    shared_with_groups = serializers.SlugRelatedField(
        slug_field="name", queryset=Group.objects.all(), many=True, required=False
    )


class PublishInput(StrictText, serializers.Serializer):
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class ImportOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    warnings = serializers.ListField(child=serializers.CharField())


class LintOutput(serializers.Serializer):
    warnings = serializers.ListField(child=serializers.CharField(), help_text="as `path: message`")

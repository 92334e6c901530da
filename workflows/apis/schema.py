"""The OpenAPI schema where drf-spectacular's reading of the views falls short.

Every operation may answer with an error, in one JSON shape (`ErrorOutput`): the answers any
request can get are added to every operation here, once (`AutoSchema`); a view names only the
errors of its own (`errors(409)`). Request bodies are documented as JSON, the contract of
DESIGN.md, unless a view lists its media types. Text fields that may be blank but must match a
pattern or format when they are not say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.extensions import OpenApiViewExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers

from ..recipe_format import json_schema

JSON = "application/json"
# Text the database can hold: no NUL (`workflows.validators.text_problem`; a lone surrogate has
# no UTF-8 form, so JSON text cannot carry one either). Top-level text fields and query
# parameters say so; the rule holds inside JSON objects too (see the API's description).
TEXT = r"^[^\x00]*$"
NOT_BLANK_TEXT = r"^[^\x00]*[^\s\x00][^\x00]*$"
# A recipe in format v1, the components of which `recipe_components` adds to the schema.
RECIPE_DOCUMENT = {"$ref": "#/components/schemas/RecipeDocument"}
# The largest whole number `workflows.validators.whole_number` reads (18 digits).
WHOLE_NUMBER_MAX = 10**18 - 1


class ErrorOutput(serializers.Serializer):
    """The body of every error answer under /api/."""

    errors = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="every problem found, each as `path: message` (`$` is the whole request)",
    )
    detail = serializers.CharField(required=False, help_text="the problem, in one sentence")


class StrictText:
    """Hold text fields to what the schema says of the text sent: a string, `maxLength` long.

    DRF's CharField turns `0` into `"0"`, and measures the length after stripping spaces; a
    client that sends a number, or more than the schema allows, has a bug worth hearing
    about. Mix in before the serializer class.
    """

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            refused = {}
            for name, field in self.fields.items():  # type: ignore[attr-defined]
                value = data.get(name)
                if not isinstance(field, serializers.CharField) or field.read_only:
                    continue
                if value is not None and not isinstance(value, str):
                    refused[name] = ["Not a valid string."]
                elif isinstance(value, str) and len(value) > (field.max_length or len(value)):
                    refused[name] = [
                        f"Ensure this field has no more than {field.max_length} characters."
                    ]
            if refused:
                raise serializers.ValidationError(refused)
        return super().to_internal_value(data)  # type: ignore[misc]


@extend_schema_field({"type": "object", "additionalProperties": {}})
class JSONObjectField(serializers.JSONField):
    """A JSON field that holds an object (whoever reads it checks that it is one)."""


@extend_schema_field(RECIPE_DOCUMENT)
class RecipeDocumentField(serializers.JSONField):
    """A recipe document, format v1 (the service that writes it checks it in full)."""


WHY = {
    400: "The request is malformed or its content is refused; `errors` lists every problem.",
    403: "Not signed in (session or `Authorization: Token …`), or not allowed to do this.",
    404: "No such object, or not one the caller may see.",
    409: "The request conflicts with the current state of the object.",
    413: "The request body is too large.",
    415: "The request body is not in a media type this operation reads.",
    422: "The `Idempotency-Key` was used before for a different request.",
    429: "Too many uploads this minute; try again after `Retry-After` seconds.",
    500: "An unexpected error; the answer carries the request's id for the logs.",
    503: "The database or the broker is unreachable for now; try again after `Retry-After`.",
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """Return the schema's error answers for `codes`, to add to a view's `responses`."""
    return {code: OpenApiResponse(ErrorOutput, description=WHY[code]) for code in codes}


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's AutoSchema, with the error answers any request can get and JSON bodies."""

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        codes = [400, 403, 500, 503]
        if "{" in self.path:
            codes.append(404)
        if self.method in ("PUT", "PATCH", "POST") and self._get_request_body() is not None:
            codes += [413, 415]
        for code, answer in errors(*codes).items():
            responses.setdefault(str(code), self._get_response_for_code(answer, str(code)))
        return dict(sorted(responses.items()))

    def _get_parameters(self) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super()._get_parameters()
        for parameter in parameters:
            schema = parameter.get("schema", {})
            free_text = not {"pattern", "enum", "format"} & set(schema)
            if parameter["in"] == "query" and schema.get("type") == "string" and free_text:
                schema["pattern"] = TEXT
        return parameters

    def map_parsers(self) -> list[Any]:
        # The API's contract is JSON; forms and uploads are documented where a view takes them.
        parsers: list[Any] = super().map_parsers()
        return [JSON] if JSON in parsers else parsers

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        # The field validators below differ between requests and answers.
        self._direction = direction
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        return schema

    def _insert_field_validators(self, field: Any, schema: dict[str, Any]) -> None:
        super()._insert_field_validators(field, schema)
        if schema.get("type") != "string":
            return
        if (
            getattr(self, "_direction", None) == "request"
            and isinstance(field, serializers.CharField)
            and not field.read_only
            and "pattern" not in schema
            and "format" not in schema
        ):
            # DRF strips spaces before it checks for blank text: spaces alone are blank.
            blank = field.trim_whitespace and not field.allow_blank
            schema["pattern"] = NOT_BLANK_TEXT if blank else TEXT
        if not getattr(field, "allow_blank", False):
            return
        # Blank is allowed besides what the pattern or format describes (e.g. `api_key_env`).
        if "pattern" in schema:
            schema["pattern"] = f"^$|{schema['pattern']}"
        if "format" in schema:
            schema["anyOf"] = [{"format": schema.pop("format")}, {"maxLength": 0}]


class ObtainAuthTokenSchema(OpenApiViewExtension):
    """DRF's token view: open to anyone, and it answers bad credentials with a 400."""

    target_class = "rest_framework.authtoken.views.ObtainAuthToken"
    priority = 1  # before drf-spectacular's own, which changes nothing on DRF >= 3.12

    def view_replacement(self) -> type:
        class Fixed(self.target_class):  # type: ignore[name-defined,misc]
            @extend_schema(
                auth=[{}],
                request={
                    JSON: self.target_class.serializer_class,
                    "application/x-www-form-urlencoded": self.target_class.serializer_class,
                },
                responses={200: TokenOutput},
                description="Exchange a username and password for the caller's API token.",
            )
            def post(self, request: Any, *args: Any, **kwargs: Any) -> Any:
                return super().post(request, *args, **kwargs)

        return Fixed


class TokenOutput(serializers.Serializer):
    token = serializers.CharField(help_text="send it as `Authorization: Token <token>`")


def recipe_components(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Add recipe format v1's JSON Schema to the components, in OpenAPI 3.0 terms.

    A drf-spectacular postprocessing hook: `GET /api/recipes/format-schema` serves the same
    schema as JSON Schema (pydantic's), the one source of both.
    """
    schema = json_schema()
    definitions = schema.pop("$defs", {})
    del schema["$id"]
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["RecipeDocument"] = _openapi_30(schema)
    for name, definition in definitions.items():
        components[f"Recipe{name}"] = _openapi_30(definition)
    return result


def _openapi_30(schema: Any) -> Any:
    """Return a pydantic JSON Schema (2020-12) as an OpenAPI 3.0 schema object."""
    if isinstance(schema, list):
        return [_openapi_30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return {"$ref": schema["$ref"].replace("#/$defs/", "#/components/schemas/Recipe")}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            out[key] = {name: _openapi_30(item) for name, item in value.items()}
        elif key == "const":
            out["enum"] = [value]
        elif key == "propertyNames" or (key == "default" and value is None):
            # No such keyword in 3.0 (the server checks the names); 3.0 cannot say that null
            # is the default of a `$ref` (its `nullable` needs a `type` beside it).
            continue
        elif key == "anyOf" and {"type": "null"} in value:
            rest = [_openapi_30(item) for item in value if item != {"type": "null"}]
            out["nullable"] = True
            if len(rest) > 1:
                out["anyOf"] = rest
            elif "$ref" in rest[0]:
                out["allOf"] = rest  # 3.0 ignores the siblings of a $ref
            else:
                out.update(rest[0])
        else:
            out[key] = _openapi_30(value)
    return out

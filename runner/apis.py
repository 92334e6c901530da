"""The runs API (DESIGN.md §5): start, list, detail, cancel, events; human tasks and decisions."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.apis.pagination import MAX_LIMIT, window, window_parameters
from workflows.apis.schema import WHOLE_NUMBER_MAX, JSONObjectField, StrictText, errors
from workflows.selectors import recipe_get
from workflows.validators import whole_number

from . import human, selectors, services
from .events import serialize_event
from .idempotency import HEADER, MAX_KEY_LENGTH, respond_once
from .inputs import InputsInvalid
from .models import HumanTask, Run, StepRun
from .status import RunStatus

IDEMPOTENCY_KEY = OpenApiParameter(
    HEADER,
    {"type": "string", "pattern": "^[!-~]+$", "minLength": 1, "maxLength": MAX_KEY_LENGTH},
    OpenApiParameter.HEADER,
    description="Send a repeated request with the same key to get the first answer again "
    "instead of acting twice (kept 24 hours; only successful answers are kept).",
)


# The run list's default length (the newest first); `limit` and `offset` page through the rest.
RUNS_PER_PAGE = MAX_LIMIT


SCRIPT_HIT = {
    "type": "object",
    "properties": {
        "document": {"type": "string", "minLength": 1},
        "text": {"type": "string", "minLength": 1},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "heading": {"type": "string"},
    },
    "required": ["document", "text", "score"],
    "additionalProperties": False,
}


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "additionalProperties": {
            "anyOf": [
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
                {
                    "type": "array",
                    "items": {"type": "array", "items": SCRIPT_HIT},
                    "minItems": 1,
                },
            ]
        },
        "description": "actor alias: the answers it gives, in order (the last one repeats); "
        "`sources.STEPKEY`: the hits a step with sources finds instead of searching, a list "
        "per execution (the last one repeats)",
    }
)
class ScriptField(serializers.JSONField):
    """A dry run's script (`services.check_script` checks it against the recipe)."""


class RunStartInput(serializers.Serializer):
    inputs = JSONObjectField(default=dict, help_text="the recipe's inputs, by name")
    script = ScriptField(required=False, allow_null=True, default=None)
    version = serializers.IntegerField(required=False, min_value=1, allow_null=True)


class EvaluationOutput(serializers.Serializer):
    branch = serializers.CharField()
    priority = serializers.IntegerField(allow_null=True)
    matched = serializers.BooleanField()
    taken = serializers.BooleanField()
    reason = serializers.CharField()


class StepOutput(serializers.ModelSerializer):
    step = serializers.CharField(source="step_key")
    actor = serializers.CharField(source="actor_alias")
    evaluations = EvaluationOutput(many=True)

    class Meta:
        model = StepRun
        fields = [
            "seq",
            "step",
            "attempt",
            "actor",
            "status",
            "prompt",
            "response",
            "decision",
            "error",
            "latency_ms",
            "tokens_in",
            "tokens_out",
            "confidence",
            "details",
            "started_at",
            "finished_at",
            "evaluations",
        ]


class TaskOutput(serializers.ModelSerializer):
    step = serializers.CharField(source="step_key")
    group = serializers.CharField(source="group.name")
    decided_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = HumanTask
        fields = [
            "id",
            "run",
            "step",
            "group",
            "question",
            "material",
            "options",
            "due_at",
            "status",
            "decision",
            "comment",
            "decided_by",
            "decided_at",
            "created_at",
        ]


class RunOutput(serializers.ModelSerializer):
    recipe = serializers.CharField(source="recipe.slug")
    version = serializers.IntegerField(source="version.number")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Run
        fields = [
            "id",
            "recipe",
            "version",
            "status",
            "outcome",
            "inputs",
            "script",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]


class RunDetailOutput(RunOutput):
    steps = serializers.SerializerMethodField()
    tasks = serializers.SerializerMethodField()

    class Meta(RunOutput.Meta):
        fields = [*RunOutput.Meta.fields, "steps", "tasks"]

    @extend_schema(responses=StepOutput(many=True))
    def get_steps(self, run: Run) -> list[dict[str, Any]]:
        return StepOutput(selectors.run_steps(run), many=True).data

    @extend_schema(responses=TaskOutput(many=True))
    def get_tasks(self, run: Run) -> list[dict[str, Any]]:
        tasks = run.tasks.select_related("group", "decided_by").order_by("created_at")
        return TaskOutput(tasks, many=True).data


class EventOutput(serializers.Serializer):
    seq = serializers.IntegerField()
    type = serializers.CharField()
    at = serializers.DateTimeField()
    data = serializers.JSONField()


class DecideInput(StrictText, serializers.Serializer):
    decision = serializers.CharField(max_length=50)
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=20000)


class RecipeRunsApi(APIView):
    @extend_schema(
        request=RunStartInput,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: RunDetailOutput, **errors(409, 422)},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Start a run; `script` makes it a dry run with scripted answers per actor alias."""
        recipe = recipe_get(user=request.user, slug=slug)
        data = RunStartInput(data=request.data)
        data.is_valid(raise_exception=True)

        def start() -> Response:
            try:
                run = services.run_start(
                    user=request.user,
                    recipe=recipe,
                    inputs=data.validated_data["inputs"],
                    script=data.validated_data.get("script"),
                    version=data.validated_data.get("version"),
                )
            except InputsInvalid as exc:
                return Response({"errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
            except services.RunNotStartable as exc:
                return Response({"errors": [str(exc)]}, status=status.HTTP_409_CONFLICT)
            return Response(RunDetailOutput(run).data, status=status.HTTP_201_CREATED)

        return respond_once(request, start)


class RunListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=[s.value for s in RunStatus]),
            OpenApiParameter("recipe", str, description="recipe slug"),
            *window_parameters(RUNS_PER_PAGE),
        ],
        responses=RunOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        runs = selectors.runs_visible_to(request.user)
        if (value := request.query_params.get("status")) is not None:
            if value not in RunStatus.values:
                raise ValidationError({"status": f"one of {', '.join(RunStatus.values)}"})
            runs = runs.filter(status=value)
        if value := request.query_params.get("recipe"):
            runs = runs.filter(recipe__slug=value)
        page = window(runs, request, default_limit=RUNS_PER_PAGE)
        return Response(RunOutput(page, many=True).data)


class RunDetailApi(APIView):
    @extend_schema(responses=RunDetailOutput)
    def get(self, request: Request, run_id: int) -> Response:
        return Response(RunDetailOutput(selectors.run_get(user=request.user, run_id=run_id)).data)


class RunCancelApi(APIView):
    @extend_schema(request=None, responses={200: RunOutput, **errors(409)})
    def post(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get(user=request.user, run_id=run_id)
        try:
            run = services.run_cancel(run=run)
        except services.RunFinished as exc:
            return Response({"errors": [str(exc)]}, status=status.HTTP_409_CONFLICT)
        return Response(RunOutput(run).data)


class RunEventsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "after",
                {"type": "integer", "minimum": 0, "maximum": WHOLE_NUMBER_MAX},
                description="last seq seen (default 0)",
            )
        ],
        responses=EventOutput(many=True),
    )
    def get(self, request: Request, run_id: int) -> Response:
        run = selectors.run_get(user=request.user, run_id=run_id)
        after = request.query_params.get("after", "0")
        if whole_number(after) is None:
            raise ValidationError({"after": "a whole number"})
        events = run.events.filter(seq__gt=int(after)).order_by("seq")[:1000]
        return Response([serialize_event(e) for e in events])


class TaskListApi(APIView):
    @extend_schema(parameters=window_parameters(MAX_LIMIT), responses=TaskOutput(many=True))
    def get(self, request: Request) -> Response:
        """The caller's open human tasks (those of their reviewer groups), oldest first."""
        tasks = window(selectors.tasks_for_reviewer(request.user), request, default_limit=MAX_LIMIT)
        return Response(TaskOutput(tasks, many=True).data)


class TaskDecideApi(APIView):
    @extend_schema(
        request=DecideInput,
        parameters=[IDEMPOTENCY_KEY],
        responses={200: TaskOutput, **errors(409, 422)},
    )
    def post(self, request: Request, task_id: int) -> Response:
        task = selectors.task_visible(user=request.user, task_id=task_id)
        data = DecideInput(data=request.data)
        data.is_valid(raise_exception=True)

        def decide() -> Response:
            try:
                decided = human.task_decide(
                    task_id=task.pk, user=request.user, **data.validated_data
                )
            except human.NotInGroup as exc:
                raise PermissionDenied(str(exc)) from None
            except human.TaskClosed as exc:
                return Response({"errors": [str(exc)]}, status=status.HTTP_409_CONFLICT)
            except human.BadDecision as exc:
                return Response({"errors": [str(exc)]}, status=status.HTTP_400_BAD_REQUEST)
            except HumanTask.DoesNotExist:
                raise NotFound() from None
            return Response(TaskOutput(decided).data)

        return respond_once(request, decide)

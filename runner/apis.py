"""The runs API (DESIGN.md §5): start, list, detail, cancel, events; human tasks and decisions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workflows.apis.pagination import (
    MAX_LIMIT,
    TOTAL_COUNT_HEADER,
    Keyset,
    bounded,
    cursor_page,
    cursor_parameters,
    link_header,
    next_link,
)
from workflows.apis.parsers import FormParser, JSONParser
from workflows.apis.schema import JSON, WHOLE_NUMBER_MAX, JSONObjectField, StrictText, errors
from workflows.selectors import recipe_get
from workflows.validators import whole_number

from . import compare, file_apis, human, reruns, review_queue, run_files, selectors, services
from .events import serialize_event
from .idempotency import HEADER, MAX_KEY_LENGTH, respond_once
from .inputs import InputsInvalid
from .models import HumanTask, ModelCall, Run, StepRun
from .status import RunStatus

IDEMPOTENCY_KEY = OpenApiParameter(
    HEADER,
    {"type": "string", "pattern": "^[!-~]+$", "minLength": 1, "maxLength": MAX_KEY_LENGTH},
    OpenApiParameter.HEADER,
    description="Send a repeated request with the same key to get the first answer again "
    "instead of acting twice (kept 24 hours; only successful answers are kept).",
)


# The run list's default length (the newest first); `cursor` pages through the rest.
RUNS_PER_PAGE = MAX_LIMIT
# A run's events per answer, at most and by default; `after` pages through the rest.
EVENTS_PER_PAGE = 1000


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
    classification = serializers.ChoiceField(
        choices=services.CLASSIFICATION_MODES,
        required=False,
        allow_null=True,
        default=None,
        help_text="bypass: its classify steps select their always-active routes without "
        "asking their model; ask: they ask it (default: the CLASSIFICATION_BYPASS setting)",
    )


class RunBatchItemInput(serializers.Serializer):
    inputs = JSONObjectField(default=dict, help_text="this run's inputs, by name")
    script = ScriptField(required=False, allow_null=True, default=None)


class RunBatchInput(serializers.Serializer):
    runs = RunBatchItemInput(
        many=True, allow_empty=False, help_text="at most RUN_BATCH_MAX_RUNS (1,000) runs"
    )
    version = serializers.IntegerField(required=False, min_value=1, allow_null=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Read per request (tests override it); the list refuses a longer batch before it
        # validates any of its items.
        self.fields["runs"].max_length = settings.RUN_BATCH_MAX_RUNS


class EvaluationOutput(serializers.Serializer):
    branch = serializers.CharField()
    priority = serializers.IntegerField(allow_null=True)
    matched = serializers.BooleanField()
    taken = serializers.BooleanField()
    reason = serializers.CharField()


class ModelCallOutput(serializers.ModelSerializer):
    """One call to a model; `cost` at the actor's prices when it was made (null: no price)."""

    class Meta:
        model = ModelCall
        fields = ModelCall.SHOWN_FIELDS


class StepOutput(serializers.ModelSerializer):
    step = serializers.CharField(source="step_key")
    actor = serializers.CharField(source="actor_alias")
    evaluations = EvaluationOutput(many=True)
    calls = ModelCallOutput(
        many=True,
        source="modelcall_set",
        help_text="every call the step made to a model, its judge's and evaluators' included",
    )
    outcome = serializers.CharField(
        help_text="what the branch taken after this attempt counts it as: success, failure or "
        "neutral (its `counts_as`); empty while the step runs"
    )
    variant = serializers.CharField(
        help_text="the prompt variant the attempt asked with: a declared variant's name, "
        "'+ SUFFIX' for a suffix learned from a repeat, empty for the step's own prompt"
    )
    choice = serializers.JSONField(
        allow_null=True,
        help_text="how the learner chose this attempt's actor and variant (rule, explored, "
        "reason, each candidate's evidence); null when it did not choose",
    )
    execution_steps = serializers.SerializerMethodField(
        help_text="each phase of the step that ran, in order: {name (sources, tools, build, "
        "call, validate, finalise), status (ok or failed), duration_ms}; empty for a human "
        "step, a copied or given answer, or a step recorded before phases were"
    )
    execution_attempts = serializers.SerializerMethodField(
        help_text="how many answers the step asked its model for (a validation loop or an "
        "output schema may ask again); null when not recorded"
    )
    duration_ms = serializers.SerializerMethodField(
        help_text="how long the step's execution took in all, its searches and judges "
        "included (latency_ms is its model's answers); null when not recorded"
    )

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
            "cost",
            "model_calls",
            "confidence",
            "outcome",
            "variant",
            "choice",
            "execution_steps",
            "execution_attempts",
            "duration_ms",
            "details",
            "started_at",
            "finished_at",
            "evaluations",
            "calls",
        ]

    @extend_schema_field(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "status": {"type": "string", "enum": ["ok", "failed"]},
                    "duration_ms": {"type": "integer"},
                },
            },
        }
    )
    def get_execution_steps(self, step: StepRun) -> list[dict[str, Any]]:
        return list(_execution(step).get("steps") or [])

    @extend_schema_field({"type": "integer", "nullable": True})
    def get_execution_attempts(self, step: StepRun) -> int | None:
        return _execution(step).get("attempts")

    @extend_schema_field({"type": "integer", "nullable": True})
    def get_duration_ms(self, step: StepRun) -> int | None:
        return _execution(step).get("duration_ms")


def _execution(step: StepRun) -> dict[str, Any]:
    """The step's phases, attempts and duration (`runner.steps.phases`); {} when none."""
    details = step.details if isinstance(step.details, dict) else {}
    execution = details.get("execution")
    return execution if isinstance(execution, dict) else {}


class TaskOutput(serializers.ModelSerializer):
    step = serializers.CharField(source="step_key")
    group = serializers.CharField(source="group.name")
    decided_by = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    claimed_by = serializers.SlugRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="the reviewer who said they are on the task (null: nobody)",
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
            "claimed_by",
            "claimed_at",
            "decided_at",
            "created_at",
        ]


class RunOutput(serializers.ModelSerializer):
    recipe = serializers.CharField(source="recipe.slug")
    version = serializers.IntegerField(source="version.number")
    draft_snapshot = serializers.BooleanField(
        source="version.is_draft_snapshot",
        read_only=True,
        help_text="the run pins a draft snapshot (an editor test run; its version is 0)",
    )
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    parent = serializers.PrimaryKeyRelatedField(
        read_only=True,
        allow_null=True,
        help_text="the run this one was forked from (null: not a fork)",
    )
    forked_at_seq = serializers.IntegerField(
        read_only=True,
        allow_null=True,
        help_text="the parent's step the fork starts at: its steps before it are copies",
    )
    trigger = serializers.CharField(
        read_only=True,
        help_text="what started the run when no person did (a schedule); blank otherwise",
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "recipe",
            "version",
            "draft_snapshot",
            "parent",
            "forked_at_seq",
            "status",
            "outcome",
            "inputs",
            "script",
            "options",
            "error",
            "created_by",
            "trigger",
            "created_at",
            "started_at",
            "finished_at",
            "tokens_in",
            "tokens_out",
            "model_calls",
            "cost",
        ]


class RunDetailOutput(RunOutput):
    steps = serializers.SerializerMethodField()
    tasks = serializers.SerializerMethodField()
    files = file_apis.RunFileOutput(
        many=True,
        read_only=True,
        help_text="the files given to its file inputs (GET runs/{id}/files/{file} downloads one)",
    )

    class Meta(RunOutput.Meta):
        fields = [*RunOutput.Meta.fields, "files", "steps", "tasks"]

    # A run just queued has no steps or tasks yet: its start answers without looking.
    STARTED = "started"

    @extend_schema(responses=StepOutput(many=True))
    def get_steps(self, run: Run) -> list[dict[str, Any]]:
        if self.context.get(self.STARTED):
            return []
        return StepOutput(selectors.run_steps(run), many=True).data

    @extend_schema(responses=TaskOutput(many=True))
    def get_tasks(self, run: Run) -> list[dict[str, Any]]:
        if self.context.get(self.STARTED):
            return []
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


def refusing_unstartable(start: Callable[[], Response]) -> Callable[[], Response]:
    """`start`, with inputs that do not fit answered 400 and a version that cannot run 409."""

    def answer() -> Response:
        try:
            return start()
        except run_files.TooManyUploads as exc:
            return too_many_uploads(exc)
        except InputsInvalid as exc:
            return Response({"errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
        except services.RunNotStartable as exc:
            return Response({"errors": [str(exc)]}, status=status.HTTP_409_CONFLICT)

    return answer


def too_many_uploads(exc: run_files.TooManyUploads) -> Response:
    return Response(
        {"errors": [str(exc)]},
        status=status.HTTP_429_TOO_MANY_REQUESTS,
        headers={"Retry-After": str(exc.retry_after)},
    )


class RecipeRunsApi(APIView):
    parser_classes = [JSONParser, FormParser, file_apis.RunFilesParser]

    @extend_schema(
        # A multipart upload is read too (`file_apis.multipart_start`), but not in the
        # schema: daphne (Twisted) answers a multipart body it cannot parse with a bare 400
        # before the app sees it. JSON takes files in base64.
        request={JSON: RunStartInput},
        parameters=[IDEMPOTENCY_KEY],
        responses={201: RunDetailOutput, **errors(409, 422, 429)},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Start a run; `script` makes it a dry run with scripted answers per actor alias.

        A file input takes an upload: in JSON `{"name", "content_base64", "media_type"}` (a list
        of them for a files input); or the request is multipart/form-data, with a file field
        named by each file input (repeated for a files input), the other inputs in an `inputs`
        field of JSON or a field each, and `script`, `version`, `classification` as fields."""
        recipe = recipe_get(user=request.user, slug=slug)
        asked = request.data
        uploads: dict[str, Any] = {}
        if request.content_type.startswith(file_apis.MULTIPART):
            asked = file_apis.multipart_start(request, recipe)
            # The uploads join the inputs once the rest of the body has been checked.
            uploads = {k: v for k, v in asked["inputs"].items() if k in request.FILES}
            asked["inputs"] = {k: v for k, v in asked["inputs"].items() if k not in uploads}
        data = RunStartInput(data=asked)
        data.is_valid(raise_exception=True)

        def start() -> Response:
            run = services.run_start(
                user=request.user,
                recipe=recipe,
                inputs={**data.validated_data["inputs"], **uploads}
                if uploads
                else data.validated_data["inputs"],
                script=data.validated_data.get("script"),
                version=data.validated_data.get("version"),
                classification=data.validated_data.get("classification"),
            )
            output = RunDetailOutput(run, context={RunDetailOutput.STARTED: True})
            return Response(output.data, status=status.HTTP_201_CREATED)

        return respond_once(request, refusing_unstartable(start))


class RunBatchOutput(serializers.Serializer):
    """The runs a batch started, in its items' order."""

    runs = serializers.SerializerMethodField()

    @extend_schema_field(RunOutput(many=True))
    def get_runs(self, runs: list[Run]) -> list[dict[str, Any]]:
        return RunOutput(runs, many=True).data


class RecipeRunBatchApi(APIView):
    @extend_schema(
        request=RunBatchInput,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: RunBatchOutput, **errors(409, 422, 429)},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Start a run for each item of `runs`, all of them or none: a 400 lists every item's
        problems (`runs[i].inputs.NAME: ...`). The runs come back in the items' order."""
        recipe = recipe_get(user=request.user, slug=slug)
        data = RunBatchInput(data=request.data)
        data.is_valid(raise_exception=True)

        def start() -> Response:
            runs = services.run_start_many(
                user=request.user,
                recipe=recipe,
                items=data.validated_data["runs"],
                version=data.validated_data.get("version"),
            )
            return Response(RunBatchOutput(runs).data, status=status.HTTP_201_CREATED)

        return respond_once(request, refusing_unstartable(start))


class RunListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=[s.value for s in RunStatus]),
            OpenApiParameter("recipe", str, description="recipe slug"),
            *cursor_parameters(RUNS_PER_PAGE),
        ],
        responses=RunOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        """The runs the caller may see, newest first."""
        runs = selectors.runs_listed(request.user)
        if (value := request.query_params.get("status")) is not None:
            if value not in RunStatus.values:
                raise ValidationError({"status": f"one of {', '.join(RunStatus.values)}"})
            runs = runs.filter(status=value)
        if value := request.query_params.get("recipe"):
            runs = selectors.runs_of_recipe(runs, value)
        # No X-Total-Count: the list grows without bound, and counting it reads every row.
        page = cursor_page(runs, request, default_limit=RUNS_PER_PAGE)
        return Response(RunOutput(page.items, many=True).data, headers=page.headers)


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


def _version_field(help_text: str) -> serializers.IntegerField:
    """Return an optional field for the number of one of the recipe's published versions."""
    return serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=WHOLE_NUMBER_MAX,
        help_text=help_text,
    )


class RunResumeInput(StrictText, serializers.Serializer):
    version = _version_field(
        "go on on this published version of the recipe (it must have the step)"
    )
    actor = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=100,
        help_text="run the step with this model alias of the recipe (an llm step's)",
    )


class RunResumeApi(APIView):
    @extend_schema(request=RunResumeInput, responses={200: RunDetailOutput, **errors(409)})
    def post(self, request: Request, run_id: int) -> Response:
        """Queue a failed or cancelled run again at the step it stopped at: a new attempt of
        that step in the same run, its history kept."""
        run = selectors.run_get(user=request.user, run_id=run_id)
        data = RunResumeInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = reruns.run_resume(
                run=run,
                version=data.validated_data.get("version"),
                actor=data.validated_data.get("actor"),
            )
        except reruns.RerunInvalid as exc:
            return Response({"errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
        except reruns.RunNotResumable as exc:
            return Response({"errors": [str(exc)]}, status=status.HTTP_409_CONFLICT)
        return Response(RunDetailOutput(selectors.run_get(user=request.user, run_id=run.pk)).data)


class RunForkInput(StrictText, serializers.Serializer):
    at_seq = serializers.IntegerField(
        min_value=1,
        max_value=WHOLE_NUMBER_MAX,
        help_text="the step (its seq) the fork starts at; the steps before it are copied",
    )
    response = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        trim_whitespace=False,
        max_length=200_000,
        help_text="record that step with this answer instead of running it: any text for an "
        "llm step, one of its options (`option: comment`) for a human step, route names "
        "separated by commas for a classify step",
    )
    inputs = JSONObjectField(
        required=False,
        allow_null=True,
        help_text="inputs that replace the parent's of those names (null drops one); a file "
        "input's as {name, content_base64, media_type} (the parent's files are copied)",
    )
    version = _version_field("another published version of the recipe (it must have the steps)")
    script = ScriptField(required=False, allow_null=True, default=None)


class RunForkApi(APIView):
    @extend_schema(request=RunForkInput, responses={201: RunDetailOutput, **errors(429)})
    def post(self, request: Request, run_id: int) -> Response:
        """Start a new run from one of this run's steps: with copies of the steps before it,
        and optionally another answer for it, other inputs, another version or a script.
        The run itself is not changed."""
        run = selectors.run_get(user=request.user, run_id=run_id)
        data = RunForkInput(data=request.data)
        data.is_valid(raise_exception=True)
        asked = data.validated_data
        if asked.get("inputs") is not None and not isinstance(asked["inputs"], dict):
            raise ValidationError({"inputs": "must be an object of name: value"})
        try:
            fork = reruns.run_fork(
                user=request.user,
                run=run,
                at_seq=asked["at_seq"],
                response=asked.get("response"),
                inputs=asked.get("inputs"),
                version=asked.get("version"),
                script=asked.get("script"),
            )
        except reruns.RerunInvalid as exc:
            return Response({"errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
        except run_files.TooManyUploads as exc:
            return too_many_uploads(exc)
        fork = selectors.run_get(user=request.user, run_id=fork.pk)
        return Response(RunDetailOutput(fork).data, status=status.HTTP_201_CREATED)


class RunEventsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "after",
                {"type": "integer", "minimum": 0, "maximum": WHOLE_NUMBER_MAX},
                description="last seq seen (default 0): the cursor of this list",
            ),
            OpenApiParameter(
                "limit",
                {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": EVENTS_PER_PAGE,
                    "default": EVENTS_PER_PAGE,
                },
                description="the number of events to return",
            ),
            link_header("after"),
            OpenApiParameter(
                "X-Total-Count",
                int,
                OpenApiParameter.HEADER,
                response=[200],
                description="the number of the run's events (its last seq)",
            ),
        ],
        responses=EventOutput(many=True),
    )
    def get(self, request: Request, run_id: int) -> Response:
        """The run's events after `after`, in seq order."""
        run = selectors.run_get(user=request.user, run_id=run_id)
        after = whole_number(request.query_params.get("after", "0"))
        if after is None:
            raise ValidationError({"after": "a whole number"})
        limit = bounded(request, "limit", EVENTS_PER_PAGE, 1, EVENTS_PER_PAGE)
        # `seq` is unique within a run: the key needs no pk.
        page = Keyset(run.events.all(), order=["seq"]).page(after=(after,), limit=limit)
        # Events are numbered 1, 2, … under the run's lock, so the last seq is their count (free);
        # events appended since the run was read may be on the page already.
        seqs = [event.seq for event in page.items]
        headers = {"X-Total-Count": str(max([run.event_seq, *seqs]))}
        if page.next_key is not None:
            headers["Link"] = next_link(request, after=str(page.next_key[0]))
        return Response([serialize_event(e) for e in page.items], headers=headers)


TASK_FILTER_PARAMETERS = [
    OpenApiParameter("recipe", str, description="only the tasks of runs of this recipe (slug)"),
    OpenApiParameter("group", str, description="only the tasks of this reviewer group (name)"),
    OpenApiParameter(
        "due",
        {"type": "string", "enum": list(review_queue.DUE_FILTERS)},
        description="`overdue`: past the due time; `soon`: due within "
        f"{int(review_queue.DUE_SOON.total_seconds() // 60)} minutes; `later`: due after "
        "that; `none`: no due time",
    ),
    OpenApiParameter(
        "q",
        {"type": "string", "maxLength": review_queue.MAX_SEARCH_CHARS},
        description="search the step key, question, material and recipe name (any case)",
    ),
    OpenApiParameter(
        "sort",
        {"type": "string", "enum": list(review_queue.SORTS), "default": "oldest"},
        description="`oldest` or `newest` first by creation; `due`: soonest due first, the "
        "tasks with a due time only",
    ),
]


class TaskListApi(APIView):
    @extend_schema(
        parameters=[*TASK_FILTER_PARAMETERS, *cursor_parameters(MAX_LIMIT), TOTAL_COUNT_HEADER],
        responses=TaskOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        """The caller's open human tasks (those of their reviewer groups), oldest first, or
        as filtered and sorted."""
        try:
            filters = review_queue.task_filters(request.query_params)
        except review_queue.FilterError as exc:
            return Response({"errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
        tasks = review_queue.tasks_in_queue(request.user, filters)
        page = cursor_page(tasks, request, default_limit=MAX_LIMIT, count=True)
        return Response(TaskOutput(page.items, many=True).data, headers=page.headers)


class _TaskClaimChange(APIView):
    change: Any  # human.task_claim or human.task_unclaim

    def post(self, request: Request, task_id: int) -> Response:
        task = selectors.task_visible(user=request.user, task_id=task_id)

        def change() -> Response:
            try:
                changed = type(self).change(task_id=task.pk, user=request.user)
            except human.NotInGroup as exc:
                raise PermissionDenied(str(exc)) from None
            except (human.TaskClosed, human.ClaimedByAnother) as exc:
                return Response({"errors": [str(exc)]}, status=status.HTTP_409_CONFLICT)
            except HumanTask.DoesNotExist:
                raise NotFound() from None
            return Response(TaskOutput(changed).data)

        return respond_once(request, change)


class TaskClaimApi(_TaskClaimChange):
    change = staticmethod(human.task_claim)

    @extend_schema(
        request=None,
        parameters=[IDEMPOTENCY_KEY],
        responses={200: TaskOutput, **errors(409, 422)},
    )
    def post(self, request: Request, task_id: int) -> Response:
        """Say you are on an open task: the group's other reviewers see it live. Claiming your
        own claim again changes nothing; 409 when another reviewer is on it or it closed. A
        claim does not lock: any reviewer of the group may still decide."""
        return super().post(request, task_id)


class TaskUnclaimApi(_TaskClaimChange):
    change = staticmethod(human.task_unclaim)

    @extend_schema(
        request=None,
        parameters=[IDEMPOTENCY_KEY],
        responses={200: TaskOutput, **errors(409, 422)},
    )
    def post(self, request: Request, task_id: int) -> Response:
        """Let go of your claim on an open task (a task nobody claimed is left as it is); 409
        when another reviewer is on it or it closed."""
        return super().post(request, task_id)


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


# --- comparing two runs ----------------------------------------------------------------------


class DiffSegmentOutput(serializers.Serializer):
    op = serializers.ChoiceField(
        choices=["equal", "insert", "delete"],
        help_text="`equal`: in both texts; `insert`: only in B's; `delete`: only in A's",
    )
    text = serializers.CharField()


class TextDiffOutput(serializers.Serializer):
    changed = serializers.BooleanField(help_text="the whole texts differ")
    truncated = serializers.BooleanField(
        help_text=f"a text is longer than {compare.MAX_DIFF_CHARS} characters: the segments "
        "cover its start only"
    )
    segments = DiffSegmentOutput(many=True, help_text="text A becoming text B")


class ComparedEvaluationOutput(serializers.Serializer):
    priority = serializers.IntegerField(allow_null=True)
    matched = serializers.BooleanField()
    taken = serializers.BooleanField()
    reason = serializers.CharField()


class EvaluationChangeOutput(serializers.Serializer):
    branch = serializers.CharField()
    a = ComparedEvaluationOutput(allow_null=True, help_text="null: A did not evaluate it")
    b = ComparedEvaluationOutput(allow_null=True, help_text="null: B did not evaluate it")
    changes = serializers.ListField(
        child=serializers.CharField(),
        help_text="`branch` (evaluated in one run only), or which of `matched`, `taken`, "
        "`reason`, `priority` differ",
    )


class ComparedStepOutput(serializers.Serializer):
    seq = serializers.IntegerField()
    attempt = serializers.IntegerField()
    status = serializers.CharField()
    actor = serializers.CharField(source="actor_alias")
    actor_name = serializers.CharField()
    decision = serializers.CharField()
    error = serializers.CharField()
    branch = serializers.SerializerMethodField(help_text="the branch taken after the step")
    latency_ms = serializers.IntegerField(allow_null=True)
    tokens_in = serializers.IntegerField(allow_null=True)
    tokens_out = serializers.IntegerField(allow_null=True)
    cost = serializers.DecimalField(max_digits=14, decimal_places=8, allow_null=True)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_branch(self, step: StepRun) -> str | None:
        return compare.taken_branch(step)


class StepDeltasOutput(serializers.Serializer):
    latency_ms = serializers.IntegerField(allow_null=True)
    tokens_in = serializers.IntegerField(allow_null=True)
    tokens_out = serializers.IntegerField(allow_null=True)
    cost = serializers.DecimalField(max_digits=16, decimal_places=8, allow_null=True)


class StepPairOutput(serializers.Serializer):
    index = serializers.IntegerField()
    step = serializers.CharField(source="step_key")
    only = serializers.ChoiceField(
        choices=["a", "b"], allow_null=True, help_text="the run that alone ran the step"
    )
    differs = serializers.BooleanField()
    changes = serializers.ListField(
        child=serializers.CharField(),
        help_text="`step` (ran in one run only), or which of `actor`, `status`, `prompt`, "
        "`response`, `decision`, `error`, `evaluations` differ",
    )
    branch_changed = serializers.BooleanField(
        help_text="both runs ran the step and went on by different branches"
    )
    a = ComparedStepOutput(allow_null=True)
    b = ComparedStepOutput(allow_null=True)
    prompt = TextDiffOutput()
    response = TextDiffOutput()
    evaluations = EvaluationChangeOutput(many=True, help_text="the evaluations that differ")
    deltas = StepDeltasOutput(help_text="B minus A")


class RunDeltasOutput(serializers.Serializer):
    steps = serializers.IntegerField()
    latency_ms = serializers.IntegerField(help_text="of the steps, summed")
    duration_ms = serializers.IntegerField(
        allow_null=True, help_text="from start to finish; null unless both runs finished"
    )
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    model_calls = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=16, decimal_places=8)


class RunComparisonOutput(serializers.Serializer):
    a = RunOutput()
    b = RunOutput()
    identical = serializers.BooleanField()
    run_changes = serializers.ListField(
        child=serializers.CharField(),
        help_text="which of `recipe`, `version`, `inputs`, `script`, `status`, `outcome`, "
        "`error` differ",
    )
    deltas = RunDeltasOutput(help_text="B minus A")
    differing = serializers.SerializerMethodField(
        help_text="the indexes in `steps` of the steps that differ"
    )
    first_difference = serializers.SerializerMethodField(
        help_text="the index of the first step that differs"
    )
    first_branch_change = serializers.SerializerMethodField(
        help_text="the index of the first step both runs left by different branches"
    )
    steps = StepPairOutput(many=True, help_text="the two paths lined up by step key")

    @extend_schema_field(serializers.ListField(child=serializers.IntegerField()))
    def get_differing(self, comparison: compare.RunComparison) -> list[int]:
        return [pair.index for pair in comparison.differing]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_first_difference(self, comparison: compare.RunComparison) -> int | None:
        pair = comparison.first_difference
        return pair.index if pair else None

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_first_branch_change(self, comparison: compare.RunComparison) -> int | None:
        pair = comparison.first_branch_change
        return pair.index if pair else None


def _run_id_parameter(name: str, which: str) -> OpenApiParameter:
    return OpenApiParameter(
        name,
        {"type": "integer", "minimum": 0, "maximum": WHOLE_NUMBER_MAX},
        required=True,
        description=f"the id of run {which}",
    )


class RunCompareApi(APIView):
    @extend_schema(
        parameters=[_run_id_parameter("a", "A"), _run_id_parameter("b", "B")],
        responses={200: RunComparisonOutput, **errors(404)},
    )
    def get(self, request: Request) -> Response:
        """Compare two runs step by step: text diffs, changed evaluations, deltas (B minus A)."""
        ids: dict[str, int] = {}
        problems: dict[str, str] = {}
        for name in ("a", "b"):
            value = request.query_params.get(name)
            number = None if value is None else whole_number(value)
            if number is None:
                problems[name] = (
                    "required: the id of a run"
                    if value is None
                    else "the id of a run: a whole number"
                )
            else:
                ids[name] = number
        if problems:
            raise ValidationError(problems)
        # Either run unseen is no comparison: 404, as for one run.
        run_a = selectors.run_get(user=request.user, run_id=ids["a"])
        run_b = selectors.run_get(user=request.user, run_id=ids["b"])
        return Response(RunComparisonOutput(compare.compare_runs(run_a, run_b)).data)

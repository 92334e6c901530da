"""Runs as rows: the only source of truth for what a run did and what it does next."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.files.storage import Storage, storages
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from workflows.models import Recipe, RecipeVersion

from .status import Outcome, RunStatus, StepStatus, TaskStatus


class Run(models.Model):
    """One execution of a pinned recipe version with its inputs."""

    # The indexes below lead with these two: no single-column index of their own.
    recipe = models.ForeignKey(
        Recipe, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    version = models.ForeignKey(RecipeVersion, on_delete=models.PROTECT, related_name="runs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="runs", db_index=False
    )
    inputs = models.JSONField(default=dict)
    # Dry runs: actor alias -> scripted answers (DESIGN.md §4).
    script = models.JSONField(null=True, blank=True)
    # How the run was asked to run, beside its inputs: `{"classification": "bypass" | "ask"}`
    # (absent: the CLASSIFICATION_BYPASS setting decides; runner/steps/classify.py).
    # (A database default too: the bulk inserts of the index tests write rows without it.)
    options = models.JSONField(default=dict, blank=True, db_default={})
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.QUEUED)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, blank=True)
    error = models.TextField(blank=True)
    # The engine's RunState, and what the next claim executes: {"step", "prompt_suffix", "actor",
    # "variant", "choice", "resume_task"}; empty when there is nothing to do.
    state = models.JSONField(default=dict)
    next = models.JSONField(default=dict, blank=True)
    next_seq = models.PositiveIntegerField(default=1)
    # How many times each actor alias has been called, for scripted replies consumed in order.
    calls = models.JSONField(default=dict, blank=True)
    # What the run's model calls spent (the sums of its ModelCalls), added by each step's
    # commit in the statement that writes its calls (runner.store); read by budgets.
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    model_calls = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=0)
    # The lease fences commits: only the worker holding `lease_token` may commit the next step.
    lease_token = models.CharField(max_length=36, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    claims = models.PositiveIntegerField(
        default=0, help_text="claims of the pending step; too many means workers keep dying on it"
    )
    enqueued_at = models.DateTimeField(null=True, blank=True)
    event_seq = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A fork: the run it was forked from, and the step (seq) where it parted from it. Its
    # steps before that seq are copies of the parent's; it executed the others itself.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks"
    )
    forked_at_seq = models.PositiveIntegerField(null=True, blank=True)
    # What started the run when no person did (`schedule nightly at 2026-12-03T09:00:00Z`);
    # blank for a run started from a page, the API or the command line.
    # (A database default too: the bulk inserts of the index tests write rows without it.)
    trigger = models.CharField(max_length=200, blank=True, default="", db_default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        # No index holds a column that every step changes (lease, state, counters), so that a
        # step's UPDATE of the run can stay on its page without touching any index (HOT).
        # The lists read runs newest first (the API, the runs page): all those a user may see,
        # by status, by recipe (visibility is by recipe too). Each index ends with the order,
        # so that a page, and the page after a cursor (created_at, id), reads its rows only.
        # The status index also counts runs by status and finds the runnable ones.
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="runner_run_newest_idx"),
            models.Index(
                fields=["status", "-created_at", "-id"], name="runner_run_status_newest_idx"
            ),
            models.Index(
                fields=["recipe", "-created_at", "-id"], name="runner_run_recipe_newest_idx"
            ),
            models.Index(fields=["created_by", "-created_at"]),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.recipe_id} ({self.status})"

    @property
    def outcome_beyond_status(self) -> str:
        """The outcome's label when it says more than the status ("approved" of a succeeded
        run), "" when it says the same ("ended" of an ended run) or nothing."""
        return self.get_outcome_display() if self.outcome and self.outcome != self.status else ""


class StepRunQuerySet(models.QuerySet["StepRun"]):
    def executed(self) -> StepRunQuerySet:
        """Leave out the steps a fork copied from its parent: they ran, and count, there."""
        return self.filter(
            models.Q(run__forked_at_seq__isnull=True)
            | models.Q(seq__gte=models.F("run__forked_at_seq"))
        )


class StepRun(models.Model):
    """One attempt of one step in a run, committed once with its evaluations and events.

    A fork starts with copies of its parent's steps before `Run.forked_at_seq`; statistics
    read `StepRun.objects.executed()`, which leaves them out.
    """

    # Indexed by the unique (run, seq, attempt) below.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    seq = models.PositiveIntegerField(help_text="sequence number in the run, from 1")
    attempt = models.PositiveIntegerField(default=1, help_text="execution of this step, from 1")
    step_key = models.CharField(max_length=100)
    step_name = models.CharField(max_length=200)
    kind = models.CharField(max_length=20)
    actor_alias = models.CharField(max_length=100, blank=True)
    actor_name = models.CharField(max_length=200, blank=True)
    status = models.CharField(max_length=20, choices=StepStatus.choices)
    prompt = models.TextField(blank=True)
    response = models.TextField(blank=True)
    decision = models.CharField(max_length=50, blank=True)
    error = models.TextField(blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    # The sums over the step's model calls (its ModelCalls); None when none reported any.
    tokens_in = models.PositiveIntegerField(null=True, blank=True)
    tokens_out = models.PositiveIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=14, decimal_places=8, null=True, blank=True)
    model_calls = models.PositiveIntegerField(default=0)
    confidence = models.FloatField(null=True, blank=True)
    # success | failure | neutral, from the branch taken after it (`engine.attempt_outcome`);
    # "" on rows committed before outcomes were recorded.
    outcome = models.CharField(max_length=10, blank=True, db_default="")
    # The prompt variant the attempt asked with ("": the step's own prompt), and how its actor
    # and variant were chosen when the learner chose them (`engine.Choice.as_json`), else null.
    variant = models.CharField(max_length=200, blank=True, db_default="")
    choice = models.JSONField(null=True, blank=True)
    # The pattern of the run's latest intent when the step ran (`engine.RunState.intent_pattern`;
    # "": none): a suffix variant that succeeded is a strategy learned for that pattern, which
    # `{learned_strategies}` shows to the recipe's later runs (and, when its `learning` shares,
    # to the runs of its owner's other sharing recipes).
    intent_pattern = models.CharField(max_length=200, blank=True, db_default="")
    # Validation attempts, classifier trace, decision-tree trace, fallback notice.
    details = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = StepRunQuerySet.as_manager()

    class Meta:
        ordering = ["run", "seq", "attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "seq", "attempt"], name="unique_step_run_attempt"
            ),
        ]
        indexes = [
            models.Index(
                fields=["intent_pattern"],
                name="step_run_intent_pattern",
                condition=~models.Q(intent_pattern=""),
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.seq} {self.step_key}"


class BranchEvaluation(models.Model):
    """One branch evaluated after a step: matched or not, why, and whether it was taken."""

    # No constraint in the database (see RunEvent.run): written with its step, by the runner.
    step_run = models.ForeignKey(
        StepRun, on_delete=models.CASCADE, related_name="evaluations", db_constraint=False
    )
    order = models.PositiveIntegerField()
    branch = models.CharField(max_length=200)
    priority = models.PositiveIntegerField(null=True)
    matched = models.BooleanField()
    taken = models.BooleanField()
    reason = models.TextField()

    class Meta:
        ordering = ["step_run", "order"]

    def __str__(self) -> str:
        return f"{self.branch}: {self.reason}"


class ModelCall(models.Model):
    """One call to a model: the step's answer, a validation attempt, a judge, an evaluator, a
    classifier, a tool-calling turn or an embedding, with what it cost.

    Written with its step (runner.store), never changed. The cost is computed from the actor's
    prices when the call is made: a later change of price leaves it as it was.
    """

    class Purpose(models.TextChoices):
        ANSWER = "answer", "answer"
        VALIDATION = "validation", "validation attempt"
        JUDGE = "judge", "judge"
        EVALUATION = "evaluation", "evaluation"
        CLASSIFICATION = "classification", "classification"
        TOOL_TURN = "tool_turn", "tool-calling turn"
        EMBEDDING = "embedding", "embedding"
        OTHER = "other", "other"

    # What one call was, in the order the admin and the runs API show it.
    SHOWN_FIELDS = (
        "purpose",
        "actor_alias",
        "actor_name",
        "provider",
        "model",
        "tokens_in",
        "tokens_out",
        "tokens_estimated",
        "latency_ms",
        "cost",
        "currency",
        "error",
        "started_at",
    )

    # No constraints in the database (see RunEvent.run): written with the run's update and
    # its StepRun, in one statement on PostgreSQL. Indexed by (run, seq) below. The reverse
    # accessors keep Django's default names (`run.modelcall_set`): `model_calls` is the count
    # on Run and StepRun.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    step_run = models.ForeignKey(
        StepRun, null=True, blank=True, on_delete=models.CASCADE, db_constraint=False
    )
    seq = models.PositiveIntegerField(help_text="the step's sequence number in the run")
    purpose = models.CharField(max_length=20, choices=Purpose.choices)
    actor_alias = models.CharField(max_length=100, blank=True)
    actor_name = models.CharField(max_length=200, blank=True)
    provider = models.CharField(max_length=20, blank=True)
    model = models.CharField(max_length=200, blank=True)
    tokens_in = models.PositiveIntegerField(null=True, blank=True)
    tokens_out = models.PositiveIntegerField(null=True, blank=True)
    tokens_estimated = models.BooleanField(
        default=False, help_text="the server reported no usage: the tokens were counted here"
    )
    latency_ms = models.PositiveIntegerField()
    cost = models.DecimalField(
        max_digits=14,
        decimal_places=8,
        null=True,
        blank=True,
        help_text="at the actor's prices when the call was made; empty when it had none",
    )
    currency = models.CharField(max_length=3, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField()

    class Meta:
        ordering = ["run", "seq", "started_at", "id"]
        indexes = [
            models.Index(fields=["run", "seq"]),
            # Spend by actor over time (the actor's page, the metrics).
            models.Index(fields=["actor_name", "started_at"]),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.seq} {self.purpose} call of {self.actor_name}"


class HumanTask(models.Model):
    """A decision a reviewer group owes a run."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tasks")
    step_run = models.OneToOneField(StepRun, on_delete=models.CASCADE, related_name="task")
    step_key = models.CharField(max_length=100)
    group = models.ForeignKey(Group, on_delete=models.PROTECT, related_name="tasks")
    escalation_group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    question = models.TextField()
    material = models.TextField(blank=True)
    options = models.JSONField(default=list)
    status = models.CharField(max_length=20, choices=TaskStatus.choices, default=TaskStatus.OPEN)
    due_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    decision = models.CharField(max_length=50, blank=True)
    comment = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    # Who said they are on it (`runner.human.task_claim`): others still may decide, but see it.
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The reviewers' open tasks, oldest first (the inbox, /api/tasks/, /ws/reviews/):
            # open tasks only, a few among all those decided. By group, for one group's page
            # and the counts (and /metrics); in order, for a page of several busy groups'.
            models.Index(
                fields=["group", "created_at", "id"],
                condition=models.Q(status=TaskStatus.OPEN),
                name="runner_task_open_by_group_idx",
            ),
            models.Index(
                fields=["created_at", "id"],
                condition=models.Q(status=TaskStatus.OPEN),
                name="runner_task_open_oldest_idx",
            ),
            models.Index(fields=["status", "due_at"]),
        ]

    def __str__(self) -> str:
        return f"task {self.pk} ({self.status}) for {self.group}"

    @property
    def material_in_question(self) -> bool:
        """Whether the question quotes the whole material (a prompt that includes the draft):
        the pages then show the text once, in the question."""
        material = self.material.strip()
        return bool(material) and material in self.question


class RunEvent(models.Model):
    """The run's ordered event log: the outbox the websockets deliver and replay from."""

    # Indexed by the unique (run, seq) below. No foreign key constraint in the database: events
    # are only written in the statement or transaction that updates their run (and numbers
    # them under its row lock), so the check could never fail, and it cost a lookup of the run
    # per event at every commit (7 a step). Deleting a run through Django still deletes them.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="events", db_index=False, db_constraint=False
    )
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    data = models.JSONField(default=dict)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="unique_event_seq_per_run"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.seq} {self.type}"


class ActorStatistic(StepRun):
    """How each actor has fared per step: aggregated from StepRuns, shown in the admin.

    A proxy with no table of its own (nothing is written per step): see
    `runner.steps.actor_stats.actor_stat_rows`, the figures the retry with another actor uses.
    """

    class Meta:
        proxy = True
        verbose_name = "actor statistic"


class IdempotentRequest(models.Model):
    """The first answer to a request sent with an `Idempotency-Key`, given again to repeats.

    Written in the transaction of what the request did (a run started, a decision recorded), so
    a key is stored exactly when its effect is; see `runner.idempotency`.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, db_index=False)
    key = models.CharField(max_length=255)
    # What was asked (method, path, body), so that a key reused for another request is refused.
    fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField(null=True)
    response = models.JSONField(null=True, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="unique_idempotency_key_per_user"),
        ]

    def __str__(self) -> str:
        return f"{self.key} of user {self.user_id}"


class ActorSlot(models.Model):
    """One call to a limited actor, held while it is in flight (`runner.capacity`).

    Written only for actors with `max_concurrency` or `max_calls_per_minute`. A slot is in
    flight until `released_at`, or until `expires_at` (its call's time budget and a margin) for
    a worker that died holding it; every slot counts towards the actor's rate for the window
    after `acquired_at`. The reaper deletes the slots that count for neither any more.
    """

    # The actor's name (not a key: a slot outlives nothing, and deleting an actor that a run
    # still calls is refused anyway).
    actor = models.CharField(max_length=200)
    run_id = models.BigIntegerField(null=True, blank=True)
    seq = models.PositiveIntegerField(null=True, blank=True)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["actor", "acquired_at"], name="actor_slot_by_actor")]

    def __str__(self) -> str:
        return f"slot of {self.actor} since {self.acquired_at:%H:%M:%S}"


def _run_files() -> Storage:
    return storages["run_files"]


def run_file_path(run_id: int, file_id: object) -> str:
    """Where a run's file is stored: by the file's id, never the name it was uploaded with."""
    return f"runs/{run_id}/{file_id}"


def _run_file_path(instance: RunFile, filename: str) -> str:
    return run_file_path(instance.run_id, instance.id)


class RunFile(models.Model):
    """A file given to a run as a `file` / `files` input (`runner/run_files.py`).

    The bytes are in the `run_files` storage; the text and pages read from them are here, read
    once when the file was uploaded, so a template or a detector never converts it again. The
    run's inputs keep only a reference (`workflows.engine.files.REF_FIELDS`). Deleted with its
    run; its bytes go with it (a post_delete receiver in `runner/run_files.py`).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="files")
    input_name = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField(default=0, help_text="order in a files input")
    name = models.CharField(max_length=255, help_text="the uploaded file's base name")
    media_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    blob = models.FileField(storage=_run_files, upload_to=_run_file_path, max_length=200)
    text = models.TextField(blank=True)
    pages = models.JSONField(default=list, blank=True, help_text="the text of each page")
    image_count = models.PositiveIntegerField(default=0)
    width = models.PositiveIntegerField(null=True, blank=True, help_text="an image's, in pixels")
    height = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["input_name", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "input_name", "position"], name="unique_run_file_position"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.input_name}) of run {self.run_id}"

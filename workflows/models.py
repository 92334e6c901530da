"""Recipes as rows: actors, recipe drafts with steps and branches, and frozen versions.

The recipe document (format v1) is translated to and from these rows only in `adapters.py`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from . import engine
from .actor_spec import ActorFields, Problem, actor_problems
from .actor_urls import settings_allowlist

SLUG_VALIDATOR = RegexValidator(
    r"^[a-z0-9][a-z0-9_-]*$", "Use lowercase letters, digits, '-' and '_'."
)
# Step keys are what the engine accepts (recipe files may use upper case, e.g. "Summarise").
STEP_KEY_VALIDATOR = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9_-]*$", "Use letters, digits, '-' and '_'."
)
ENV_NAME_VALIDATOR = RegexValidator(
    r"^[A-Z_][A-Z0-9_]*$", "Name an environment variable, e.g. OPENAI_API_KEY."
)
CURRENCY_VALIDATOR = RegexValidator(
    r"^[A-Z]{3}$", "Use a three-letter currency code (ISO 4217), e.g. USD or EUR."
)


class Actor(models.Model):
    """Who runs a step: an LLM model behind a provider, or a group of human reviewers."""

    class Kind(models.TextChoices):
        LLM = "llm", "LLM"
        HUMAN = "human", "Human"

    class Provider(models.TextChoices):
        ANTHROPIC = "anthropic", "Anthropic"
        GEMINI = "gemini", "Gemini"
        OLLAMA = "ollama", "Ollama"
        OPENAI = "openai", "OpenAI-compatible"
        SCRIPTED = "scripted", "Scripted"

    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.LLM)
    provider = models.CharField(max_length=20, choices=Provider.choices, blank=True)
    model = models.CharField(max_length=200, blank=True)
    base_url = models.URLField(blank=True)
    # The API key is read from this environment variable at call time: never stored.
    api_key_env = models.CharField(max_length=100, blank=True, validators=[ENV_NAME_VALIDATOR])
    params = models.JSONField(default=dict, blank=True)
    timeout_s = models.PositiveIntegerField(default=120)
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.PROTECT)
    config = models.JSONField(default=dict, blank=True)
    # What the model can do (`workflows/engine/capabilities.py`), checked against each step's
    # `requires`; None: not declared, so not checked (the actor is taken to meet every need).
    capabilities = models.JSONField(
        null=True,
        blank=True,
        default=None,
        help_text='e.g. ["vision", "tools", "json_schema", {"context": 32768}]; empty: not declared',
    )
    # What a call costs, read when it is made and stored with it (runner.model_calls): a later
    # change of price does not rewrite the cost of calls made before. No price: no cost.
    price_in_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="price of a million input (prompt) tokens",
    )
    price_out_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(0)],
        help_text="price of a million output (answer) tokens",
    )
    currency = models.CharField(max_length=3, default="USD", validators=[CURRENCY_VALIDATOR])
    # Workload limits, shared by every worker through the database (runner.capacity); empty:
    # no limit, and the actor's calls never touch the slots table. A step whose actor is full
    # waits in the queue.
    max_concurrency = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="calls in flight at once, across every worker (empty: no limit)",
    )
    max_calls_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="calls started in any minute, across every worker (empty: no limit)",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                name="actor_human_has_group",
                condition=~models.Q(kind="human") | models.Q(group__isnull=False),
            ),
            models.CheckConstraint(
                name="actor_llm_has_provider",
                condition=~models.Q(kind="llm") | ~models.Q(provider=""),
            ),
            models.CheckConstraint(
                name="actor_price_in_not_negative",
                condition=models.Q(price_in_per_million__isnull=True)
                | models.Q(price_in_per_million__gte=0),
            ),
            models.CheckConstraint(
                name="actor_price_out_not_negative",
                condition=models.Q(price_out_per_million__isnull=True)
                | models.Q(price_out_per_million__gte=0),
            ),
            # 0 would make the actor's steps wait for ever: no limit is written empty.
            models.CheckConstraint(
                name="actor_max_concurrency_positive",
                condition=models.Q(max_concurrency__isnull=True) | models.Q(max_concurrency__gte=1),
            ),
            models.CheckConstraint(
                name="actor_max_calls_per_minute_positive",
                condition=models.Q(max_calls_per_minute__isnull=True)
                | models.Q(max_calls_per_minute__gte=1),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def problems(self, *, resolve: bool = True) -> list[Problem]:
        """Return what keeps this actor from running, as `(path, message)` (actor_spec.py).

        The base URL is checked with the call-time SSRF guard and PROVIDER_URL_ALLOWLIST;
        `resolve=False` checks it without looking its host name up.
        """
        fields = ActorFields(
            kind=self.kind,
            provider=self.provider,
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            params=self.params,
            timeout_s=self.timeout_s,
            has_group=self.group_id is not None,
            config=self.config,
            capabilities=self.capabilities,
        )
        return actor_problems(fields, allowlist=settings_allowlist(), resolve=resolve)

    @property
    def declared_capabilities(self) -> engine.Capabilities | None:
        """What the actor can do, parsed (None: not declared, or not readable)."""
        if self.capabilities is None:
            return None
        parsed, problems = engine.parse_capabilities(self.capabilities)
        return None if problems else parsed

    def clean(self) -> None:
        """Refuse an actor that cannot run (the admin and the demo seed call this)."""
        errors: dict[str, list[str]] = {}
        for path, message in self.problems():
            field, _, inner = path.partition(".")
            errors.setdefault(field, []).append(f"{inner}: {message}" if inner else message)
        if errors:
            raise ValidationError(errors)


class Recipe(models.Model):
    """A named graph of steps and branches, edited as a draft."""

    slug = models.CharField(max_length=100, unique=True, validators=[SLUG_VALIDATOR])
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    inputs = models.JSONField(default=dict, blank=True)
    # The limits of each run (format v1 `budget`, see workflows/engine/budget.py); None: none.
    budget = models.JSONField(null=True, blank=True)
    # How its steps learn (format v1 `learning`, see workflows/engine/learner.py); None: defaults.
    learning = models.JSONField(null=True, blank=True)
    # The defaults of its steps' validation settings (format v1 `validation`, see
    # workflows/engine/self_check.py); None: note 001's.
    validation = models.JSONField(null=True, blank=True)
    # Its inbound webhooks (format v1 `webhooks`, see workflows/engine/webhooks.py); None: none.
    webhooks = models.JSONField(null=True, blank=True)
    # Whom its runs tell of their events (format v1 `callbacks`, see workflows/engine/
    # callbacks.py); None: nobody.
    callbacks = models.JSONField(null=True, blank=True)
    # When its runs start by themselves (format v1 `schedules`, workflows/engine/schedules.py);
    # None: never. Only published versions run them (triggers/schedules/).
    schedules = models.JSONField(null=True, blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="recipes"
    )
    shared_with_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="shared_recipes"
    )
    shared_with_groups = models.ManyToManyField(Group, blank=True, related_name="shared_recipes")
    # Bumped on every saved edit of the draft, so two editors cannot silently overwrite each other.
    revision = models.PositiveIntegerField(default=1)
    # The draft as its author wrote it while it has errors: kept as is, so unfinished work is
    # saved, and the rows (which hold only valid recipes) keep the last draft that passed.
    # None when the rows are the draft. Publishing and test runs refuse it with its errors.
    draft_document = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]  # names may repeat: the pk keeps pages stable
        indexes = [models.Index(fields=["owner", "name"])]

    def __str__(self) -> str:
        return self.name

    @property
    def latest_version(self) -> RecipeVersion | None:
        """Return the latest published version (draft snapshots are not published), or None."""
        return self.versions.published().order_by("-number").first()


class RecipeActor(models.Model):
    """A recipe-local alias for an actor (`writer`), or for a reviewer group (`@human:editors`)."""

    recipe = models.ForeignKey(Recipe, on_delete=models.CASCADE, related_name="actor_aliases")
    alias = models.CharField(max_length=100)
    actor = models.ForeignKey(Actor, null=True, blank=True, on_delete=models.PROTECT)
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.PROTECT)

    class Meta:
        ordering = ["alias"]
        constraints = [
            models.UniqueConstraint(fields=["recipe", "alias"], name="unique_alias_per_recipe"),
            models.CheckConstraint(
                name="alias_names_actor_or_group",
                condition=models.Q(actor__isnull=False, group__isnull=True)
                | models.Q(actor__isnull=True, group__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.alias} → {self.reference}"

    @property
    def reference(self) -> str:
        """Return the actor reference as written in a recipe document."""
        if self.group_id is not None:
            return f"@human:{self.group.name}"
        return self.actor.name


class Step(models.Model):
    """A node of the recipe graph."""

    recipe = models.ForeignKey(Recipe, on_delete=models.CASCADE, related_name="steps")
    key = models.CharField(max_length=100, validators=[STEP_KEY_VALIDATOR])
    name = models.CharField(max_length=200)
    # The engine's step kinds, with their labels (a new kind needs a choices-only migration).
    kind = models.CharField(
        max_length=20,
        choices=[(kind.name, kind.label) for kind in engine.STEP_KINDS],
        default=engine.DEFAULT_STEP_KIND.name,
    )
    actor_alias = models.CharField(max_length=100, blank=True)
    prompt = models.TextField(blank=True)
    timeout_s = models.PositiveIntegerField(null=True, blank=True)
    validation = models.JSONField(null=True, blank=True)
    position = models.JSONField(null=True, blank=True)
    # Kind-specific settings: decision tree and leaf targets, classifier routes, human options.
    config = models.JSONField(default=dict, blank=True)
    order = models.PositiveIntegerField(help_text="Sequence order, used when no branch matches.")

    class Meta:
        ordering = ["recipe", "order"]
        constraints = [
            models.UniqueConstraint(fields=["recipe", "key"], name="unique_step_key_per_recipe"),
        ]
        indexes = [models.Index(fields=["recipe", "order"])]

    def __str__(self) -> str:
        return f"{self.recipe.slug}/{self.key}"


class Branch(models.Model):
    """An edge: a condition on the step's outcome, an action and a target."""

    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="branches")
    name = models.CharField(max_length=200)
    priority = models.PositiveIntegerField(default=1)
    condition = models.JSONField(default=dict)
    action = models.CharField(max_length=40)
    target = models.CharField(max_length=100, blank=True)
    params = models.JSONField(default=dict, blank=True)
    active = models.BooleanField(default=True)
    # What taking the branch says of the step's attempt; "" for the action's default.
    counts_as = models.CharField(max_length=10, blank=True)

    class Meta:
        # Equal priorities are evaluated in document order, the order they were written in.
        ordering = ["step", "priority", "id"]
        verbose_name_plural = "branches"

    def __str__(self) -> str:
        return f"{self.step.key}#{self.priority} {self.name}"


class RecipeVersionQuerySet(models.QuerySet["RecipeVersion"]):
    def published(self) -> RecipeVersionQuerySet:
        """Return the published versions, leaving out the hidden draft snapshots."""
        return self.filter(is_draft_snapshot=False)

    def draft_snapshots(self) -> RecipeVersionQuerySet:
        """Return the hidden draft snapshots only."""
        return self.filter(is_draft_snapshot=True)


# The number of every draft snapshot: published versions count from 1.
SNAPSHOT_NUMBER = 0


class RecipeVersion(models.Model):
    """An immutable snapshot of a recipe (its whole format-v1 document): a published version,
    or a hidden draft snapshot.

    A draft snapshot is what a test run from the editor pins: the draft as it was on the canvas,
    saved or not. It has no number (0), and is left out of the version lists, diffs, exports and
    "latest published" (`RecipeVersion.objects.published()`); it is never published. Snapshots
    of the same document are one row (`document_hash`).
    """

    recipe = models.ForeignKey(Recipe, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    document = models.JSONField()
    note = models.CharField(max_length=500, blank=True)
    is_draft_snapshot = models.BooleanField(default=False)
    # The SHA-256 of a draft snapshot's document (workflows.services.document_hash); blank on a
    # published version.
    document_hash = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = RecipeVersionQuerySet.as_manager()

    class Meta:
        ordering = ["recipe", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["recipe", "number"],
                condition=models.Q(is_draft_snapshot=False),
                name="unique_version_number",
            ),
            models.UniqueConstraint(
                fields=["recipe", "document_hash"],
                condition=models.Q(is_draft_snapshot=True),
                name="unique_draft_snapshot_per_document",
            ),
            # A snapshot can never pass for a published version, nor take one's number.
            models.CheckConstraint(
                name="version_numbered_unless_draft_snapshot",
                condition=models.Q(is_draft_snapshot=False, number__gte=1)
                | models.Q(is_draft_snapshot=True, number=SNAPSHOT_NUMBER),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.recipe.slug} {self.label}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # Runs pin a version: changing one after the fact would rewrite history.
        if not self._state.adding:
            raise ValidationError("A recipe version cannot be changed.")
        super().save(*args, **kwargs)

    @property
    def label(self) -> str:
        """Return how pages name this version: `v3`, or `draft` for a draft snapshot."""
        return "draft" if self.is_draft_snapshot else f"v{self.number}"

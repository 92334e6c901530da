"""Settings for Branchline, read from the environment (12-factor).

With nothing set, Branchline runs on the embedded default: a SQLite file, an in-process Celery
worker and an in-memory channel layer. `DATABASE_URL` and `REDIS_URL` switch to PostgreSQL and
Redis for production.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from workflows.actor_urls import Allowlist, URLRefused

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG = env.bool("DEBUG", default=False)

SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])


def _switch(name: str, *, default: bool) -> bool:
    """Read an on/off setting; a value that is neither stops the start (a typo must not turn
    a security setting off)."""
    raw = env.str(name, default="").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} is on or off (1/0, true/false, yes/no), not {raw!r}")


# HTTPS, for a deployment behind a proxy that terminates TLS (README: Production topology). All
# of it is off unless set, so that `make run` and the tests work over plain http on localhost;
# once SECURE_SSL_REDIRECT is on, the cookies are secure unless said otherwise.
# SECURE_PROXY_SSL_HEADER names the header the proxy sets to "https" on requests that reached it
# over TLS (e.g. X-Forwarded-Proto). Set it only behind such a proxy, which must also overwrite
# that header on every request: trusted from anyone else, a client could claim https.
_proxy_header = env.str("SECURE_PROXY_SSL_HEADER", default="")
if _proxy_header:
    _meta_name = "HTTP_" + _proxy_header.upper().replace("-", "_").removeprefix("HTTP_")
    if not re.fullmatch(r"HTTP_[A-Z0-9_]+", _meta_name):
        raise ImproperlyConfigured(
            f"SECURE_PROXY_SSL_HEADER is a header name such as X-Forwarded-Proto, not "
            f"{_proxy_header!r}"
        )
    SECURE_PROXY_SSL_HEADER = (_meta_name, "https")
SECURE_SSL_REDIRECT = _switch("SECURE_SSL_REDIRECT", default=False)
SESSION_COOKIE_SECURE = _switch("SESSION_COOKIE_SECURE", default=SECURE_SSL_REDIRECT)
CSRF_COOKIE_SECURE = _switch("CSRF_COOKIE_SECURE", default=SECURE_SSL_REDIRECT)
# HSTS makes browsers refuse plain http for this long: a choice to make, not a default.
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
if SECURE_HSTS_SECONDS < 0:
    raise ImproperlyConfigured("SECURE_HSTS_SECONDS is a number of seconds, 0 to turn HSTS off")
SECURE_HSTS_INCLUDE_SUBDOMAINS = _switch("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = _switch("SECURE_HSTS_PRELOAD", default=False)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc served from our static files
    "channels",
    "django_htmx",
    "template_partials",
    "rules.apps.AutodiscoverRulesConfig",
    "workflows",
    "knowledge",
    "tools",
    "runner",
    "triggers",
    "editor",
]

MIDDLEWARE = [
    # First: the request id on every response, text the database cannot hold refused at the
    # door, JSON 500/503 under /api/ (config/middleware.py).
    "config.middleware.RequestMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Database: a SQLite file by default (the embedded default), PostgreSQL via DATABASE_URL.
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'branchline.sqlite3'}")
}
_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.postgresql":
    _db["CONN_HEALTH_CHECKS"] = True
    # The runner's per-step statement is prepared (runner/store.py): planned once per
    # connection. Django's own queries bind on the client and are never prepared. Turn off
    # behind a pooler that cannot keep prepared statements (PgBouncer < 1.21 in transaction mode).
    if env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
        _db.setdefault("OPTIONS", {}).setdefault("prepare_threshold", 5)
    # Every process shares a bounded pool of connections: the ASGI server runs each request's
    # and each consumer call's sync code in a thread of its own, and a worker runs each step in
    # a thread of its own, giving its connection back while it waits on a model
    # (workflows/connections.py). A connection goes back to the pool when the request, the
    # consumer call or the task ends (CONN_MAX_AGE=0). A request that finds the pool busy for
    # DATABASE_POOL_TIMEOUT seconds fails with PoolTimeout, an OperationalError: a 503, never
    # an endless wait. Pooled connections keep the statements prepared on them. A worker
    # process sizes its pool by the DATABASE_WORKER_POOL_* values (config/celery.py).
    DATABASE_POOL_MIN_SIZE = env.int("DATABASE_POOL_MIN_SIZE", default=2)
    DATABASE_POOL_MAX_SIZE = env.int("DATABASE_POOL_MAX_SIZE", default=20)
    DATABASE_POOL_TIMEOUT = env.float("DATABASE_POOL_TIMEOUT", default=10.0)
    DATABASE_WORKER_POOL_MAX_SIZE = env.int("DATABASE_WORKER_POOL_MAX_SIZE", default=8)
    DATABASE_WORKER_POOL_TIMEOUT = env.float("DATABASE_WORKER_POOL_TIMEOUT", default=30.0)
    for _name, _size in [
        ("DATABASE_POOL_MAX_SIZE", DATABASE_POOL_MAX_SIZE),
        ("DATABASE_WORKER_POOL_MAX_SIZE", DATABASE_WORKER_POOL_MAX_SIZE),
    ]:
        if _size < 1:
            raise ImproperlyConfigured(f"{_name} must be at least 1")
    if not 0 <= DATABASE_POOL_MIN_SIZE <= DATABASE_POOL_MAX_SIZE:
        raise ImproperlyConfigured(
            "DATABASE_POOL_MIN_SIZE must be between 0 and DATABASE_POOL_MAX_SIZE"
        )
    if DATABASE_POOL_TIMEOUT <= 0 or DATABASE_WORKER_POOL_TIMEOUT <= 0:
        raise ImproperlyConfigured(
            "DATABASE_POOL_TIMEOUT and DATABASE_WORKER_POOL_TIMEOUT must be numbers of seconds "
            "above 0"
        )
    # CONN_HEALTH_CHECKS has the pool try each connection before handing it out, so one that
    # died in a database restart is never used. The pool reconnects in the background with a
    # doubling wait (1, 2, 4 s...), which would leave requests failing for seconds after the
    # database is back: giving up within a request's own wait lets the next request that finds
    # the pool empty start a new attempt at once.
    _db.setdefault("OPTIONS", {})["pool"] = {
        "min_size": DATABASE_POOL_MIN_SIZE,
        "max_size": DATABASE_POOL_MAX_SIZE,
        "timeout": DATABASE_POOL_TIMEOUT,
        "reconnect_timeout": DATABASE_POOL_TIMEOUT,
        "name": "branchline",
    }
    _db["CONN_MAX_AGE"] = 0
elif _db["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded worker writes from another thread: wait for the lock instead of failing.
    _db.setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
    # Tests use a file too: an in-memory database's shared cache fails concurrent writers at
    # once ("table is locked") instead of waiting, and tests run real worker threads.
    # One file per test process, so that parallel test sessions do not share it.
    _db.setdefault(
        "TEST",
        {"NAME": str(Path(tempfile.gettempdir()) / f"branchline-test-{os.getpid()}.sqlite3")},
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
AUTHENTICATION_BACKENDS = [
    "rules.permissions.ObjectPermissionBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Files given to runs (`runner.models.RunFile`): on the filesystem under RUN_FILES_ROOT unless
# RUN_FILES_STORAGE names another Django storage backend (its options from
# RUN_FILES_STORAGE_OPTIONS, a JSON object). Never served from a public URL: the run's views
# serve them to those who may see the run.
RUN_FILES_STORAGE = env.str(
    "RUN_FILES_STORAGE", default="django.core.files.storage.FileSystemStorage"
)
_run_files_options = env.json("RUN_FILES_STORAGE_OPTIONS", default={})
if RUN_FILES_STORAGE.endswith("FileSystemStorage"):
    _run_files_options.setdefault(
        "location", env.str("RUN_FILES_ROOT", default=str(BASE_DIR / "run-files"))
    )
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
    "run_files": {"BACKEND": RUN_FILES_STORAGE, "OPTIONS": _run_files_options},
}
# A file given to a run: larger is refused (a recipe's `max_bytes` may only lower it). Base64
# in a JSON body is also bounded by DATA_UPLOAD_MAX_MEMORY_SIZE, a multipart request's files by
# RUN_UPLOAD_MAX_BYTES.
RUN_FILE_MAX_BYTES = env.int("RUN_FILE_MAX_BYTES", default=20 * 1024 * 1024)
# A multipart request's files together at most (the run form, the API): past it, the request is
# refused before more of it is read.
RUN_UPLOAD_MAX_BYTES = env.int("RUN_UPLOAD_MAX_BYTES", default=3 * RUN_FILE_MAX_BYTES)
# A file given to a run has at most this many pages (each may cost a model call); more: a 400.
RUN_FILE_MAX_PAGES = env.int("RUN_FILE_MAX_PAGES", default=500)
# A run saved as a recipe test keeps its files in the test's inputs (base64): at most this many
# bytes of them together, so that the test's form can still be sent (DATA_UPLOAD_MAX_MEMORY_SIZE).
RECIPE_TEST_MAX_FILE_BYTES = env.int("RECIPE_TEST_MAX_FILE_BYTES", default=1024 * 1024)
# Files a user may upload to runs in a minute (API, form and CLI together); more get a 429.
RUN_FILE_UPLOADS_PER_MINUTE = env.int("RUN_FILE_UPLOADS_PER_MINUTE", default=60)
# An image's pixels (width x height) at most: Pillow refuses a larger one as a decompression bomb.
RUN_FILE_MAX_PIXELS = env.int("RUN_FILE_MAX_PIXELS", default=40_000_000)
# Images an llm step sends to a model at most (a PDF's pages count one each).
LLM_MAX_IMAGES = env.int("LLM_MAX_IMAGES", default=8)

# Uploaded recipe files and API bodies are capped so a huge payload gets a clear 400/413.
# Sized for the format's 1,000 steps (MAX_STEPS) at a few kilobytes each, positions included.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=8 * 1024 * 1024)
RECIPE_MAX_BYTES = env.int("RECIPE_MAX_BYTES", default=4 * 1024 * 1024)
# A document uploaded to a knowledge base: a larger one is refused (413) before it is read.
KNOWLEDGE_MAX_UPLOAD_BYTES = env.int("KNOWLEDGE_MAX_UPLOAD_BYTES", default=20 * 1024 * 1024)
if KNOWLEDGE_MAX_UPLOAD_BYTES < 1:
    raise ImproperlyConfigured("KNOWLEDGE_MAX_UPLOAD_BYTES is a number of bytes, at least 1")
# The text a document converts to: a longer one is refused (a small file may unpack to a lot).
KNOWLEDGE_MAX_TEXT_CHARS = env.int("KNOWLEDGE_MAX_TEXT_CHARS", default=5_000_000)
if KNOWLEDGE_MAX_TEXT_CHARS < 1:
    raise ImproperlyConfigured("KNOWLEDGE_MAX_TEXT_CHARS is a number of characters, at least 1")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # drf-spectacular's, with the error answers and media types the API really has.
    "DEFAULT_SCHEMA_CLASS": "workflows.apis.schema.AutoSchema",
    "EXCEPTION_HANDLER": "workflows.apis.errors.exception_handler",
    # DRF's own parsers let oversized, too deeply nested and infinite input through, and text
    # that PostgreSQL cannot store (NUL, lone surrogates).
    "DEFAULT_PARSER_CLASSES": [
        "workflows.apis.parsers.JSONParser",
        "workflows.apis.parsers.FormParser",
        "workflows.apis.parsers.MultiPartParser",
    ],
    # DRF's LimitOffsetPagination ignores or passes on bad `limit`/`offset`: ours refuses them.
    "DEFAULT_PAGINATION_CLASS": "workflows.apis.pagination.Pagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Branchline API",
    "DESCRIPTION": (
        "Author and run conditional LLM workflows. Every error is JSON: "
        '`{"errors": ["path: message", ...]}`. Text anywhere in a request may not hold a NUL '
        "character or a lone surrogate (a 400 naming where it is)."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # /api/docs/ loads Swagger UI from our static files (the pinned sidecar package), not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Separate request and response shapes: read-only fields are required in answers only.
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "workflows.apis.schema.recipe_components",
    ],
    # Runs, steps and tasks each have a `status`: name their enums instead of hashing them.
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "runner.status.RunStatus",
        "StepStatusEnum": "runner.status.StepStatus",
        "TaskStatusEnum": "runner.status.TaskStatus",
        "DocumentStatusEnum": "knowledge.models.Document.Status",
    },
}

# Redis: the Celery broker and the channel layer. Unset: the embedded in-process worker and the
# in-memory channel layer.
REDIS_URL = env.str("REDIS_URL", default="")
# The longest anything waits on a Redis that does not answer (it may be frozen, not down).
BROKER_TIMEOUT_SECONDS = env.float("BROKER_TIMEOUT_SECONDS", default=2.0)
EMBEDDED_WORKER = env.bool("EMBEDDED_WORKER", default=not REDIS_URL)

if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": BROKER_TIMEOUT_SECONDS,
                        "socket_connect_timeout": BROKER_TIMEOUT_SECONDS,
                    }
                ]
            },
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    # Counters that every process must share (the webhooks' rate limits) live in Redis too.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "socket_timeout": BROKER_TIMEOUT_SECONDS,
                "socket_connect_timeout": BROKER_TIMEOUT_SECONDS,
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"

CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# After losing the broker, Celery takes new messages only as fast as the tasks it received since
# finish: with a task that runs a run's steps for up to a slice, a worker ran at a third of its
# concurrency for the next half-minute. The runs' state is in the database: a message taken
# while the pool is full waits in the worker, and a run whose message is lost is sent again.
CELERY_WORKER_ENABLE_PREFETCH_COUNT_REDUCTION = False
# A worker runs each step in a thread: a step spends its time waiting on a model, holding no
# database connection meanwhile (workflows/connections.py), so one process keeps many calls in
# flight. `celery -A config worker` takes these; `-c` overrides the concurrency, and `--pool`
# any pool but prefork: Celery cannot tell `--pool prefork` from no option, so WORKER_POOL says.
CELERY_WORKER_POOL = env.str("WORKER_POOL", default="threads")
if CELERY_WORKER_POOL not in {"threads", "prefork", "solo"}:
    raise ImproperlyConfigured("WORKER_POOL must be threads, prefork or solo")
CELERY_WORKER_CONCURRENCY = env.int("WORKER_CONCURRENCY", default=100)
if CELERY_WORKER_CONCURRENCY < 1:
    raise ImproperlyConfigured("WORKER_CONCURRENCY must be at least 1")
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A Redis that is down or frozen must not hold up a request that sends a run's message: each
# send is one try bounded by these timeouts (runner.dispatch.send), and the reaper resends a
# message that did not leave. Workers reconnect by themselves.
CELERY_BROKER_CONNECTION_TIMEOUT = BROKER_TIMEOUT_SECONDS
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": 3600,
    "polling_interval": 0.05,
    "socket_timeout": BROKER_TIMEOUT_SECONDS,
    "socket_connect_timeout": BROKER_TIMEOUT_SECONDS,
}
# Redis serves priority 0 first: messages of recovered runs (runner.dispatch.RECOVERY_PRIORITY)
# go before those of runs queued in the ordinary way.
CELERY_TASK_DEFAULT_PRIORITY = 5
CELERY_TASK_IGNORE_RESULT = True
# No results are kept (the disabled backend): one backend object serves every thread. Without,
# Celery builds a backend per thread, looking it up in the installed packages' entry points,
# and the ASGI server runs each request in a thread of its own: a tenth of a run start's time.
CELERY_RESULT_BACKEND_THREAD_SAFE = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Provider base URLs that may point at private or loopback addresses (SSRF guard).
PROVIDER_URL_ALLOWLIST = env.list(
    "PROVIDER_URL_ALLOWLIST", default=["127.0.0.1:11434", "localhost:11434"]
)
try:
    Allowlist.parse(PROVIDER_URL_ALLOWLIST)
except URLRefused as exc:  # checked now, not at an actor's first write or call
    raise ImproperlyConfigured(f"PROVIDER_URL_ALLOWLIST: {exc}") from None


def _stdio_commands(raw: str) -> dict[str, list[str]]:
    """Read MCP_STDIO_COMMANDS: a JSON object {name: [program, argument, ...]}."""
    try:
        commands = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"MCP_STDIO_COMMANDS is not JSON: {exc}") from None
    if not isinstance(commands, dict):
        raise ImproperlyConfigured(
            'MCP_STDIO_COMMANDS is a JSON object {"name": ["program", "argument", ...]}'
        )
    for name, argv in commands.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,99}", name):
            raise ImproperlyConfigured(
                f"MCP_STDIO_COMMANDS: {name[:100]!r} is not a name (lowercase letters, digits, - _)"
            )
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) and a for a in argv)):
            raise ImproperlyConfigured(
                f"MCP_STDIO_COMMANDS.{name}: a list of the program and its arguments (text)"
            )
    return commands


# MCP tool servers. A stdio server runs one of these commands, named by staff, never typed by
# them: the demo server, which ships with the code, and those the operator adds in
# MCP_STDIO_COMMANDS. A server gets only the environment the MCP SDK passes on (HOME, LOGNAME,
# PATH, SHELL, TERM, USER): none of the app's secrets.
MCP_STDIO_COMMANDS: dict[str, list[str]] = {
    "demo": [sys.executable, "-m", "tools.demo_server"],
    **_stdio_commands(env.str("MCP_STDIO_COMMANDS", default="{}")),
}
# A tool result's text is cut at this many characters (the call is flagged as truncated).
TOOL_RESULT_MAX_CHARS = env.int("TOOL_RESULT_MAX_CHARS", default=100_000)
if TOOL_RESULT_MAX_CHARS < 1:
    raise ImproperlyConfigured("TOOL_RESULT_MAX_CHARS is a number of characters, at least 1")
# An http step's response body is read up to this many bytes; a larger one fails the step
# (nothing of it is stored). Its URL passes the SSRF guard of PROVIDER_URL_ALLOWLIST.
HTTP_STEP_MAX_RESPONSE_BYTES = env.int("HTTP_STEP_MAX_RESPONSE_BYTES", default=1024 * 1024)
if HTTP_STEP_MAX_RESPONSE_BYTES < 1:
    raise ImproperlyConfigured("HTTP_STEP_MAX_RESPONSE_BYTES is a number of bytes, at least 1")

# Inbound webhooks (triggers/webhooks): the largest body a hook reads (a larger one is a 413),
# and how many signed deliveries one hook takes per minute (more are a 429 with Retry-After).
WEBHOOK_MAX_BYTES = env.int("WEBHOOK_MAX_BYTES", default=1024 * 1024)
WEBHOOK_MAX_PER_MINUTE = env.int("WEBHOOK_MAX_PER_MINUTE", default=60)
if WEBHOOK_MAX_BYTES < 1 or WEBHOOK_MAX_PER_MINUTE < 1:
    raise ImproperlyConfigured("WEBHOOK_MAX_BYTES and WEBHOOK_MAX_PER_MINUTE are at least 1")

# Runs: bounded loops, leases and the periodic duties (see runner/advance.py).
RUN_MAX_STEPS = env.int("RUN_MAX_STEPS", default=100)
# Every classify step selects its always-active routes without asking its model (a run may
# say otherwise: `"classification": "ask"` when it starts; docs/recipe-format.md).
CLASSIFICATION_BYPASS = _switch("CLASSIFICATION_BYPASS", default=False)
# The most runs one `POST /api/recipes/{slug}/runs/batch` may start.
RUN_BATCH_MAX_RUNS = env.int("RUN_BATCH_MAX_RUNS", default=1000)
if RUN_BATCH_MAX_RUNS < 1:
    raise ImproperlyConfigured("RUN_BATCH_MAX_RUNS is a number of runs, at least 1")
RUN_LEASE_SECONDS = env.int("RUN_LEASE_SECONDS", default=30)
RUN_MAX_STEP_CLAIMS = env.int("RUN_MAX_STEP_CLAIMS", default=5)
# A worker goes on with a run's next step until this long after it took the run, then hands it
# back to the queue (other runs' steps go first). A hand-back costs a Celery message and a
# claim; with model calls of seconds, a slice of 2 s handed each run back after a step or two,
# and 1,000 runs of 3 one-second calls took the workers 23 s of CPU instead of 18.4 s.
RUN_TIME_SLICE_SECONDS = env.float("RUN_TIME_SLICE_SECONDS", default=10.0)
RUN_REQUEUE_AFTER_SECONDS = env.int("RUN_REQUEUE_AFTER_SECONDS", default=60)
RUN_BEAT_INTERVAL_SECONDS = env.float("RUN_BEAT_INTERVAL_SECONDS", default=5.0)
# Actors' limits (runner/capacity.py): the window of `max_calls_per_minute` (60; shorter only in
# tests), and how long a step whose actor is full waits in the queue before it looks again.
ACTOR_RATE_WINDOW_SECONDS = env.float("ACTOR_RATE_WINDOW_SECONDS", default=60.0)
ACTOR_FULL_RETRY_SECONDS = env.float("ACTOR_FULL_RETRY_SECONDS", default=0.5)
if ACTOR_RATE_WINDOW_SECONDS <= 0 or ACTOR_FULL_RETRY_SECONDS <= 0:
    raise ImproperlyConfigured(
        "ACTOR_RATE_WINDOW_SECONDS and ACTOR_FULL_RETRY_SECONDS are positive numbers of seconds"
    )
# Recipes' schedules (triggers/schedules/): how often beat asks a worker to start the runs that
# are due, how late a tick may start before it counts as missed (not run, unless the schedule
# catches up), and how many missed ticks a schedule that catches up runs at most.
SCHEDULE_TICK_SECONDS = env.float("SCHEDULE_TICK_SECONDS", default=15.0)
SCHEDULE_GRACE_SECONDS = env.float("SCHEDULE_GRACE_SECONDS", default=120.0)
SCHEDULE_CATCH_UP_MAX = env.int("SCHEDULE_CATCH_UP_MAX", default=10)
if not 0 < SCHEDULE_TICK_SECONDS < SCHEDULE_GRACE_SECONDS:
    raise ImproperlyConfigured(
        "SCHEDULE_TICK_SECONDS is a positive number of seconds, below SCHEDULE_GRACE_SECONDS"
    )
if SCHEDULE_CATCH_UP_MAX < 0:
    raise ImproperlyConfigured("SCHEDULE_CATCH_UP_MAX is a number of ticks, 0 or more")
CELERY_BEAT_SCHEDULE = {
    "reap-runs": {"task": "runner.reap_runs", "schedule": RUN_BEAT_INTERVAL_SECONDS},
    "expire-tasks": {"task": "runner.expire_tasks", "schedule": 10.0},
    "requeue-documents": {"task": "knowledge.requeue_stalled", "schedule": 60.0},
    "requeue-callbacks": {"task": "triggers.requeue_callbacks", "schedule": 60.0},
    # Any number of beats may send it: each tick starts its run once. A message older than
    # its interval is dropped (the next one does its work), and it goes before queued runs.
    "schedules-tick": {
        "task": "triggers.schedules_tick",
        "schedule": SCHEDULE_TICK_SECONDS,
        "options": {"expires": SCHEDULE_TICK_SECONDS, "priority": 0},
    },
}

EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="branchline@localhost")
# E-mail a group's reviewers when a task is created for them or escalated to them; the links in
# those mails start with SITE_URL.
TASK_EMAILS = env.bool("TASK_EMAILS", default=False)
SITE_URL = env.str("SITE_URL", default="http://127.0.0.1:8000")

# Operators' metrics at /metrics (Prometheus text format), for staff sessions and for a scraper
# that sends `Authorization: Bearer <METRICS_TOKEN>`. Unset, no token is accepted.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
if METRICS_TOKEN and not re.fullmatch(r"[\x21-\x7e]{16,}", METRICS_TOKEN):
    raise ImproperlyConfigured(
        "METRICS_TOKEN is at least 16 printable ASCII characters without spaces"
    )
# The step latency histogram of /metrics counts the steps that finished in this many hours
# (each scrape reads them again: a longer window costs more).
METRICS_LATENCY_WINDOW_HOURS = env.int("METRICS_LATENCY_WINDOW_HOURS", default=24)
if not 1 <= METRICS_LATENCY_WINDOW_HOURS <= 24 * 31:
    raise ImproperlyConfigured("METRICS_LATENCY_WINDOW_HOURS is a number of hours, 1 to 744")

# OpenTelemetry traces (runner/tracing.py): on when OTEL_EXPORTER_OTLP_ENDPOINT or
# OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, read with the other OTEL_* variables by the SDK.
# Prompts, answers, tool arguments and results go into spans only with TRACE_CONTENT.
TRACE_CONTENT = env.bool("TRACE_CONTENT", default=False)
# The run monitor links a run's trace id to this address (e.g.
# `http://jaeger:16686/trace/{trace_id}`); unset, it shows the id alone.
TRACE_URL_TEMPLATE = env.str("TRACE_URL_TEMPLATE", default="").strip()
if TRACE_URL_TEMPLATE and (
    "{trace_id}" not in TRACE_URL_TEMPLATE
    or not re.match(r"https?://[^\s/]+", TRACE_URL_TEMPLATE)
    or re.search(r"\s", TRACE_URL_TEMPLATE)
):
    raise ImproperlyConfigured(
        "TRACE_URL_TEMPLATE is an http(s) address holding {trace_id}, e.g. "
        "http://jaeger:16686/trace/{trace_id}"
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    # The HTTP clients log each request's URL, the MCP SDK each session's id: not for the logs.
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},
    },
}

if not DEBUG:
    SESSION_COOKIE_HTTPONLY = True
    X_FRAME_OPTIONS = "DENY"

"""What an actor needs to run, checked as a whole: one set of rules for every place that
writes actors (the API, the admin, the demo seed, through `Actor.clean`) and for the
providers that read them (the scripted provider parses its config here).

Pure Python (no Django import): the runner's providers use it too. Problems are returned as
`(path, message)` pairs; a path is a field, or a place inside `config` or `params`
(`config.rules[0].match`, `params.temperature`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from workflows.actor_urls import Allowlist, NameUnresolved, URLRefused, check_base_url
from workflows.engine.capabilities import parse_capabilities
from workflows.engine.errors import RegexError, RegexTooLarge
from workflows.engine.regex import Pattern, compile_pattern

LLM, HUMAN = "llm", "human"
ANTHROPIC, GEMINI, OLLAMA, OPENAI, SCRIPTED = "anthropic", "gemini", "ollama", "openai", "scripted"
PROVIDERS = (ANTHROPIC, GEMINI, OLLAMA, OPENAI, SCRIPTED)
# Providers whose API always wants a key (the vendors' own servers).
_KEYED_PROVIDERS = frozenset({ANTHROPIC, GEMINI})
# A call longer than an hour holds a worker's lease that long: a mistake, not a model.
MAX_TIMEOUT_S = 3600
# Keys the provider sets itself; letting actor params override them would break parsing.
RESERVED_PARAMS = frozenset({"model", "messages", "stream", "stream_options", "n"})


def _camel(name: str) -> str:
    """Return a snake_case name in camelCase (`system_instruction`: `systemInstruction`)."""
    first, *rest = name.split("_")
    return first + "".join(part.title() for part in rest)


# And those of the providers with an API of their own (Anthropic's body fields, Gemini's
# GenerateContentConfig fields, which its SDK also takes in camel case) that the provider sets
# from the request.
_GEMINI_OWN = (
    "system_instruction",
    "tools",
    "tool_config",
    "automatic_function_calling",
    "http_options",
    "should_return_http_response",
)
_PROVIDER_RESERVED_PARAMS = {
    ANTHROPIC: frozenset({"system", "tools"}),
    GEMINI: frozenset(_GEMINI_OWN) | {_camel(name) for name in _GEMINI_OWN},
}
# The common params below that a provider's API has no equivalent for.
_UNSUPPORTED_PARAMS = {ANTHROPIC: frozenset({"seed", "presence_penalty", "frequency_penalty"})}
# Params every server reads with these types; a wrong one fails every call. The providers with
# an API of their own translate them (`max_tokens` is Gemini's `max_output_tokens`, `stop`
# Anthropic's and Gemini's `stop_sequences`).
_PARAM_TYPES: dict[str, tuple[str, tuple[type, ...]]] = {
    "temperature": ("a number", (int, float)),
    "top_p": ("a number", (int, float)),
    "presence_penalty": ("a number", (int, float)),
    "frequency_penalty": ("a number", (int, float)),
    "max_tokens": ("a whole number", (int,)),
    "seed": ("a whole number", (int,)),
    "stop": ("a text or a list of texts", (str, list)),
}
_SCRIPT_KEYS = ("replies", "rules", "delay_ms")
_RULE_KEYS = frozenset({"match", "reply"})

Problem = tuple[str, str]
_Add = Callable[[str, str], None]


def reserved_params(provider: str) -> frozenset[str]:
    """Return the params `provider` sets itself, which an actor's params may not set."""
    return RESERVED_PARAMS | _PROVIDER_RESERVED_PARAMS.get(provider, frozenset())


class SpecError(ValueError):
    """A part of an actor's settings that cannot work; `path` is where (may be empty)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@dataclass(frozen=True)
class ScriptedConfig:
    """A scripted actor's answers: rules (a pattern on the prompt, a reply), replies, delay."""

    replies: tuple[str, ...]
    rules: tuple[tuple[Pattern, str], ...]
    delay_ms: float


def parse_scripted_config(config: object) -> ScriptedConfig:
    """Return the scripted config `{"replies", "rules", "delay_ms"}` parsed, rules compiled.

    Raise SpecError with the path inside the config (`rules[0].match`) of the first problem.
    Rules compile through the engine's one regex function, under its bounds.
    """
    if not isinstance(config, Mapping):
        raise SpecError(
            "", f"must be an object with replies, rules or delay_ms, not {type(config).__name__}"
        )
    unknown = sorted(str(key) for key in config if key not in _SCRIPT_KEYS)
    if unknown:
        raise SpecError(
            "", f"unknown key {', '.join(map(repr, unknown))}; expected {', '.join(_SCRIPT_KEYS)}"
        )
    replies = config.get("replies", [])
    if not isinstance(replies, list):
        raise SpecError("replies", "must be a list of texts")
    for index, reply in enumerate(replies):
        if not isinstance(reply, str):
            raise SpecError(f"replies[{index}]", f"must be text, not {type(reply).__name__}")
    raw_rules = config.get("rules", [])
    if not isinstance(raw_rules, list):
        raise SpecError("rules", "must be a list of {match, reply}")
    rules = tuple(_rule(index, rule) for index, rule in enumerate(raw_rules))
    delay_ms = config.get("delay_ms", 0)
    if isinstance(delay_ms, bool) or not isinstance(delay_ms, int | float) or not delay_ms >= 0:
        raise SpecError("delay_ms", "must be a number of milliseconds >= 0")
    return ScriptedConfig(tuple(replies), rules, float(delay_ms))


def _rule(index: int, rule: object) -> tuple[Pattern, str]:
    path = f"rules[{index}]"
    if not isinstance(rule, Mapping) or set(rule) != _RULE_KEYS:
        raise SpecError(path, "must be an object with exactly match and reply")
    match, reply = rule["match"], rule["reply"]
    if not isinstance(match, str) or not isinstance(reply, str):
        raise SpecError(path, "match and reply must be text")
    try:
        return compile_pattern(match), reply
    except RegexTooLarge as exc:
        raise SpecError(f"{path}.match", str(exc)) from None
    except RegexError as exc:
        raise SpecError(f"{path}.match", f"invalid regex: {exc}") from None


@dataclass(frozen=True)
class ActorFields:
    """An actor's settings as written (the model's fields; `has_group` for its group)."""

    kind: str
    provider: str
    model: str
    base_url: str
    api_key_env: str
    params: object
    timeout_s: object
    has_group: bool
    config: object
    capabilities: object = None


def actor_problems(
    actor: ActorFields, *, allowlist: Sequence[str] | Allowlist, resolve: bool = True
) -> list[Problem]:
    """Return what keeps `actor` from running as `(path, message)`; empty when it can run.

    The base URL goes through the call-time SSRF guard with the same allowlist. With
    `resolve`, its host name is looked up and refused if it names a private address; a
    name that does not resolve now is accepted, as every call checks it again.
    """
    problems: list[Problem] = []

    def add(path: str, message: str) -> None:
        problems.append((path, message))

    if actor.kind == HUMAN:
        if not actor.has_group:
            add("group", "a human actor needs a reviewer group")
        for name in ("provider", "model", "base_url", "api_key_env"):
            if getattr(actor, name):
                add(name, "a human actor calls no model; leave it empty")
        for name in ("params", "config", "capabilities"):
            if getattr(actor, name):
                add(name, "a human actor calls no model; leave it empty")
        return problems
    if actor.kind != LLM:
        add("kind", f"unknown kind {actor.kind!r}; expected llm or human")
        return problems
    if actor.has_group:
        add("group", "only human actors have a reviewer group")
    if not actor.provider:
        add("provider", f"an LLM actor needs a provider: {', '.join(PROVIDERS)}")
    elif actor.provider not in PROVIDERS:
        add("provider", f"unknown provider {actor.provider!r}; expected {', '.join(PROVIDERS)}")
    elif actor.provider == SCRIPTED:
        _scripted_problems(actor, add)
    else:
        _server_problems(actor, add, allowlist=allowlist, resolve=resolve)
    timeout = actor.timeout_s
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int)
        or not 1 <= timeout <= MAX_TIMEOUT_S
    ):
        add("timeout_s", f"must be a whole number of seconds from 1 to {MAX_TIMEOUT_S}")
    if not isinstance(actor.params, Mapping):
        add("params", "must be a JSON object")
    for where, message in parse_capabilities(actor.capabilities)[1]:
        add("capabilities", f"{where}: {message}" if where else message)
    return problems


def _scripted_problems(actor: ActorFields, add: _Add) -> None:
    for name in ("base_url", "api_key_env"):
        if getattr(actor, name):
            add(name, "a scripted actor calls no server; leave it empty")
    try:
        script = parse_scripted_config(actor.config)
    except SpecError as exc:
        add(f"config.{exc.path}" if exc.path else "config", exc.message)
        return
    if not script.replies and not script.rules:
        add("config", "a scripted actor needs replies or rules to answer with")


def _server_problems(
    actor: ActorFields, add: _Add, *, allowlist: Sequence[str] | Allowlist, resolve: bool
) -> None:
    if not actor.model.strip():
        add("model", f"{_an(actor.provider)} actor needs the name of the model to call")
    if actor.config:
        add("config", "only scripted actors take a config; put model settings in params")
    if actor.provider in _KEYED_PROVIDERS and not actor.api_key_env:
        add(
            "api_key_env",
            f"{_an(actor.provider)} actor needs the environment variable that holds its API key",
        )
    if actor.base_url:
        try:
            check_base_url(actor.base_url, allowlist=allowlist, resolve=resolve)
        except NameUnresolved:
            pass  # DNS answers change: the call checks the name again, and refuses then
        except URLRefused as exc:
            add("base_url", exc.reason)
    if isinstance(actor.params, Mapping):
        reserved = sorted(reserved_params(actor.provider).intersection(actor.params))
        if reserved:
            add("params", f"may not set {', '.join(reserved)} (the provider sets them)")
        for key in sorted(_UNSUPPORTED_PARAMS.get(actor.provider, frozenset())):
            if key in actor.params:
                add(f"params.{key}", f"the {actor.provider} API has no {key}")
        for key, (kind, types) in _PARAM_TYPES.items():
            value = actor.params.get(key)
            if value is None:
                continue
            wrong_list = isinstance(value, list) and not all(isinstance(v, str) for v in value)
            if isinstance(value, bool) or not isinstance(value, types) or wrong_list:
                add(f"params.{key}", f"must be {kind}")
        max_tokens = actor.params.get("max_tokens")
        if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens < 1:
            add("params.max_tokens", "must be at least 1")


def _an(word: str) -> str:
    """Return `word` after its indefinite article ("an openai", "a gemini")."""
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"

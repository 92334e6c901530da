"""Render prompt templates by plain `{name}` substitution, and the names a run's templates use.

Not `str.format` (which reaches attributes and indexes: `{x.__class__}`) and not Jinja (which
runs code): a small tokenizer that knows six kinds of names and nothing else: inputs, step
answers (`stepN_response`, `steps.KEY.response`), hits (`sources`, `steps.KEY.sources`),
`feedback`, a file input's documents (`files.NAME.text`, …; see `file_templates.py`), and an
http step's secrets (`secrets.NAME`, an env var the step names in its `secret_env`; no other
template may use one).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence

from workflows.engine.errors import TemplateError
from workflows.engine.file_templates import (
    DocumentText,
    file_reference,
    file_reference_problem,
    is_file_name,
    render_file_reference,
    without_ids,
)

# `{{` and `}}` are literal braces; `{...}` is a placeholder; a lone brace is an error.
_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STEP_REFERENCE = re.compile(r"steps\.([A-Za-z0-9][A-Za-z0-9_-]*)\.response")
_STEP_SOURCES = re.compile(r"steps\.([A-Za-z0-9][A-Za-z0-9_-]*)\.sources")
_FORMAT_FIELD = re.compile(r"(\w+)((?:\.\w+|\[[^\]]*\])*)(![a-z])?(:.*)?", re.DOTALL)
_STEP_NUMBER = re.compile(r"step([1-9][0-9]*)_response")
_SECRET_REFERENCE = re.compile(r"secrets\.([A-Za-z_][A-Za-z0-9_]*)")

# `{sources}`: the hits the step searched, else the run's latest (see `sources.py`).
SOURCES_NAME = "sources"
# `{learned_strategies}`: what worked before for requests of the run's intent pattern ("" when
# nothing has; see `learner.format_strategies`).
LEARNED_STRATEGIES_NAME = "learned_strategies"

# A template is a tuple of literal strings and (placeholder,) one-tuples, in order.
_Piece = str | tuple[str]


def _refusal(name: str) -> str | None:
    """Return why `name` is not a placeholder we substitute, or None if it is one."""
    if (
        _IDENTIFIER.fullmatch(name)
        or _STEP_REFERENCE.fullmatch(name)
        or _STEP_SOURCES.fullmatch(name)
        or _SECRET_REFERENCE.fullmatch(name)
    ):
        return None
    if is_file_name(name):
        return file_reference_problem(name)
    if name == "":
        return "empty placeholder {}; write {{ and }} for literal braces"
    # Name what str.format would have done with it, so the author sees why it is refused.
    found = _FORMAT_FIELD.fullmatch(name)
    if found is None:
        return f"{{{name}}} is not a template name; write {{{{ and }}}} for literal braces"
    base, accessors, conversion, spec = found.groups()
    if base.isdigit():
        return f"positional placeholder {{{name}}} is not allowed; use a name"
    if conversion:
        return f"conversion in {{{name}}} is not allowed"
    if spec is not None:
        return f"format spec in {{{name}}} is not allowed"
    if accessors.startswith("["):
        return f"indexing in {{{name}}} is not allowed"
    return f"attribute access in {{{name}}} is not allowed"


@functools.lru_cache(maxsize=1024)
def _pieces(template: str) -> tuple[_Piece, ...]:
    pieces: list[_Piece] = []
    literal: list[str] = []
    position = 0
    for token in _TOKEN.finditer(template):
        literal.append(template[position : token.start()])
        position = token.end()
        text = token.group(0)
        if text in ("{{", "}}"):
            literal.append(text[0])
            continue
        name = token.group(1)
        if name is None:
            raise TemplateError(text, f"single {text!r} in template; write {text * 2} for a brace")
        problem = _refusal(name)
        if problem:
            raise TemplateError(name, problem)
        pieces.append("".join(literal))
        literal = []
        pieces.append((name,))
    literal.append(template[position:])
    pieces.append("".join(literal))
    return tuple(p for p in pieces if p != "")


def template_names(template: str) -> list[str]:
    """Return the placeholder names of `template` in order of first use.

    Raise TemplateError naming the first refused placeholder (`{x.__class__}`, `{0}`,
    `{x[0]}`, `{x!r}`, `{x:>10}`, a lone brace).
    """
    names: dict[str, None] = {}
    for piece in _pieces(template):
        if isinstance(piece, tuple):
            names[piece[0]] = None
    return list(names)


def step_number(name: str) -> int | None:
    """Return N for a `stepN_response` name, or None for any other name."""
    found = _STEP_NUMBER.fullmatch(name)
    return int(found.group(1)) if found else None


def step_reference(name: str) -> str | None:
    """Return KEY for a `steps.KEY.response` name, or None for any other name."""
    found = _STEP_REFERENCE.fullmatch(name)
    return found.group(1) if found else None


def step_sources_reference(name: str) -> str | None:
    """Return KEY for a `steps.KEY.sources` name, or None for any other name."""
    found = _STEP_SOURCES.fullmatch(name)
    return found.group(1) if found else None


def secret_reference(name: str) -> str | None:
    """Return NAME for a `secrets.NAME` name (an env var), or None for any other name."""
    found = _SECRET_REFERENCE.fullmatch(name)
    return found.group(1) if found else None


def as_text(value: object) -> str:
    """Return the text a value is substituted as: strings as is, others as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)


class TemplateContext(Mapping[str, object]):
    """The names a run's templates may use, each looked up only when a template uses it.

    Inputs by name; `stepN_response` (N is the step's position in `step_order`) and
    `steps.KEY.response`, the step's latest answer as `answer(KEY)` gives it; `feedback`;
    `sources` and `steps.KEY.sources`, the hits as `sources(None)` / `sources(KEY)` format
    them ("" without `sources`); `learned_strategies`, as `learned()` gives them ("" without
    it); `files.NAME.…`, the documents of the file input NAME (`file_inputs` maps each file
    input to whether it takes several files) as `documents(NAME)` gives them. An answer, a hit or a
    document is asked for only when a template names it: a run need not hold them (the runner
    reads them from their StepRuns and RunFiles). A file input's own name shows its refs
    without their stored ids.
    """

    def __init__(
        self,
        inputs: Mapping[str, object],
        step_order: Sequence[str],
        answer: Callable[[str], str],
        feedback: str = "",
        sources: Callable[[str | None], str] | None = None,
        learned: Callable[[], str] | None = None,
        documents: Callable[[str], Sequence[DocumentText]] | None = None,
        file_inputs: Mapping[str, bool] | None = None,
    ) -> None:
        self._inputs = inputs
        self._documents = documents
        self._file_inputs = file_inputs or {}
        self._learned = learned
        self._order = step_order
        self._keys = frozenset(step_order)
        self._answer = answer
        self._feedback = feedback
        self._sources = sources

    def _step_key(self, name: str) -> str | None:
        """Return the key of the step whose answer `name` stands for, or None."""
        number = step_number(name)
        if number is not None:
            return self._order[number - 1] if number <= len(self._order) else None
        key = step_reference(name)
        return key if key in self._keys else None

    def _sources_key(self, name: str) -> tuple[bool, str | None]:
        """Return whether `name` shows hits, and whose: a step's key, or None for `sources`."""
        if name == SOURCES_NAME:
            # A recipe input called `sources` (allowed before steps searched) keeps its meaning.
            return name not in self._inputs, None
        key = step_sources_reference(name)
        return key in self._keys, key

    def __getitem__(self, name: str) -> object:
        # The step names shadow inputs of the same name, and `feedback` shadows both.
        if name == "feedback":
            return self._feedback
        key = self._step_key(name)
        if key is not None:
            return self._answer(key)
        shows, whose = self._sources_key(name)
        if shows:
            return self._sources(whose) if self._sources is not None else ""
        if name == LEARNED_STRATEGIES_NAME and name not in self._inputs:
            return self._learned() if self._learned is not None else ""
        reference = file_reference(name)
        if reference is not None:
            several = self._file_inputs.get(reference.input)
            if several is None or self._documents is None:
                raise KeyError(name)
            if reference.input not in self._inputs:
                raise TemplateError(
                    name, f"{{{name}}}: the run was given no file for '{reference.input}'"
                )
            documents = self._documents(reference.input)
            return render_file_reference(reference, documents, name, several=several)
        if name in self._file_inputs:
            return without_ids(self._inputs[name])
        return self._inputs[name]

    def _shows_file(self, name: str) -> bool:
        reference = file_reference(name)
        return reference is not None and (
            reference.input in self._file_inputs and reference.input in self._inputs
        )

    def __contains__(self, name: object) -> bool:
        # Without asking for the answer, which Mapping's default (via __getitem__) would do.
        if not isinstance(name, str):
            return False
        return (
            name == "feedback"
            or self._step_key(name) is not None
            or self._sources_key(name)[0]
            or name == LEARNED_STRATEGIES_NAME
            or name in self._inputs
            or self._shows_file(name)
        )

    def __iter__(self) -> Iterator[str]:
        names = dict.fromkeys(self._inputs)
        for number, key in enumerate(self._order, start=1):
            names[f"step{number}_response"] = names[f"steps.{key}.response"] = None
            names[f"steps.{key}.sources"] = None
        names["feedback"] = names[SOURCES_NAME] = names[LEARNED_STRATEGIES_NAME] = None
        for name in self._file_inputs:
            if name in self._inputs:
                for part in ("text", "pages", "name"):
                    names[f"files.{name}.{part}"] = None
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def render(template: str, context: Mapping[str, object]) -> str:
    """Substitute every `{name}` of `template` from `context`.

    Raise TemplateError with the name when a placeholder is refused or not in `context`.
    """
    out: list[str] = []
    for piece in _pieces(template):
        if isinstance(piece, str):
            out.append(piece)
            continue
        name = piece[0]
        try:
            value = context[name]
        except KeyError:
            raise TemplateError(name, f"unknown template name '{name}'") from None
        out.append(as_text(value))
    return "".join(out)

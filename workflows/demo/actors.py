"""The demo actors: scripted models that answer the demo recipes sensibly, with no LLM server.

A scripted actor answers with the first rule whose RE2 pattern matches the prompt, otherwise
with its replies in order (the last one repeating). The rules below match the wording of the
demo recipes' prompts and of the questions the runner asks judges and classifiers, so a plain
run of each demo recipe walks an interesting path:

- creative-writing-qc: a story too short, asked again; the judge rates it 6, the quality
  review gives 5, so it goes to the editors (who decide in the reviewer inbox);
- validation-loop: a vague first answer scores low, the retry with the judge's feedback
  passes;
- regulatory-decision-tree: the uploaded document is read page by page; the moderator flags a
  page about explosives or detonators as unsafe, a valid SSN or card number chooses the PII
  prompt, an embedded image next to a sensitive keyword the image prompt;
- first-1000-primes: the learner tries the coder first; it delivers code twice (the second
  time after a sharper prompt), so the step is retried with another actor, who delivers the
  numbers. After a few runs the learner asks the mathematician first;
- document-routing: the default document is an invoice and a complaint, so both routes run
  before the reply;
- answer-with-citations: the project's docs answer the default question; the librarian cites
  its source as [1] and the judge rates the answer 8, so it is approved. A question the docs
  do not cover finds nothing, and the librarian says it does not know.

The two Ollama actors are there for trying real models; they fail when no Ollama runs.
`seed_demo --model-url` (`make run MODEL=local`) has the writer, the judge and the classifier
answered by a real model instead (`with_real_model`).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

WRITER_DELAY_MS = 600
MODEL_DELAY_MS = 300


def first_primes(count: int) -> list[int]:
    """Return the first `count` prime numbers."""
    primes: list[int] = []
    candidate = 2
    while len(primes) < count:
        if all(candidate % p for p in primes if p * p <= candidate):
            primes.append(candidate)
        candidate += 1
    return primes


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


# -- creative writing -----------------------------------------------------------------------

SHORT_STORY = (
    "The lighthouse keeper lit the lamp, and the storm came anyway. By morning the sea was "
    "calm, and every boat was home."
)
STORY = """Mara had kept the lighthouse on Gull Point for thirty-one winters, and she knew every \
storm by its voice. This one arrived humming, low and curious, and instead of throwing itself \
at the glass it circled the tower like a cat deciding whether to come inside.

She opened the gallery door. The wind tumbled in, smelling of salt and far-off rain, and \
leafed through her logbooks as if looking for its own name. "You're early," Mara told it. The \
storm rattled the kettle in reply.

All night they kept the lamp together. When the beam swept north, the storm held its breath \
so the light reached farther; when a fishing boat lost its way near the reef, the wind leaned \
on the waves until they lay down flat. By dawn every boat was tied up in the harbour, and the \
storm, tired and smaller now, curled around the foot of the tower.

It came back the next winter, and the one after that. The fishermen began to call the worst \
nights "Mara's weather", and on those nights nobody was ever lost."""
REVISED_STORY = (
    STORY
    + """

Years later, when Mara's eyes grew too weak for the night watch, a girl from the village \
climbed the tower to learn the lamp. The first time the storm came humming, the girl was \
afraid. Mara only put the kettle on and opened the gallery door, and the wind came in, \
gentle as ever, to meet the new keeper."""
)
DRAGON_STORY = STORY.replace(
    "It came back the next winter",
    "Out of the clouds behind the storm came a small grey dragon, who had been riding it "
    "since the Faroes and was very tired. Mara gave it the warm stones of the lamp room to "
    "sleep on, and in return it breathed on the frozen lamp whenever the ice came.\n\n"
    "They came back the next winter",
)

WRITER: dict[str, Any] = {
    "name": "demo-writer",
    "provider": "scripted",
    "model": "demo-writer",
    "config": {
        "rules": [
            {"match": "(?s)^Revise the story.*(?i:dragon)", "reply": DRAGON_STORY},
            {"match": "^Revise the story", "reply": REVISED_STORY},
            {"match": "longer, more detailed", "reply": STORY},
        ],
        "replies": [SHORT_STORY],
        "delay_ms": WRITER_DELAY_MS,
    },
}

# -- judge: story ratings and validation scores -------------------------------------------

GOOD_ANSWER_SCORES = _json(
    {
        "relevance": 24,
        "helpfulness": 23,
        "accuracy": 24,
        "completeness": 22,
        "feedback": "Clear and correct; it explains the mechanism and the sunset case.",
    }
)
VAGUE_ANSWER_SCORES = _json(
    {
        "relevance": 15,
        "helpfulness": 8,
        "accuracy": 12,
        "completeness": 5,
        "feedback": (
            "Too vague. Explain the mechanism: sunlight scatters off air molecules (Rayleigh "
            "scattering) and short blue wavelengths scatter most; say why sunsets are red."
        ),
    }
)

JUDGE: dict[str, Any] = {
    "name": "demo-judge",
    "provider": "scripted",
    "model": "demo-judge",
    "config": {
        "rules": [
            # ai_evaluation of a story (creative-writing-qc, high_quality_story).
            {
                "match": "Rate story quality",
                "reply": "Score: 6\nA warm premise and a vivid setting, but the middle drags.",
            },
            # The quality review step itself.
            {
                "match": "^Rate this story quality",
                "reply": (
                    "Score: 5/10. The premise is charming, but the storm never feels like a "
                    "real threat and the ending arrives too quickly. An editor should look "
                    "at the pacing."
                ),
            },
            # ai_evaluation of the review: read the score it gives.
            {"match": "review of a story", "reply": "5"},
            # Validation loop: the answer explains Rayleigh scattering, or it does not.
            {
                "match": "(?s)^You review an answer.*ANSWER: .*(?i:rayleigh)",
                "reply": GOOD_ANSWER_SCORES,
            },
            {"match": "^You review an answer", "reply": VAGUE_ANSWER_SCORES},
            # ai_evaluation of a cited answer (answer-with-citations, well_grounded).
            {
                "match": "cites its sources",
                "reply": "Score: 8\nClear, and each statement points to a source.",
            },
        ],
        "replies": ["Score: 6"],
        "delay_ms": MODEL_DELAY_MS,
    },
}

# -- assistant: the validation loop -----------------------------------------------------------

VAGUE_ANSWER = "The sky is blue because of the way light behaves in the air."
GOOD_ANSWER = (
    "The sky looks blue because of Rayleigh scattering. Sunlight holds every colour, and on "
    "its way through the atmosphere it meets nitrogen and oxygen molecules far smaller than "
    "its wavelength. Such small particles scatter short wavelengths much more strongly than "
    "long ones (about with the inverse fourth power of the wavelength), so blue light is "
    "scattered all over the sky while red and yellow mostly pass straight through. Violet is "
    "scattered even more, but sunlight holds less of it and our eyes are less sensitive to "
    "it, so we see blue. At sunrise and sunset the light crosses far more air, most of the "
    "blue is scattered away before it reaches us, and the sky turns orange and red."
)

ASSISTANT: dict[str, Any] = {
    "name": "demo-assistant",
    "provider": "scripted",
    "model": "demo-assistant",
    "config": {
        "rules": [
            {
                "match": "^You could not answer",
                "reply": (
                    "I can't give a reliable answer to this yet. What I can say is general; "
                    "for a precise answer, tell me more about the context you need it for."
                ),
            },
            # A retry carries the judge's feedback, which names the mechanism.
            {"match": "(?i)rayleigh", "reply": GOOD_ANSWER},
        ],
        "replies": [VAGUE_ANSWER],
        "delay_ms": MODEL_DELAY_MS,
    },
}

# -- content moderator: the regulatory decision tree's safety judge, asked of each page -------

MODERATOR: dict[str, Any] = {
    "name": "demo-moderator",
    "provider": "scripted",
    "model": "demo-moderator",
    "config": {
        # The page is quoted between the safety prompt's markers; the prompt's own words
        # ("weapons") are outside them.
        "rules": [{"match": "(?s)<<<TEXT.*(?i:explosive|detonator).*TEXT>>>", "reply": "UNSAFE"}],
        "replies": ["SAFE"],
        "delay_ms": MODEL_DELAY_MS,
    },
}

# -- compliance classifier: the regulatory decision tree's four prompts ----------------------

COMPLIANCE: dict[str, Any] = {
    "name": "demo-compliance",
    "provider": "scripted",
    "model": "demo-compliance",
    "config": {
        "rules": [
            {
                "match": "Focus on safety",
                "reply": _json(
                    {
                        "category": "restricted content",
                        "regulations": ["Digital Services Act"],
                        "risk": "high",
                        "action": "hold for a safety review before publication",
                        "reason": "Pages flagged by the safety scan hold restricted content.",
                    }
                ),
            },
            {
                "match": "Focus on personal data",
                "reply": _json(
                    {
                        "category": "loan application",
                        "regulations": ["GDPR", "GLBA"],
                        "risk": "high",
                        "action": "redact the SSN before sharing; keep it encrypted at rest",
                        "reason": "A social security number is high-risk personal data.",
                    }
                ),
            },
            {
                "match": "Focus on images",
                "reply": _json(
                    {
                        "category": "marketing material",
                        "regulations": ["consumer protection (advertising)"],
                        "risk": "medium",
                        "action": "review the images next to the flagged keywords",
                        "reason": "Images appear together with sensitive keywords.",
                    }
                ),
            },
        ],
        "replies": [
            _json(
                {
                    "category": "general business document",
                    "regulations": [],
                    "risk": "low",
                    "action": "none",
                    "reason": "No safety, PII or image concerns were detected.",
                }
            )
        ],
        "delay_ms": MODEL_DELAY_MS,
    },
}

# -- adaptive primes: analyst, coder, mathematician ------------------------------------------

PRIMES_CODE = """```python
def first_primes(count):
    primes = []
    candidate = 2
    while len(primes) < count:
        if all(candidate % p for p in primes if p * p <= candidate):
            primes.append(candidate)
        candidate += 1
    return primes


print(first_primes(1000))
```"""
PRIMES = ", ".join(str(p) for p in first_primes(1000))

ANALYST: dict[str, Any] = {
    "name": "demo-analyst",
    "provider": "scripted",
    "model": "demo-analyst",
    "config": {
        "rules": [
            # The intent step (`engine.intent_prompt`) and criteria_met's judge.
            {
                "match": "^Analyse the request below",
                "reply": _json(
                    {
                        "intent": "List the first 1000 prime numbers",
                        "output_type": "numbers",
                        "expected_format": "raw_data",
                        "success_criteria": ["exactly 1000 numbers", "all of them prime"],
                        "quality_requirements": {"accuracy": 0.95, "completeness": 0.95},
                    }
                ),
            },
            {
                "match": '(?s)meets each of these success criteria.*TEXT: "2, 3, 5, 7, 11',
                "reply": "Score: 2\n"
                + _json(
                    {
                        "criteria": [
                            {"n": 1, "met": True, "why": "1000 numbers"},
                            {"n": 2, "met": True, "why": "all prime"},
                        ]
                    }
                ),
            },
            {
                "match": "^Analyse what the user actually wants",
                "reply": _json(
                    {
                        "dataType": "numbers",
                        "expectedFormat": "raw_data",
                        "successCriteria": ["first 1000", "prime numbers"],
                        "qualityRequirements": {"accuracy": 0.95, "completeness": 0.95},
                    }
                ),
            },
            # Content validation: code where numbers were wanted fails.
            {
                "match": "(?s)^Check whether the delivered content.*Delivered content:.*```",
                "reply": _json(
                    {
                        "overallSuccess": False,
                        "dataTypeMatch": False,
                        "formatMatch": False,
                        "successCriteriaMet": [False, False],
                        "qualityScore": 0.2,
                        "issues": ["code was delivered instead of the numbers"],
                        "improvementSuggestions": ["deliver the numbers themselves"],
                    }
                ),
            },
            {
                "match": "^Check whether the delivered content",
                "reply": _json(
                    {
                        "overallSuccess": True,
                        "dataTypeMatch": True,
                        "formatMatch": True,
                        "successCriteriaMet": [True, True],
                        "qualityScore": 0.97,
                        "issues": [],
                        "improvementSuggestions": [],
                    }
                ),
            },
            {
                "match": '(?s)^Decide whether the task is complete.*"overallSuccess": false',
                "reply": _json(
                    {
                        "decision": "continue",
                        "reason": "The delivered content does not meet the criteria yet",
                        "progress": 50,
                        "nextAction": "deliver the numbers",
                    }
                ),
            },
            {
                "match": "^Decide whether the task is complete",
                "reply": _json(
                    {
                        "decision": "stop",
                        "reason": "All success criteria met",
                        "progress": 100,
                        "nextAction": None,
                    }
                ),
            },
        ],
        "replies": ["{}"],
        "delay_ms": MODEL_DELAY_MS,
    },
}

CODER: dict[str, Any] = {
    "name": "demo-coder",
    "provider": "scripted",
    "model": "demo-coder",
    "config": {"replies": [PRIMES_CODE], "delay_ms": MODEL_DELAY_MS},
}

MATHEMATICIAN: dict[str, Any] = {
    "name": "demo-mathematician",
    "provider": "scripted",
    "model": "demo-mathematician",
    "config": {"replies": [PRIMES], "delay_ms": MODEL_DELAY_MS},
}

# -- document routing: classifier and clerk --------------------------------------------------


def _route_rule(route: str, words: str, reason: str) -> dict[str, str]:
    # The question names the route first and quotes the input after `INPUT:`.
    return {
        "match": f"(?s)route '{route}' applies.*INPUT: .*(?i:{words})",
        "reply": _json({"selected": True, "reason": reason}),
    }


CLASSIFIER: dict[str, Any] = {
    "name": "demo-classifier",
    "provider": "scripted",
    "model": "demo-classifier",
    "config": {
        "rules": [
            _route_rule("invoice", "invoice|amount due|total due|payment", "It asks to be paid."),
            _route_rule(
                "contract",
                "agreement|contract|hereby|terms and conditions",
                "It sets out terms between parties.",
            ),
            _route_rule(
                "complaint",
                "damaged|broken|refund|unacceptable|complain|disappointed",
                "The sender is unhappy and expects a remedy.",
            ),
        ],
        "replies": [_json({"selected": False, "reason": "Nothing in the input fits this route."})],
        "delay_ms": MODEL_DELAY_MS,
    },
}

CLERK: dict[str, Any] = {
    "name": "demo-clerk",
    "provider": "scripted",
    "model": "demo-clerk",
    "config": {
        "rules": [
            {
                "match": "^Extract the invoice",
                "reply": _json(
                    {
                        "invoice_number": "INV-2024-117",
                        "issuer": "Northwind Supplies",
                        "total": 9800,
                        "currency": "EUR",
                        "due_date": "15 March",
                    }
                ),
            },
            {
                "match": "^List the contract",
                "reply": (
                    "Parties: the two companies named in the document. Term: not stated. "
                    "Payment obligations: as invoiced. Termination: not stated. Unusual "
                    "clauses: none found."
                ),
            },
            {
                "match": "^Summarise the complaint",
                "reply": (
                    "Six chairs from the last delivery arrived damaged. Remedy: ship six "
                    "replacement chairs at our cost and collect the damaged ones."
                ),
            },
            {
                "match": "^Draft a short, polite reply",
                "reply": (
                    "Dear Northwind Supplies,\n\nThank you for invoice INV-2024-117 (EUR 9,800, "
                    "due 15 March); it is scheduled for payment. We are sorry that six chairs "
                    "from the last delivery arrived damaged: we will ship six replacements at "
                    "our cost this week and collect the damaged ones.\n\nKind regards"
                ),
            },
        ],
        "replies": ["Noted."],
        "delay_ms": MODEL_DELAY_MS,
    },
}

# -- real models (for trying Ollama; not used by the demo recipes) ---------------------------

# -- answer with citations: librarian and embedder --------------------------------------------

CITED_ANSWER = (
    "A condition type is one module in workflows/engine/conditions/: it defines check, "
    "evaluate and a ConditionType with its operators, fields and summary [1]. List it in TYPES "
    "in workflows/engine/conditions/registry.py, add its tests, and run python -m "
    "workflows.engine.docs to rewrite the table of condition types [1]."
)
REVISED_ANSWER = (
    "Write the condition type as one module in workflows/engine/conditions/ and list it in "
    "TYPES of the registry [1]; the parser, the editor's forms and the docs read it from there "
    "[1]."
)
UNCITED_ANSWER = "The sources mention this, but none of them answers the question clearly."
DONT_KNOW = (
    "I don't know: the Branchline documentation says nothing about this. A maintainer of the "
    "project, or the source code itself, may have the answer."
)

LIBRARIAN: dict[str, Any] = {
    "name": "demo-librarian",
    "provider": "scripted",
    "model": "demo-librarian",
    "config": {
        "rules": [
            # A reviewer asked for a revision: their note follows the question and sources.
            {
                "match": "(?s)^Answer the question.*Reviewer's note[^\\n]*: \\S",
                "reply": REVISED_ANSWER,
            },
            {
                "match": "(?s)^Answer the question.*\\nQuestion: [^\\n]*(?i:condition type)",
                "reply": CITED_ANSWER,
            },
            {"match": "^Answer the question", "reply": UNCITED_ANSWER},
            {"match": "^The documentation has nothing", "reply": DONT_KNOW},
        ],
        "replies": [DONT_KNOW],
        "delay_ms": MODEL_DELAY_MS,
    },
}

# Embeds the demo knowledge base's chunks and queries: a scripted actor's embedding is a local
# hashing of words (knowledge/embeddings.py), so searching by meaning needs no server.
EMBEDDER: dict[str, Any] = {
    "name": "demo-embedder",
    "provider": "scripted",
    "model": "demo-embedder",
    # Asked to chat instead, it says what it is for.
    "config": {"replies": ["I embed the demo knowledge base; I do not answer questions."]},
}

# Explains a sum with the demo MCP server's tools (calculate-with-tools): it asks for one
# multiplication, then answers once the loop has sent the tool's result back to it.
CALCULATED_ANSWER = "The sum is worked out above, and the multiply tool says 2 times 21 is 42."
CALCULATOR: dict[str, Any] = {
    "name": "demo-calculator",
    "provider": "scripted",
    "model": "demo-calculator",
    # What its step of calculate-with-tools `requires`; the other demo actors declare none,
    # so nothing is checked of them.
    "capabilities": ["tools", "json", {"context": 32768}],
    "config": {
        "rules": [
            # The tool loop sends the tool's result back as a `tool` message: the prompt is the
            # same each time, so the reply is chosen by the call's number in the run.
            {"match": "^Say in one sentence", "reply": "That sum is too big for this demo."},
            {"match": "^Say that the calculator", "reply": "Sorry: the calculator failed."},
        ],
        "replies": [
            '@tool_calls: [{"name": "demo.multiply", "arguments": {"a": 2, "b": 21}}]',
            CALCULATED_ANSWER,
        ],
        "delay_ms": MODEL_DELAY_MS,
    },
}

OLLAMA_BASE_URL = "http://127.0.0.1:11434/v1"


def _ollama(model: str) -> dict[str, Any]:
    return {
        "name": model,
        "provider": "ollama",
        "model": model,
        "base_url": OLLAMA_BASE_URL,
        "timeout_s": 300,
        "config": {},
    }


# Example prices (per million tokens in / out), so the demo's runs show what they would cost:
# a large model writes and codes, small ones judge, classify and fetch.
LARGE_MODEL_PRICES = {
    "price_in_per_million": Decimal("2.50"),
    "price_out_per_million": Decimal("10"),
}
SMALL_MODEL_PRICES = {
    "price_in_per_million": Decimal("0.15"),
    "price_out_per_million": Decimal("0.60"),
}
EMBEDDING_PRICES = {"price_in_per_million": Decimal("0.02"), "price_out_per_million": Decimal("0")}
DEMO_PRICES = {
    WRITER["name"]: LARGE_MODEL_PRICES,
    CODER["name"]: LARGE_MODEL_PRICES,
    MATHEMATICIAN["name"]: LARGE_MODEL_PRICES,
    EMBEDDER["name"]: EMBEDDING_PRICES,
}


def _prices(actor: dict[str, Any]) -> dict[str, Decimal]:
    """Return the example prices of a scripted demo actor (a local Ollama model costs nothing)."""
    if actor.get("provider") == "ollama":
        return {}
    return DEMO_PRICES.get(actor["name"], SMALL_MODEL_PRICES)


# The fields of each actor, as on workflows.models.Actor; `name` is the key seed_demo updates by.
# The connection fields are given for every actor, so that an actor a real model answered
# (`with_real_model`) is scripted again, and free, when the demo is seeded without it.
DEMO_ACTORS: list[dict[str, Any]] = [
    {
        "kind": "llm",
        "timeout_s": 120,
        "base_url": "",
        "api_key_env": "",
        "params": {},
        "price_in_per_million": None,
        "price_out_per_million": None,
        **_prices(actor),
        **actor,
    }
    for actor in (
        WRITER,
        JUDGE,
        ASSISTANT,
        COMPLIANCE,
        MODERATOR,
        ANALYST,
        CODER,
        MATHEMATICIAN,
        CLASSIFIER,
        CLERK,
        LIBRARIAN,
        EMBEDDER,
        CALCULATOR,
        _ollama("llama3.2:latest"),
        _ollama("qwen3:latest"),
    )
]


# -- the demo answered by a real model (`seed_demo --model-url`, `make run MODEL=local`) -------

# The actors whose text a run of the demo shows first, and the longest answer each may give:
# the writer's story, the judge's score and the classifier's route. The other demo actors stay
# scripted: their recipes need answers of a shape a small model seldom gives.
REAL_MODEL_MAX_TOKENS = {WRITER["name"]: 320, JUDGE["name"]: 48, CLASSIFIER["name"]: 48}
# The same text on every run: temperature 0 and a fixed seed.
REAL_MODEL_PARAMS = {"temperature": 0, "seed": 42}


def with_real_model(base_url: str, model: str, api_key_env: str = "") -> list[dict[str, Any]]:
    """Return the demo actors with the writer, the judge and the classifier answered by
    `model` at the OpenAI-compatible server at `base_url` (a local model costs nothing: no
    prices), its key in the env var `api_key_env` if it needs one."""
    actors = []
    for spec in DEMO_ACTORS:
        max_tokens = REAL_MODEL_MAX_TOKENS.get(spec["name"])
        if max_tokens is not None:
            spec = {
                **spec,
                "provider": "openai",
                "model": model,
                "base_url": base_url,
                "api_key_env": api_key_env,
                "params": {**REAL_MODEL_PARAMS, "max_tokens": max_tokens},
                "config": {},
                "price_in_per_million": None,
                "price_out_per_million": None,
            }
        actors.append(spec)
    return actors

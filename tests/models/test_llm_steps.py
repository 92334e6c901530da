"""What a real model does in runs: SmolLM2-135M-Instruct, served by llama-cpp-python on loopback,
answers as an OpenAI-compatible actor through the real runner (a Celery worker takes each run).

A model this small writes plain sense but seldom the exact shape a judge's or a classifier's
question asks for: those tests hold the run to what the recipe promises whatever the model
writes, an end on a branch the recipe declares, with a reason for every branch evaluated.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from runner import services
from runner.models import ModelCall, Run, StepRun
from runner.publisher import publisher
from runner.status import RunStatus
from tests.models.conftest import MODEL, SEED, ModelServer, model_actor
from tests.runner.conftest import wait_for
from tests.runner.recipes import DEFAULT, branch, publish_document, steps
from workflows import engine
from workflows.models import Recipe

pytestmark = pytest.mark.django_db(transaction=True)

# The runs' end: a run that ends on a branch the recipe declares is succeeded or ended.
FINISHED = (RunStatus.SUCCEEDED, RunStatus.ENDED)
RUN_TIMEOUT_S = 180
CAPITAL = "What is the capital of France? Answer in one sentence."
JUDGE_PROMPT = "Rate how well the text answers the question from 1 to 10."


def publish(owner: Any, slug: str, steps: list[dict[str, Any]]) -> Recipe:
    return publish_document(
        owner,
        {
            "format": "branchline.recipe/v1",
            "slug": slug,
            "name": slug,
            "inputs": {"question": {"type": "string", "required": True}},
            "actors": {"model": "smol", "judge": "smol-judge"},
            "steps": steps,
        },
    )


def ask_step(*branches: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "key": "answer",
        "name": "Answer",
        "kind": "llm",
        "actor": "model",
        "prompt": "{question}",
        "branches": list(branches) or [branch("done", 1, DEFAULT, "@complete")],
        **fields,
    }


def finished(owner: Any, recipe: Recipe, question: str = CAPITAL) -> Run:
    """Start a run on the worker and wait until it stops on a declared branch."""
    run = services.run_start(user=owner, recipe=recipe, inputs={"question": question})
    return wait_for(run, *FINISHED, RunStatus.FAILED, timeout=RUN_TIMEOUT_S)


def calls(step: StepRun) -> list[ModelCall]:
    return list(ModelCall.objects.filter(step_run=step).order_by("started_at", "pk"))


def reasons(step: StepRun) -> dict[str, str]:
    return {e.branch: e.reason for e in step.evaluations.all()}


def taken(step: StepRun) -> str:
    return step.evaluations.get(taken=True).branch


def asked_directly(server: ModelServer, prompt: str, params: dict[str, Any]) -> dict[str, Any]:
    """Ask the server the question a call asked, as one plain request; return its answer."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": prompt}], **params}
    response = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120)
    response.raise_for_status()
    return dict(response.json())


@pytest.fixture
def smol(model_server: ModelServer) -> None:
    """The recipes' model and their judge: the local model, with short answers."""
    model_actor(model_server, "smol", max_tokens=48)
    model_actor(model_server, "smol-judge", max_tokens=16)


def test_a_real_model_answers_the_prompt(
    worker: Any, runs_settled: None, owner: Any, smol: None
) -> None:
    recipe = publish(owner, "capital", [ask_step()])

    done = finished(owner, recipe)

    assert done.status == RunStatus.SUCCEEDED, done.error
    answer = steps(done)["answer"]
    assert answer.status == "succeeded" and answer.actor_name == "smol"
    assert "Paris" in answer.response
    (call,) = calls(answer)
    assert (call.purpose, call.provider, call.model, call.error) == ("answer", "openai", MODEL, "")


def test_a_streamed_answer_arrives_token_by_token_and_is_stored_whole(
    worker: Any,
    runs_settled: None,
    owner: Any,
    smol: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every text delta pushed as it comes (the runner batches them per 100 ms; none is kept
    # back here), so the pushed tokens are the whole answer.
    monkeypatch.setattr("runner.steps.session.TOKEN_PUSH_INTERVAL_S", 0)
    pushed: list[dict[str, Any]] = []
    send = publisher.send
    monkeypatch.setattr(
        publisher,
        "send",
        lambda group, message: (pushed.append(message), send(group, message))[1],
    )
    recipe = publish(owner, "sea", [ask_step()])

    done = finished(owner, recipe, "Write two sentences about the sea.")

    assert done.status == RunStatus.SUCCEEDED, done.error
    answer = steps(done)["answer"]
    tokens = [m["event"]["data"] for m in pushed if m["type"] == "run.token"]
    assert len(tokens) > 1
    assert [t["offset"] for t in tokens] == [
        sum(len(t["text"]) for t in tokens[:i]) for i in range(len(tokens))
    ]
    assert "".join(t["text"] for t in tokens) == answer.response
    assert len(answer.response.split()) > 5
    assert done.events.get(type="step.finished").data["response"] == answer.response
    assert not done.events.filter(type="step.token").exists()


def test_the_judges_call_counts_the_tokens_the_server_reported(
    worker: Any, runs_settled: None, owner: Any, smol: None, model_server: ModelServer
) -> None:
    judged = {
        "type": "ai_evaluation",
        "operator": "greater_equal",
        "value": 1,
        "evaluator": "judge",
        "prompt": JUDGE_PROMPT,
    }
    recipe = publish(
        owner,
        "judged",
        [
            ask_step(
                branch("scored", 1, judged, "@complete", action="QUALITY_APPROVED"),
                branch("unscored", 2, DEFAULT, "@end", action="END_RECIPE"),
            )
        ],
    )

    done = finished(owner, recipe)

    answer = steps(done)["answer"]
    asked, judge = calls(answer)
    assert (asked.purpose, judge.purpose) == ("answer", "evaluation")
    # The judge's call is not streamed: its usage is the server's own count.
    question = engine.evaluation_prompt(JUDGE_PROMPT, answer.response)
    direct = asked_directly(
        model_server, question, {"temperature": 0, "seed": SEED, "max_tokens": 16}
    )
    assert judge.tokens_estimated is False
    assert (judge.tokens_in, judge.tokens_out) == (
        direct["usage"]["prompt_tokens"],
        direct["usage"]["completion_tokens"],
    )
    # llama-cpp-python's server sends no usage in a stream (it ignores `stream_options`): the
    # streamed answer's tokens are counted here, and marked estimated.
    assert asked.tokens_estimated is True and asked.tokens_in and asked.tokens_out
    assert answer.tokens_in == asked.tokens_in + judge.tokens_in
    assert done.status in FINISHED, done.error
    assert taken(answer) in ("scored", "unscored") and all(reasons(answer).values())


def test_a_judge_branch_reads_the_models_score_whatever_it_writes(
    worker: Any, runs_settled: None, owner: Any, smol: None
) -> None:
    # Asked this way SmolLM2 writes "The score is 7." (asked as in the test above, it quotes
    # the text back and gives no score within its 16 tokens: that run ends on the default).
    approved = {
        "type": "ai_evaluation",
        "operator": "greater_equal",
        "value": 7,
        "evaluator": "judge",
        "prompt": "Give the text a score from 1 to 10.",
    }
    recipe = publish(
        owner,
        "judge",
        [
            ask_step(
                branch("approved", 1, approved, "@complete", action="QUALITY_APPROVED"),
                branch("not_approved", 2, DEFAULT, "@end", action="END_RECIPE"),
            )
        ],
    )

    done = finished(owner, recipe)

    assert done.status in FINISHED, done.error
    answer = steps(done)["answer"]
    judged = reasons(answer)["approved"]
    # The judge's own words decide: a score it gave, compared, or why it gave none.
    assert judged.startswith("judge scored ") or judged.startswith("judge answer had no score")
    approved_taken = taken(answer) == "approved"
    assert approved_taken == (judged.startswith("judge scored ") and "needs" not in judged)
    assert done.status == (RunStatus.SUCCEEDED if approved_taken else RunStatus.ENDED)
    assert all(reasons(answer).values())
    (judge,) = [c for c in calls(answer) if c.purpose == "evaluation"]
    assert judge.error == "" and judge.tokens_out


def test_a_validation_loop_judges_each_real_answer_and_ends_on_a_declared_branch(
    worker: Any, runs_settled: None, owner: Any, smol: None
) -> None:
    passed = {"type": "validation_passed", "operator": "equals", "value": True}
    fell_back = {"type": "fallback_used", "operator": "equals", "value": True}
    recipe = publish(
        owner,
        "validated",
        [
            ask_step(
                branch("passed", 1, passed, "@complete", action="QUALITY_APPROVED"),
                branch("fell_back", 2, fell_back, "@end", action="END_RECIPE"),
                validation={
                    "threshold": 0.75,
                    "max_attempts": 2,
                    "judge": "judge",
                    "fallback": "No answer.",
                },
            )
        ],
    )

    done = finished(owner, recipe)

    assert done.status in FINISHED, done.error
    answer = steps(done)["answer"]
    validation = answer.details["validation"]
    attempts = validation["attempts"]
    assert 1 <= len(attempts) <= 2
    assert all(a["response"].strip() for a in attempts)
    assert answer.confidence == attempts[-1]["confidence"]
    if validation["used_fallback"]:
        assert (taken(answer), answer.response, len(attempts)) == ("fell_back", "No answer.", 2)
    else:
        assert (taken(answer), answer.response) == ("passed", attempts[-1]["response"])
    assert all(reasons(answer).values())
    purposes = [c.purpose for c in calls(answer)]
    assert purposes == ["answer", "judge", "validation", "judge"][: 2 * len(attempts)]


def test_a_classify_step_routes_on_the_models_answers_or_says_why_not(
    worker: Any, runs_settled: None, owner: Any, smol: None
) -> None:
    routes = [
        {"name": "question", "instructions": "Select when the text asks a question."},
        {"name": "complaint", "instructions": "Select when the sender is unhappy."},
    ]
    failed = {"type": "classification_failed", "operator": "equals", "value": True}
    question = {"type": "route_selected", "operator": "includes", "value": "question"}
    recipe = publish(
        owner,
        "routed",
        [
            {
                "key": "route",
                "name": "Route",
                "kind": "classify",
                "actor": "judge",
                "prompt": "{question}",
                "routes": routes,
                "branches": [
                    branch("unreadable", 1, failed, "@end", action="END_RECIPE"),
                    branch("asked", 2, question, "@complete"),
                    branch("other", 3, DEFAULT, "@complete"),
                ],
            }
        ],
    )

    done = finished(owner, recipe)

    assert done.status in FINISHED, done.error
    route = steps(done)["route"]
    assert taken(route) in ("unreadable", "asked", "other")
    assert all(reasons(route).values())
    if taken(route) == "unreadable":
        assert route.status == "failed" and route.error.startswith("classification failed: ")
    else:
        assert route.status == "succeeded"
        assert ("question" in route.details["selected"]) == (taken(route) == "asked")
    classified = calls(route)
    assert classified and {c.purpose for c in classified} == {"classification"}
    assert all(c.tokens_estimated is False and c.tokens_in for c in classified)

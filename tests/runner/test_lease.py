"""The lease keeper's renewal: which of a process's leases are still its own."""

from __future__ import annotations

import time
from typing import Any

import pytest

from runner import lease, services, store
from runner.models import Run
from tests.factories import ActorFactory, chain_document
from tests.runner.recipes import publish_document


@pytest.fixture
def runs(owner: Any) -> list[Run]:
    ActorFactory(name="writer-model")
    recipe = publish_document(
        owner, chain_document(slug="leased", actor="writer-model", steps=1, branches=[])
    )
    started = [
        services.run_start(user=owner, recipe=recipe, inputs={"topic": f"t{i}"}) for i in range(3)
    ]
    for i, run in enumerate(started):
        Run.objects.filter(pk=run.pk).update(lease_token=f"token-{i}")
    return started


@pytest.mark.django_db
def test_it_renews_the_leases_it_holds_and_reports_those_cancelled_or_taken_over(
    runs: list[Run],
) -> None:
    held, cancelled, taken = runs
    Run.objects.filter(pk=cancelled.pk).update(lease_token="")
    Run.objects.filter(pk=taken.pk).update(lease_token="another worker's")
    tokens = {"token-0": held.pk, "token-1": cancelled.pk, "token-2": taken.pk}

    lost = store.renew_leases(tokens)

    assert lost == {"token-1", "token-2"}
    renewed = Run.objects.values_list("pk", "lease_expires_at")
    expires = dict(renewed)
    assert expires[held.pk] is not None
    assert expires[cancelled.pk] is None and expires[taken.pk] is None


@pytest.mark.django_db
def test_it_does_not_call_a_lease_lost_whose_run_it_cannot_see(runs: list[Run]) -> None:
    # A run deleted, or not yet visible to the keeper's connection: its step's own commit
    # is fenced anyway; the keeper does not stop it on a guess.
    assert store.renew_leases({"token-0": runs[0].pk, "token-9": 10**9}) == set()


def test_the_keeper_lives_on_after_a_round_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds: list[dict[str, int]] = []

    def renew(tokens: dict[str, int]) -> set[str]:
        rounds.append(tokens)
        if len(rounds) == 1:
            raise RuntimeError("a round that fails in an unforeseen way")
        return {"token-0"}

    monkeypatch.setattr(lease, "CHECK_EVERY_S", 0.02)
    monkeypatch.setattr(store, "renew_leases", renew)
    keeper = lease.LeaseKeeper()
    with keeper.holding(1, "token-0"):
        deadline = time.monotonic() + 5
        while len(rounds) < 3:
            assert time.monotonic() < deadline, rounds
            time.sleep(0.01)
        # The round after the failure found the lease lost: the step is told to stop.
        with pytest.raises(lease.StepAbandoned):
            keeper.check("token-0")
    keeper.check("token-0")  # let go with its block

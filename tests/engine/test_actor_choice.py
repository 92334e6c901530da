from __future__ import annotations

import pytest

from workflows.engine import ActorStats, choose_actor


@pytest.mark.parametrize(
    ("stats", "exclude", "chosen"),
    [
        ([ActorStats("lucky", 1, 1, 10.0), ActorStats("steady", 45, 50, 900.0)], "", "steady"),
        ([ActorStats("a", 9, 10, 500.0), ActorStats("b", 9, 10, 200.0)], "", "b"),
        ([ActorStats("b", 9, 10, 200.0), ActorStats("a", 9, 10, 200.0)], "", "a"),
        ([ActorStats("a", 9, 10, None), ActorStats("b", 9, 10, 900.0)], "", "b"),
        ([ActorStats("best", 50, 50, 1.0), ActorStats("next", 5, 10, 1.0)], "best", "next"),
        ([ActorStats("new"), ActorStats("bad", 1, 10, 5.0)], "", "new"),
        ([ActorStats("only", 3, 3)], "only", None),
        ([], "x", None),
        ([ActorStats("a", 1, 10), ActorStats("b", 5, 10), ActorStats("a", 9, 10)], "", "a"),
    ],
)
def test_it_chooses_the_best_smoothed_success_rate_then_latency_then_name(
    stats: list[ActorStats], exclude: str, chosen: str | None
) -> None:
    assert choose_actor(stats, exclude=exclude) == chosen


def test_a_single_success_does_not_outrank_a_long_good_record() -> None:
    assert ActorStats("lucky", 1, 1).success_rate < ActorStats("steady", 45, 50).success_rate
    assert ActorStats("new").success_rate == 0.5

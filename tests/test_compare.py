"""``make compare``'s choices: the tuned setting is the soonest to the target (else the best
validation score), and each link's verdict names the fastest, the runner-up and who missed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import compare  # noqa: E402


def test_tuning_keeps_the_setting_soonest_to_the_target_else_the_best_validation_score() -> None:
    runs = [({"s_to_target": 3.0, "best_val": 0.80}, ["train.lr=0.01"]),
            ({"s_to_target": 1.5, "best_val": 0.76}, ["train.lr=0.02"]),
            ({"s_to_target": None, "best_val": 0.74}, ["train.lr=0.005"])]
    assert compare.choose(runs) == ["train.lr=0.02"]
    assert compare.choose([({"s_to_target": None, "best_val": 0.7}, ["a"]),
                           ({"s_to_target": None, "best_val": 0.72}, ["b"])]) == ["b"]


def test_every_strategy_has_a_grid_and_the_verdict_ranks_by_time_to_target() -> None:
    for strategy in compare.STRATEGIES:
        assert compare.knobs(strategy, "small") and compare.knobs(strategy, "paper")
        assert compare.family(strategy) in ("graph-parallel", "data-parallel", "gnnpipe", "minibatch")
    rows = [{"strategy": "vanilla", "s_to_target": 2.0, "reached": "3/3", "runs": 3},
            {"strategy": "bns", "s_to_target": 1.0, "reached": "2/3", "runs": 3},
            {"strategy": "lo", "s_to_target": None, "reached": "0/3", "runs": 3}]
    assert compare.verdict(rows) == ("fastest to the target: bns (1.00 s), 2.00x ahead of vanilla; slowest that "
                                     "reached it: vanilla (2.00 s); reached by some seeds only: bns (2/3); "
                                     "never reached: lo")
    rows[1]["s_to_target_ci95"] = 1.5
    assert "2.00x ahead of vanilla (their 95% intervals overlap)" in compare.verdict(rows)

"""``make compare``'s choices: the tuned setting is the soonest to the target (else the best
validation score), each link's verdict names the fastest, the runner-up and who missed, and a
speed-up over vanilla pairs the rounds by seed."""

from __future__ import annotations

from pathlib import Path

from gnntrain.repro import compare


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
        assert compare.family(strategy) in ("graph-parallel", "data-parallel", "gnnpipe", "minibatch", "tensor-parallel")
    rows = [{"strategy": "vanilla", "s_to_target": 2.0, "reached": "3/3", "runs": 3},
            {"strategy": "bns", "s_to_target": 1.0, "reached": "2/3", "runs": 3},
            {"strategy": "lo", "s_to_target": None, "reached": "0/3", "runs": 3}]
    assert compare.verdict(rows) == ("fastest to the target: bns (1.00 s), 2.00x ahead of vanilla; slowest that "
                                     "reached it: vanilla (2.00 s); reached by some seeds only: bns (2/3); "
                                     "never reached: lo")
    rows[1]["s_to_target_ci95"] = 1.5
    assert "2.00x ahead of vanilla (their 95% intervals overlap)" in compare.verdict(rows)


def test_the_speedup_over_vanilla_pairs_rounds_by_seed_where_both_reached_the_target() -> None:
    vanilla = [{"run": f"v{seed}", "clock": "wall", "seed": seed, "s_to_target": s}
               for seed, s in ((0, 4.0), (1, 6.0), (2, None))]
    method = [{"run": f"m{seed}", "clock": "wall", "seed": seed, "s_to_target": s} for seed, s in ((1, 2.0), (0, 1.0), (2, 1.0))]
    ratio = compare.time_ratio(vanilla, method)
    assert sorted(ratio.values) == [3.0, 4.0], "seed 2 pairs nothing: vanilla did not reach the target there"
    assert str(ratio).startswith("3.50x [")
    assert str(compare.time_ratio(vanilla[:1], method)) == "4.00x (1 round)"
    assert compare.time_ratio(vanilla[2:], method) is None
    row = {"strategy": "bns", "family": "graph-parallel", "link": "fast", "network": "ib100", "clock": "virtual",
           "s_to_target": 1.3, "epochs_to_target": 20.0, "reached": "3/3", "runs": 3, "test_at_best_val": 0.8,
           "epoch_ms": 9.0, "MiB_per_epoch": 1.0, "peak_mem_mb": 300.0, "setting": "strategy.p=0.1", "x_vanilla": ratio}
    text = compare.table([row, {**row, "strategy": "lo", "x_vanilla": None}], compare.Plan("small", Path(".")),
                         [row])
    assert "| bns | graph-parallel | 1.30 | 3.50x [" in text and "| lo | graph-parallel | 1.30 | - |" in text


def test_the_table_names_the_graph_and_the_clock_its_final_runs_ran_on(monkeypatch, tmp_path) -> None:
    timed = {"dataset": "cora", "model": "gcn", "workers": 2, "device": "cpu", "network": "ib100",
             "clock": "virtual", "s_to_target": 1.0, "epochs_to_target": 10.0, "test_at_best_val": 0.8,
             "epoch_ms": 9.0, "MiB_per_epoch": 1.0, "peak_mem_mb": 300.0}
    monkeypatch.setattr(compare, "runs_and_rows", lambda plan, sweep: ([], [{**timed, "seed": sweep.name[-1]}]))
    plan = compare.Plan("small", tmp_path)
    group, rows, _ = compare.final(plan, "vanilla", ["train.lr=0.02"], "fast")
    text = compare.table([{**group, "lr_tried": "0.005-0.04 (5)", "x_vanilla": None}], plan, rows)
    assert "training seconds on the virtual clock" in text
    assert "3 run(s); dataset: cora; model: gcn; workers: 2; device: cpu; network: ib100; clock: virtual" in text


def test_a_choice_on_the_grids_edge_extends_the_grid_until_it_lies_inside(monkeypatch, tmp_path) -> None:
    """The fastest rate on the grid's upper edge tries twice it, again while the new rate wins, and stops once the choice lies inside; a grid still on an edge after the most
    steps says so."""
    assert compare.beyond_edge([0.005, 0.01, 0.02], 0.02, 2.0) == 0.04
    assert compare.beyond_edge([0.005, 0.01, 0.02], 0.005, 2.0) == 0.0025
    assert compare.beyond_edge([0.005, 0.01, 0.02], 0.01, 2.0) is None
    best = 0.05  # time to the target falls with the rate up to here, then rises

    def rows(plan, sweep):
        lr_values = next(o for o in sweep.overrides if o.startswith("train.lr=")).split("=")[1].split(",")
        runs = [type("R", (), {"config": {"train.lr": float(lr)}})() for lr in lr_values]
        return runs, [{"s_to_target": abs(float(lr) - best) + 1.0, "best_val": 0.8, "network": "ib100"}
                      for lr in lr_values]

    monkeypatch.setattr(compare, "run_sweep", lambda plan, sweep: None)
    monkeypatch.setattr(compare, "runs_and_rows", rows)
    tuned = compare.tune(compare.Plan("small", tmp_path), "vanilla", "fast")
    assert compare.learning_rate(tuned.setting) == 0.04 and not tuned.on_edge
    assert max(tuned.rates) == 0.08, "0.04 won, so 0.08 was tried; it lost, so the search stopped"
    best = 100.0
    tuned = compare.tune(compare.Plan("small", tmp_path), "vanilla", "fast")
    assert tuned.on_edge and len(tuned.rates) == compare.TUNING_BUDGET + compare.EDGE_STEPS


def test_a_sweep_counts_as_complete_only_with_runs_of_its_own_overrides(tmp_path) -> None:
    """A final run at the setting an earlier tuning chose does not stand in for one at the new setting."""
    job = tmp_path / "runs" / "0"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- strategy=vanilla\n- train.lr=0.02\n- seed=0\n")
    (job / "summary.json").write_text('{"status": "completed"}')
    assert compare.complete(tmp_path / "runs", [["strategy=vanilla", "seed=0", "train.lr=0.02"]])
    assert not compare.complete(tmp_path / "runs", [["strategy=vanilla", "train.lr=0.04", "seed=0"]])

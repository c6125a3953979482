"""``gnntrain-report``: the table's cells are the runs' own figures, for a multirun of mixed
strategies and seeds and for a single run; time to a target agrees with the runs' metrics and
is grouped over seeds; bad paths and targets get one line."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gnntrain import report

TINY = ["dataset.num_nodes=400", "train.epochs=6", "train.warmup_epochs=1"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    env = {**os.environ, "WANDB_MODE": "disabled"}
    subprocess.run([sys.executable, "-m", "gnntrain.cli", "-m", "strategy=vanilla,pipegcn", "seed=0,1", *TINY,
                    f"hydra.sweep.dir={root}"], check=True, env=env, capture_output=True)
    return root


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_table_cells_are_the_runs_summaries(sweep: Path) -> None:
    report.report(sweep)
    rows = read_csv(sweep / "report.csv")
    assert [row["run"] for row in rows] == ["0", "1", "2", "3"]
    assert [row["strategy.name"] for row in rows] == ["vanilla", "vanilla", "pipegcn", "pipegcn"], \
        "the swept keys are columns"
    assert [row["seed"] for row in rows] == ["0", "1", "0", "1"]
    for row in rows:
        summary = json.loads((sweep / row["run"] / "summary.json").read_text())
        assert float(row["epoch_ms"]) == pytest.approx(summary["mean_epoch_time"] * 1e3)
        assert float(row["comm_exposed_ms"]) == pytest.approx(summary["mean_comm_time"] * 1e3)
        assert float(row["MB_per_epoch"]) == pytest.approx(summary["mean_comm_bytes_per_epoch"] / 2**20)
        assert float(row["MB_halo_fwd"]) == pytest.approx(summary["mean_comm_bytes_by_kind"]["halo_fwd"] / 2**20)
        assert float(row["test_at_best_val"]) == pytest.approx(summary["test_at_best_val"])
        assert summary["mean_strategy_metrics"]["projected_rows"] > 0
        assert float(row["projected_rows"]) == pytest.approx(summary["mean_strategy_metrics"]["projected_rows"])
        assert row["network"] == "none"
    text = (sweep / "report.md").read_text()
    assert "| run |" in text and "pipegcn" in text
    assert (sweep / "curves.png").stat().st_size > 0


def first_reach(run_dir: Path, target: float) -> tuple[int, float] | None:
    """Epoch and training seconds to ``target``, read straight from ``metrics.jsonl``."""
    seconds = 0.0
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        seconds += record["epoch_time"]
        if record["val_acc"] is not None and record["val_acc"] >= target:
            return record["epoch"], seconds
    return None


def test_time_to_target_agrees_with_the_metrics_and_is_grouped_over_seeds(sweep: Path, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture) -> None:
    """The issue's check: 2 seeds x 2 strategies, ``--target``: per run the epochs and seconds to the
    target as metrics.jsonl has them (or "not reached"); per strategy the mean and the 95%
    t-interval of the seeds' figures."""
    vals = sorted(json.loads(line)["val_acc"] for run in "0123"
                  for line in (sweep / run / "metrics.jsonl").read_text().splitlines())
    target = vals[len(vals) // 2]
    report.main([str(sweep), "--out", str(tmp_path), "--target", str(target)])
    printed = capsys.readouterr().out
    rows = read_csv(tmp_path / "report.csv")
    reached = {}
    for row in rows:
        expected = first_reach(sweep / row["run"], target)
        reached[row["run"]] = expected
        if expected is None:
            assert row["epochs_to_target"] == row["s_to_target"] == ""
        else:
            assert int(row["epochs_to_target"]) == expected[0]
            assert float(row["s_to_target"]) == pytest.approx(expected[1])
    assert any(reached.values())
    groups = read_csv(tmp_path / "groups.csv")
    assert [g["strategy.name"] for g in groups] == ["vanilla", "pipegcn"] and "seed" not in groups[0]
    for group, runs in zip(groups, (["0", "1"], ["2", "3"])):
        times = [reached[r][1] for r in runs if reached[r]]
        assert group["reached"] == f"{len(times)}/2" and group["seeds"] == "0 1"
        tests = [json.loads((sweep / r / "summary.json").read_text())["test_at_best_val"] for r in runs]
        mean, half = report.interval(tests)
        assert float(group["test_at_best_val"]) == pytest.approx(mean)
        assert float(group["test_at_best_val_ci95"]) == pytest.approx(12.706 * abs(tests[0] - tests[1]) / 2, rel=1e-3)
        if times:
            assert float(group["s_to_target"]) == pytest.approx(sum(times) / len(times))
    assert "not reached" in printed or all(reached.values())
    assert "95% t-interval" in printed and (tmp_path / "accuracy_vs_time.png").stat().st_size > 0


def test_a_relative_target_is_a_share_of_the_best_runs_best_score(sweep: Path, tmp_path: Path) -> None:
    report.report(sweep, tmp_path, "90%")
    best = max(json.loads((sweep / r / "summary.json").read_text())["best_val"] for r in "0123")
    assert f"validation score {0.9 * best:.4g} (90% of the best run's)" in (tmp_path / "report.md").read_text()
    rows = read_csv(tmp_path / "report.csv")
    assert all(int(row["epochs_to_target"]) == first_reach(sweep / row["run"], 0.9 * best)[0] for row in rows
               if row["epochs_to_target"])


def test_a_single_run_reports_itself(sweep: Path, tmp_path: Path) -> None:
    report.report(sweep / "0", tmp_path)
    rows = read_csv(tmp_path / "report.csv")
    assert len(rows) == 1 and rows[0]["strategy"] == "vanilla"


@pytest.mark.parametrize("make_path, message", [
    (lambda tmp: tmp / "missing", "no such directory"),
    (lambda tmp: tmp, "no runs under"),
])
def test_bad_paths_get_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, make_path, message: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        report.main([str(make_path(tmp_path))])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err


@pytest.mark.parametrize("target", ["1.5", "abc", "0%", "120%"])
def test_bad_targets_get_one_line(sweep: Path, capsys: pytest.CaptureFixture, target: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        report.main([str(sweep), "--target", target])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--target {target} is invalid" in err


"""``gnntrain-report``: the table's cells are the runs' own figures, for a multirun of mixed
strategies and for a single run; bad paths get one line."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gnntrain import report

TINY = ["dataset.num_nodes=400", "train.epochs=3", "train.warmup_epochs=1"]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    env = {**os.environ, "WANDB_MODE": "disabled"}
    subprocess.run([sys.executable, "-m", "gnntrain.cli", "-m", "strategy=vanilla,pipegcn", *TINY,
                    f"hydra.sweep.dir={root}"], check=True, env=env, capture_output=True)
    return root


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_table_cells_are_the_runs_summaries(sweep: Path) -> None:
    report.report(sweep)
    rows = read_csv(sweep / "report.csv")
    assert [row["run"] for row in rows] == ["0", "1"]
    assert [row["strategy.name"] for row in rows] == ["vanilla", "pipegcn"], "the swept key is a column"
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

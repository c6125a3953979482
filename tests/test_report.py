"""``gnntrain-report``: the table's cells are the runs' own figures, for a multirun of mixed
strategies and seeds and for a single run; a run's setting is one column of the keys that tell it
apart, interpolations resolved; a mixed sweep's table stays narrow and its plots' legends sit
outside the panels; time to target agrees with the runs' metrics, from the start and from the end
of epoch 1, and is grouped over seeds, with a warning where too few seeds back an interval; bad
paths and targets, and an unwritable ``--out``, get one line; a damaged run is left out in one
line and the others are reported."""

from __future__ import annotations

import math
import csv
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gnntrain import report
from gnntrain.engine.summary import RunSummary
from gnntrain.report.runs import Run, load_run, resolved_config
from gnntrain.report.stats import interval

TINY = ["dataset.num_nodes=400", "train.epochs=6", "train.warmup_epochs=1"]


def _sweep(root: Path, *overrides: str) -> None:
    env = {**os.environ, "WANDB_MODE": "disabled"}
    subprocess.run([sys.executable, "-m", "gnntrain.commands.train", "-m", *overrides, f"hydra.sweep.dir={root}"],
                   check=True, env=env, capture_output=True)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    _sweep(root, "strategy=vanilla,pipegcn", "seed=0,1", *TINY)
    return root


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def named(cell: str) -> dict[str, float]:
    """A ``name=value ...`` cell (``MiB_by_kind``, ``strategy_metrics``) as a dict."""
    return {name: float(value) for name, value in (pair.split("=") for pair in cell.split())}


def markdown_headers(text: str) -> list[list[str]]:
    """The header cells of each markdown table in ``text``."""
    lines = text.splitlines()
    return [line.strip("|").split("|") for line, below in zip(lines, lines[1:])
            if line.startswith("|") and below.startswith("|---")]


def test_table_cells_are_the_runs_summaries(sweep: Path) -> None:
    report.report(sweep)
    rows = read_csv(sweep / "report.csv")
    assert [row["run"] for row in rows] == ["0", "1", "2", "3"]
    assert [row["setting"] for row in rows] == ["strategy.name=vanilla"] * 2 + ["strategy.name=pipegcn"] * 2, \
        "the swept strategy is the setting; pipegcn's own keys and strategy.seed=${seed} follow from it and the seed"
    assert [row["seed"] for row in rows] == ["0", "1", "0", "1"]
    for row in rows:
        summary = RunSummary.read(sweep / row["run"])
        assert float(row["epoch_ms"]) == pytest.approx(summary.mean_epoch_time * 1e3)
        assert float(row["comm_share"]) == pytest.approx(summary.mean_comm_time / summary.mean_epoch_time)
        split = named(row["comm_split_ms"] or "")
        exposed = sum(split.get(part, 0.0) for part in ("wait", "transfer"))
        assert exposed == pytest.approx(summary.mean_comm_time * 1e3, rel=1e-3, abs=1e-3)
        assert float(row["MiB_per_epoch"]) == pytest.approx(summary.mean_comm_bytes_per_epoch / 2**20)
        by_kind = named(row["MiB_by_kind"])
        assert by_kind["halo_fwd"] == pytest.approx(summary.mean_comm_bytes_by_kind["halo_fwd"] / 2**20, rel=1e-3)
        assert set(by_kind) == {k for k, b in summary.mean_comm_bytes_by_kind.items() if b}
        assert float(row["test_at_best_val"]) == pytest.approx(summary.test_at_best_val)
        assert float(row["peak_mem_mb"]) == pytest.approx(summary.peak_mem_mb)
        metrics = summary.mean_strategy_metrics
        assert metrics["saved_for_backward_mb"] > 0
        assert float(row["saved_for_backward_mb"]) == pytest.approx(metrics["saved_for_backward_mb"])
        assert metrics["projected_rows"] > 0
        assert named(row["strategy_metrics"])["projected_rows"] == pytest.approx(metrics["projected_rows"], rel=1e-3)
        assert row["link_busy_ms"] == "", "no modelled link: nothing was busy"
    text = (sweep / "report.md").read_text()
    assert "4 run(s); dataset: synthetic; model: gcn; workers: 2; device: cpu; network: none" in text
    assert "| run | setting | seed | strategy |" in text and "link_busy_ms" not in text, \
        "a column no run has a figure for is left out of the markdown"
    assert (sweep / "curves.png").stat().st_size > 0


def test_the_links_busy_time_is_reported_under_a_modelled_link(sweep: Path) -> None:
    summary = RunSummary.read(sweep / "0")
    assert report.figures(summary)["link_busy_ms"] is None
    modelled = replace(summary, mean_link_busy_time=0.0025,
                       network={"modelled": True, "preset": "eth10g", "bandwidth_gbps": 10.0, "latency_us": 20.0})
    assert report.figures(modelled)["link_busy_ms"] == pytest.approx(2.5)
    written_before = replace(modelled, network={**modelled.network, "emulated": True})
    del written_before.network["modelled"]
    assert report.figures(written_before)["link_busy_ms"] == pytest.approx(2.5), "a summary of the emulator's days"


def test_interpolations_read_as_their_values(sweep: Path, tmp_path: Path) -> None:
    run = load_run(sweep / "3")
    assert run.config["strategy.seed"] == run.config["seed"] == 1 and "strategy.seed" in run.interpolated
    (tmp_path / "config.yaml").write_text("seed: 4\na: ${seed}\nb: ${hydra:job.name}\nc: ${oc.env:GNNTRAIN_NO_SUCH}\n"
                                          "d: [{w: '${a}'}]\n")
    config, interpolated = resolved_config(tmp_path / "config.yaml")
    assert config == {"seed": 4, "a": 4, "b": "${hydra:job.name}", "c": "${oc.env:GNNTRAIN_NO_SUCH}", "d": [{"w": 4}]}
    assert interpolated == {"a", "b", "c", "d"}
    report.report(sweep, tmp_path / "out", "0.5")
    for name in ("report.md", "report.csv", "groups.csv"):
        assert "${" not in (tmp_path / "out" / name).read_text(), name


def _run(name: str, **keys) -> Run:
    return Run(Path(name), RunSummary(), {"seed": 0, "train.lr": 0.01, **keys})


def test_the_setting_is_the_keys_that_tell_runs_apart() -> None:
    """Group choices first; a strategy's own keys and defaults follow from its name; a knob is
    kept where it differs within a choice (the plugin's ``clip``) or is set in every run (a tuned
    ``train.lr``); an interpolation follows from what it names."""
    runs = [_run("v", **{"strategy.name": "vanilla"}),
            _run("a", **{"strategy.name": "adaqp", "strategy.bits": 8, "strategy.seed": 0}),
            _run("p", **{"strategy.name": "pipegcn", "strategy.bits": 32, "strategy.seed": 0}),
            _run("i1", **{"strategy.name": "int8_halo", "strategy.clip": 0.5}),
            _run("i2", **{"strategy.name": "int8_halo", "strategy.clip": 1.0}),
            _run("t", **{"strategy.name": "vanilla", "train.lr": 0.1, "model.name": "sage"}),
            _run("s", **{"strategy.name": "vanilla", "seed": 1})]
    for run in runs:
        run.interpolated = frozenset({"strategy.seed"})
    keys = report.setting_keys(runs)
    assert keys == ["model.name", "strategy.name", "strategy.clip", "train.lr"]
    texts = [report.setting_text(report.setting_of(run, keys)) for run in runs]
    assert texts[3] == "strategy.name=int8_halo strategy.clip=0.5 train.lr=0.01" and texts[0] == texts[6]
    assert texts[5] == "model.name=sage strategy.name=vanilla train.lr=0.1"
    assert report.short_label(report.setting_of(runs[3], keys)) == "int8_halo clip=0.5 lr=0.01"
    assert report.setting_keys(runs[:1]) == [] and report.setting_text({}) is None


def _legends(monkeypatch: pytest.MonkeyPatch) -> list:
    """The figures the report draws, kept open (matplotlib's close replaced) for their legends."""
    import matplotlib.pyplot as plt

    drawn: list = []
    monkeypatch.setattr(plt, "close", drawn.append)
    return drawn


def test_a_mixed_sweep_reads_in_one_narrow_table(plugin_sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's acceptance check: vanilla, AdaQP and a plugin strategy at two values of its
    knob (one sweep), with a target: at most 20 columns, one setting column, legends outside the
    panels."""
    drawn = _legends(monkeypatch)
    report.report(plugin_sweep, tmp_path, "0.3")
    printed = capsys.readouterr().out
    rows = read_csv(tmp_path / "report.csv")
    assert len(rows[0]) <= 20 and all(len(header) <= 20 for header in markdown_headers(printed))
    assert [row["setting"] for row in rows] == [
        "strategy.name=vanilla", "strategy.name=adaqp",
        "strategy.name=int8_halo strategy.clip=0.5", "strategy.name=int8_halo strategy.clip=1.0"]
    assert [g["setting"] for g in read_csv(tmp_path / "groups.csv")] == [row["setting"] for row in rows]
    curves, accuracy = drawn
    assert [t.get_text() for t in curves.legends[0].get_texts()] == [
        "vanilla", "adaqp", "int8_halo clip=0.5", "int8_halo clip=1.0"]
    assert [t.get_text() for t in accuracy.legends[0].get_texts()][-1] == "target 0.3"
    for figure in drawn:
        figure.canvas.draw()
        legend = figure.legends[0].get_window_extent()
        assert all(not legend.overlaps(ax.get_window_extent()) for ax in figure.axes), "the legend covers a panel"
        corners = ((legend.x0 + 1, legend.y0 + 1), (legend.x1 - 1, legend.y1 - 1))
        assert all(figure.bbox.contains(x, y) for x, y in corners), "the legend is cut off"


def first_reach(run_dir: Path, target: float) -> tuple[int, float, float] | None:
    """Epoch and training seconds to ``target``, from the start and from the end of epoch 1,
    read straight from ``metrics.jsonl``."""
    seconds, first = 0.0, None
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        seconds += record["epoch_time"]
        first = first if first is not None else record["epoch_time"]
        if record["val_acc"] is not None and record["val_acc"] >= target:
            return record["epoch"], seconds, seconds - first
    return None


def test_time_to_target_agrees_with_the_metrics_and_is_grouped_over_seeds(sweep: Path, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture) -> None:
    """The issue's check: 2 seeds x 2 strategies, ``--target``: per run the epochs and seconds to the
    target as metrics.jsonl has them, from the start and past epoch 1 (or "not reached"); per
    strategy the mean and the 95% t-interval of the seeds' figures, and a warning that 2 seeds are few."""
    vals = sorted(json.loads(line)["val_acc"] for run in "0123"
                  for line in (sweep / run / "metrics.jsonl").read_text().splitlines())
    target = vals[len(vals) // 2]
    report.main([str(sweep), "--out", str(tmp_path), "--target", str(target)])
    printed = capsys.readouterr()
    rows = read_csv(tmp_path / "report.csv")
    reached = {}
    for row in rows:
        expected = first_reach(sweep / row["run"], target)
        reached[row["run"]] = expected
        if expected is None:
            assert row["epochs_to_target"] == row["s_to_target"] == row["s_to_target_after_epoch1"] == ""
        else:
            assert int(row["epochs_to_target"]) == expected[0]
            assert float(row["s_to_target"]) == pytest.approx(expected[1])
            assert float(row["s_to_target_after_epoch1"]) == pytest.approx(expected[2])
    assert any(reached.values())
    groups = read_csv(tmp_path / "groups.csv")
    assert [g["setting"] for g in groups] == ["strategy.name=vanilla", "strategy.name=pipegcn"]
    assert "seed" not in groups[0]
    for group, runs in zip(groups, (["0", "1"], ["2", "3"])):
        times = [reached[r] for r in runs if reached[r]]
        assert group["reached"] == f"{len(times)}/2" and group["seeds"] == "0 1"
        tests = [RunSummary.read(sweep / r).test_at_best_val for r in runs]
        mean, half = interval(tests)
        assert float(group["test_at_best_val"]) == pytest.approx(mean)
        assert float(group["test_at_best_val_ci95"]) == pytest.approx(12.706 * abs(tests[0] - tests[1]) / 2, rel=1e-3)
        if times:
            assert float(group["s_to_target"]) == pytest.approx(sum(t[1] for t in times) / len(times))
            assert float(group["s_to_target_after_epoch1"]) == pytest.approx(sum(t[2] for t in times) / len(times))
        assert float(group["saved_for_backward_mb"]) > 0
    assert "not reached" in (tmp_path / "report.md").read_text() or all(reached.values())
    assert "95% t-interval" in printed.out and (tmp_path / "accuracy_vs_time.png").stat().st_size > 0
    warning = printed.err.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("gnntrain: warning: ") and "fewer than 3 seeds" in warning[0]
    assert "run 3 or more seeds" in warning[0]


def test_three_seeds_or_one_get_no_warning(capsys: pytest.CaptureFixture) -> None:
    report.warn_few_seeds([{"setting": "strategy.name=vanilla", "runs": 3}, {"setting": None, "runs": 1}])
    assert capsys.readouterr().err == ""
    report.warn_few_seeds([{"setting": "strategy.name=vanilla", "runs": 3}, {"setting": None, "runs": 2}])
    assert "1 of 2 setting(s)" in capsys.readouterr().err


def test_a_relative_target_is_a_share_of_the_best_runs_best_score(sweep: Path, tmp_path: Path) -> None:
    report.report(sweep, tmp_path, "90%")
    best = max(RunSummary.read(sweep / r).best_val for r in "0123")
    assert f"validation score {0.9 * best:.4g} (90% of the best run's)" in (tmp_path / "report.md").read_text()
    rows = read_csv(tmp_path / "report.csv")
    assert all(int(row["epochs_to_target"]) == first_reach(sweep / row["run"], 0.9 * best)[0] for row in rows
               if row["epochs_to_target"])


def test_a_single_run_reports_itself(sweep: Path, tmp_path: Path) -> None:
    report.report(sweep / "0", tmp_path)
    rows = read_csv(tmp_path / "report.csv")
    assert len(rows) == 1 and rows[0]["strategy"] == "vanilla" and rows[0]["setting"] == ""
    assert not (tmp_path / "groups.csv").exists()


def test_the_columns_are_documented(sweep: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Every column of both tables, and only those, is in ``gnntrain-report --help``."""
    report.report(sweep, tmp_path, "0.5")
    assert list(read_csv(tmp_path / "report.csv")[0]) == list(report.RUN_COLUMNS)
    groups = list(read_csv(tmp_path / "groups.csv")[0])
    assert {c.removesuffix("_ci95") for c in groups} == set(report.GROUP_COLUMNS) - {"<figure>_ci95"}
    with pytest.raises(SystemExit):
        report.main(["--help"])
    shown = capsys.readouterr().out
    assert all(f"  {name}: " in shown for name in [*report.RUN_COLUMNS, *report.GROUP_COLUMNS])


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


@pytest.mark.parametrize("damage, line", [
    (lambda run: (run / "summary.json").write_text("{}"), "summary.json lacks status, strategy, model"),
    (lambda run: (run / "summary.json").write_text("[1, "), "cannot read "),
    (lambda run: (run / ".hydra" / "config.yaml").write_text("a: [1, 2\nb: {"), "cannot read "),
    (lambda run: run.symlink_to(run.rename(run.parent.parent / "elsewhere"), target_is_directory=True),
     "a link to a folder ("),
])
def test_a_damaged_run_is_left_out_in_one_line_and_the_others_reported(sweep: Path, tmp_path: Path, capsys,
                                                                       damage, line: str) -> None:
    import shutil

    copy = tmp_path / "sweep"
    shutil.copytree(sweep, copy)
    damage(copy / "0")
    report.main([str(copy), "--out", str(tmp_path / "out")])
    notices = [n for n in capsys.readouterr().err.strip().splitlines() if "left out 0: " in n]
    assert len(notices) == 1 and line in notices[0]
    assert len(read_csv(tmp_path / "out" / "report.csv")) == len(list(sweep.glob("*/summary.json"))) - 1


def test_an_unwritable_out_gets_one_line(sweep: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as exit_info:
        report.main([str(sweep), "--out", str(tmp_path / "file" / "report")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"gnntrain-report: error: Not a directory: {tmp_path / 'file' / 'report'}"


def test_a_baseline_gives_each_setting_its_paired_speedup_and_a_verdict(sweep: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture) -> None:
    report.main([str(sweep), "--out", str(tmp_path), "--baseline", "strategy=vanilla"])
    printed = capsys.readouterr().out
    runs = read_csv(tmp_path / "report.csv")
    epoch = {(row["setting"], row["seed"]): float(row["epoch_ms"]) for row in runs}
    ratios = [epoch["strategy.name=vanilla", seed] / epoch["strategy.name=pipegcn", seed] for seed in ("0", "1")]
    [row] = read_csv(tmp_path / "baseline.csv")
    centre, half = interval([math.log(r) for r in ratios])
    low, high = math.exp(centre - half), math.exp(centre + half)
    assert row["setting"] == "strategy.name=pipegcn"
    assert row["epoch_time_speedup"].startswith(
        f"{sorted(ratios)[0] / 2 + sorted(ratios)[1] / 2:.2f}x [{low:.2f}, {high:.2f}]"), "on the log scale"
    assert row["epoch_time_verdict"] == ("ahead" if low > 1 else "behind" if high < 1 else "undecided")
    assert "Against the baseline `strategy=vanilla`" in printed


def test_a_baseline_that_names_no_single_setting_gets_one_line(sweep: Path, tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit):
        report.main([str(sweep), "--out", str(tmp_path), "--baseline", "strategy=adaqp"])
    assert capsys.readouterr().err.strip() == ("gnntrain-report: error: --baseline strategy=adaqp matches 0 settings; "
                                               "valid: words of exactly one of strategy.name=vanilla; "
                                               "strategy.name=pipegcn")


def test_a_log_time_axis_is_asked_for_by_its_option(sweep: Path, tmp_path: Path, monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(report, "plot_accuracy_vs_time", lambda *args: seen.append(args[-1]))
    report.main([str(sweep), "--out", str(tmp_path / "linear")])
    report.main([str(sweep), "--out", str(tmp_path / "log"), "--log-time"])
    assert seen == [False, True]


def test_the_printed_tables_fit_120_characters_and_say_what_the_files_hold_beside(sweep: Path, tmp_path: Path,
                                                                                  capsys) -> None:
    report.main([str(sweep), "--out", str(tmp_path), "--target", "0.3"])
    printed = capsys.readouterr().out
    table_lines = [line for line in printed.splitlines() if line.startswith("|")]
    assert table_lines and max(map(len, table_lines)) <= report.CONSOLE_WIDTH
    written = [line for line in (tmp_path / "report.md").read_text().splitlines() if line.startswith("|")]
    assert max(map(len, written)) > report.CONSOLE_WIDTH and "more columns in report.md and the CSV" in printed

"""``gnntrain-report <dir> [--target X]``: one table (markdown and CSV) and plots for any set of runs.

``<dir>`` is a run directory (it holds ``summary.json``) or any directory above run
directories, e.g. a Hydra multirun directory; every run below it is read. Only
``summary.json``, ``metrics.jsonl`` and Hydra's ``.hydra/config.yaml`` are read, so runs copied
back from a cluster work the same. The table has one row per run: the config keys whose values
differ between the runs, then the run's summary figures (epoch time, exposed and total
communication, rows through the model's dense maps per epoch, bytes per kind, best validation
and test scores, the network it ran under).

Time to accuracy (``--target``: a validation score such as ``0.7``, or ``95%``: that fraction of
the best validation score any run reached): per run, the epochs and the training seconds to
the first evaluation at or above the target (:func:`gnntrain.engine.early_stop.time_to_target`,
the rule ``train.target`` stops by; seconds are the epochs' times, under an emulated network
the emulated time), or "not reached". Runs that differ only in ``seed`` form a group; each
group gets the mean and a 95% Student-t interval of its runs' figures (time and epochs to the
target over the runs that reached it, with how many did). ``curves.png`` plots the validation
score, loss and epoch time per epoch; ``accuracy_vs_time.png`` the validation score against
the training seconds, the target drawn across.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gnntrain.comm import network
from gnntrain.config import flatten
from gnntrain.config.keys import keys_playing, plays
from gnntrain.config.schema import PLACE
from gnntrain.data.partition import comm_volume
from gnntrain.engine.early_stop import time_to_target
from gnntrain.engine.metrics import EpochRecord, read_records
from gnntrain.errors import GnntrainError, warn

IGNORED_KEYS = keys_playing(PLACE)
"""Config keys that never tell runs apart in a table: the schemas' place keys."""
SEED_KEY = "seed"
"""The key whose runs are repetitions of one setting (grouped, with mean and interval)."""


@dataclass
class Run:
    path: Path
    summary: dict
    config: dict = field(default_factory=dict)
    """The flattened config (``section.key`` -> value) Hydra saved, empty if none was."""
    records: list[EpochRecord] = field(default_factory=list)


def find_runs(root: Path) -> list[Run]:
    """Every completed run at or below ``root`` (sorted by path); the others (``status``
    running, failed or interrupted) are left out with a one-line notice; one-line errors for a
    bad path."""
    if not root.exists():
        raise GnntrainError(f"no such directory: {root}")
    if not root.is_dir():
        raise GnntrainError(f"not a directory: {root} (give a run directory or a multirun directory)")
    summaries = sorted(root.rglob("summary.json"), key=lambda p: natural_key(p.parent.relative_to(root)))
    runs = [load_run(p.parent) for p in summaries if "calibration_probe" not in p.parts]
    completed = [run for run in runs if run.summary.get("status", "completed") == "completed"]
    if len(completed) < len(runs):
        warn(f"left out {len(runs) - len(completed)} run(s) that did not complete: "
             + ", ".join(f"{run.path.relative_to(root)} ({run.summary['status']})" for run in runs
                         if run not in completed))
    if not completed:
        raise GnntrainError(f"no runs under {root}: no summary.json of a completed run found")
    return completed


def natural_key(path: Path) -> list:
    """Sort key: numbered job folders in numeric order, named folders after them."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in path.parts]


def load_run(path: Path) -> Run:
    try:
        summary = json.loads((path / "summary.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise GnntrainError(f"cannot read {path / 'summary.json'}: {exc}") from None
    config: dict = {}
    hydra_config = path / ".hydra" / "config.yaml"
    if hydra_config.exists():
        from omegaconf import OmegaConf

        config = flatten(OmegaConf.to_container(OmegaConf.load(hydra_config), resolve=False))
    return Run(path, summary, config, read_records(path / "metrics.jsonl"))


def differing_keys(runs: list[Run]) -> list[str]:
    """Config keys whose values differ between runs (a key missing from a run counts as differing)."""
    keys = sorted({k for r in runs for k in r.config if not plays(k, IGNORED_KEYS)})
    return [k for k in keys if len({json.dumps(r.config.get(k), sort_keys=True) for r in runs}) > 1]


def network_label(summary: dict) -> str:
    """The network a run ran under (runs from before the ``network`` key: the real transport)."""
    return network.label(summary.get("network") or {"emulated": False})


def figures(summary: dict) -> dict:
    """The summary figures of one run, in table units (ms, MB)."""
    ms = lambda s: None if s is None else s * 1e3  # noqa: E731
    row = {
        "strategy": summary["strategy"], "model": summary["model"], "dataset": summary["dataset"],
        "workers": summary["world_size"],
        "epoch_ms": ms(summary["mean_epoch_time"]),
        "epochs_per_s": 1 / summary["mean_epoch_time"] if summary["mean_epoch_time"] else None,
        "compute_ms": ms(summary["mean_compute_time"]),
        "comm_exposed_ms": ms(summary["mean_comm_time"]),
        "comm_total_ms": ms(summary["mean_comm_total_time"]),
        "reduce_exposed_ms": ms(summary["mean_reduce_time"]),
        "projected_rows": summary.get("mean_strategy_metrics", {}).get("projected_rows"),
        "MB_per_epoch": summary["mean_comm_bytes_per_epoch"] / 2**20,
        "edge_cut": summary["partition"]["edge_cut"],
        "comm_volume": comm_volume(summary["partition"]),
    }
    for kind, nbytes in summary.get("mean_comm_bytes_by_kind", {}).items():
        row[f"MB_{kind}"] = nbytes / 2**20
    for name, value in summary.get("mean_strategy_metrics", {}).items():
        row.setdefault(name, value)
    row.update(best_val=summary["best_val"], test_at_best_val=summary["test_at_best_val"],
               peak_mem_mb=summary["peak_mem_mb"], network=network_label(summary))
    return row


def table_rows(runs: list[Run], root: Path, target: float | None = None) -> list[dict]:
    keys = differing_keys(runs)
    rows = []
    for run in runs:
        row = {"run": str(run.path.relative_to(root))}
        row.update({k: run.config.get(k) for k in keys})
        row.update(figures(run.summary))
        if target is not None:
            reached = time_to_target(run.records, target)
            row.update(epochs_to_target=reached.epoch if reached else None,
                       s_to_target=reached.train_time if reached else None)
        rows.append(row)
    return rows


def parse_target(text: str) -> tuple[float, bool]:
    """``0.7`` -> (0.7, absolute); ``95%`` -> (0.95, a fraction of the best run's best score)."""
    relative = text.endswith("%")
    try:
        value = float(text[:-1]) / 100 if relative else float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:
        raise GnntrainError(f"--target {text} is invalid; valid: a validation score in (0, 1] such as 0.7, "
                            "or a percentage of the best run's best score in (0, 100] such as 95%")
    return value, relative


def resolve_target(text: str, runs: list[Run]) -> float:
    """The validation score ``text`` names for these runs."""
    value, relative = parse_target(text)
    if not relative:
        return value
    best = [run.summary["best_val"] for run in runs if run.summary.get("best_val") is not None]
    if not best:
        raise GnntrainError(f"--target {text} needs a best validation score, and no run under the path has one")
    return value * max(best)


GROUPED = ("epochs_to_target", "s_to_target", "best_val", "test_at_best_val", "epoch_ms", "MB_per_epoch",
           "peak_mem_mb")
"""The per-run figures a group reports as mean and interval."""


def interval(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and the half-width of its 95% Student-t interval (None with fewer than 2 values)."""
    if not values:
        return None, None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, None
    from scipy.stats import t

    return mean, float(t.ppf(0.975, len(values) - 1)) * statistics.stdev(values) / math.sqrt(len(values))


def group_rows(rows: list[dict], keys: list[str]) -> list[dict]:
    """One row per setting (the differing keys but ``seed``): runs, seeds, and per figure of
    :data:`GROUPED` the mean and 95% half-width over the runs that have it; ``reached``: how many
    runs reached the target."""
    setting = [k for k in keys if k != SEED_KEY]
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault(tuple(json.dumps(row.get(k), sort_keys=True) for k in setting), []).append(row)
    out = []
    for members in groups.values():
        group = {k: members[0].get(k) for k in setting}
        group.update(runs=len(members), seeds=" ".join(str(m.get(SEED_KEY, "-")) for m in members))
        if "s_to_target" in members[0]:
            group["reached"] = f"{sum(m['s_to_target'] is not None for m in members)}/{len(members)}"
        for name in GROUPED:
            values = [m[name] for m in members if m.get(name) is not None]
            if name in members[0]:
                group[name], group[f"{name}_ci95"] = interval(values)
        out.append(group)
    return out


def with_intervals(groups: list[dict]) -> list[dict]:
    """The groups for reading: each figure and its half-width in one cell, ``mean ± h``."""
    out = []
    for group in groups:
        row = {}
        for key, value in group.items():
            if key.endswith("_ci95"):
                continue
            half = group.get(f"{key}_ci95")
            row[key] = f"{_cell(value, key)} ± {_cell(half)}" if value is not None and half is not None else value
        out.append(row)
    return out


NOT_REACHED = {"epochs_to_target": "not reached", "s_to_target": "not reached"}


def _cell(value, column: str = "") -> str:
    if value is None:
        return NOT_REACHED.get(column, "-")
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def markdown(rows: list[dict]) -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c), c) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_csv(rows: list[dict], path: Path) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(runs: list[Run], labels: list[str], path: Path) -> None:
    """Validation score, loss and epoch time per epoch, one line per run."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for run, label in zip(runs, labels):
        evaluated = [r for r in run.records if r.val_acc is not None]
        axes[0].plot([r.epoch for r in evaluated], [r.val_acc for r in evaluated], label=label)
        axes[1].plot([r.epoch for r in run.records], [r.loss for r in run.records], label=label)
        axes[2].plot([r.epoch for r in run.records], [r.epoch_time * 1e3 for r in run.records], label=label)
    for ax, title in zip(axes, ("validation score", "training loss", "epoch time (ms)")):
        ax.set_xlabel("epoch")
        ax.set_title(title)
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_accuracy_vs_time(runs: list[Run], groups: list[str], target: float | None, path: Path,
                          log_time: bool = False) -> None:
    """Validation score against training seconds (on a log axis with ``log_time``), one line per
    run, one colour per group."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    names = list(dict.fromkeys(groups))
    palette = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    colours = {group: palette(i % palette.N) for i, group in enumerate(names)}
    labelled = set()
    for run, group in zip(runs, groups):
        seconds, points = 0.0, []
        for r in run.records:
            seconds += r.epoch_time
            if r.val_acc is not None:
                points.append((seconds, r.val_acc))
        ax.plot(*zip(*points) if points else ([], []), color=colours[group], alpha=0.8,
                label=None if group in labelled else group)
        labelled.add(group)
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.4g}")
    if log_time:
        ax.set_xscale("log")
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("validation score")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def report(root: Path, out: Path | None = None, target: str | None = None) -> Path:
    """Write ``report.md``, ``report.csv``, ``curves.png`` and ``accuracy_vs_time.png`` (and,
    where runs repeat a setting over seeds or a target is given, ``groups.csv``) for the runs
    under ``root`` into ``out`` (default: ``root``); prints the tables. Returns the markdown file."""
    runs = find_runs(root)
    score = resolve_target(target, runs) if target is not None else None
    out = out or root
    out.mkdir(parents=True, exist_ok=True)
    keys = differing_keys(runs)
    rows = table_rows(runs, root, score)
    text = markdown(rows)
    if score is not None:
        text = f"Target: validation score {score:.4g}" + (f" ({target} of the best run's)" if target.endswith("%")
                                                           else "") + "\n\n" + text
    write_csv(rows, out / "report.csv")
    written = [out / "report.md", out / "report.csv", out / "curves.png", out / "accuracy_vs_time.png"]
    if SEED_KEY in keys or score is not None:
        groups = group_rows(rows, keys)
        text += "\nRuns grouped by setting (mean, and the half-width of a 95% t-interval over seeds):\n\n" + \
            markdown(with_intervals(groups))
        write_csv(groups, out / "groups.csv")
        written.append(out / "groups.csv")
    (out / "report.md").write_text(f"# Runs under {root}\n\n{text}")
    setting = [k for k in keys if k != SEED_KEY]

    def label(row: dict, ks: list[str]) -> str:
        return ", ".join(f"{k.split('.')[-1]}={row[k]}" for k in ks if row[k] is not None) or row["run"]

    plot_curves(runs, [label(row, keys) for row in rows], out / "curves.png")
    plot_accuracy_vs_time(runs, [label(row, setting) for row in rows], score, out / "accuracy_vs_time.png")
    print(text, end="")
    print("wrote " + ", ".join(str(p) for p in written))
    return out / "report.md"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gnntrain-report", description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="a run directory or a directory of runs (e.g. a multirun dir)")
    parser.add_argument("--out", type=Path, default=None, help="where to write the report (default: the runs dir)")
    parser.add_argument("--target", default=None,
                        help="a validation score (0.7) or a percentage of the best run's best score (95%%): "
                             "epochs and seconds to first reach it per run, mean and 95%% interval per setting")
    args = parser.parse_args(argv)
    try:
        report(args.runs, args.out, args.target)
    except GnntrainError as exc:
        print(f"gnntrain-report: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

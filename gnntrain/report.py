"""``gnntrain-report <dir>``: one table (markdown and CSV) and per-epoch plots for any set of runs.

``<dir>`` is a run directory (it holds ``summary.json``) or any directory above run
directories, e.g. a Hydra multirun directory; every run below it is read. Only
``summary.json``, ``metrics.jsonl`` and Hydra's ``.hydra/config.yaml`` are read, so runs copied
back from a cluster work the same. The table has one row per run: the config keys whose values
differ between the runs, then the run's summary figures (epoch time, exposed and total
communication, rows through the model's dense maps per epoch, bytes per kind, best validation
and test scores, the network it ran under).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gnntrain.comm import network
from gnntrain.config import flatten
from gnntrain.data.partition import comm_volume
from gnntrain.errors import GnntrainError, warn

IGNORED_KEYS = ("run_dir", "wandb.", "partition.cache_dir", "dataset.root", "cluster.master_port")
"""Config keys that never tell runs apart in a table."""


@dataclass
class Run:
    path: Path
    summary: dict
    config: dict = field(default_factory=dict)
    """The flattened config (``section.key`` -> value) Hydra saved, empty if none was."""
    records: list[dict] = field(default_factory=list)


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
    metrics = path / "metrics.jsonl"
    records = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()] if metrics.exists() else []
    return Run(path, summary, config, records)


def differing_keys(runs: list[Run]) -> list[str]:
    """Config keys whose values differ between runs (a key missing from a run counts as differing)."""
    keys = sorted({k for r in runs for k in r.config if not k.startswith(IGNORED_KEYS)})
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


def table_rows(runs: list[Run], root: Path) -> list[dict]:
    keys = differing_keys(runs)
    rows = []
    for run in runs:
        row = {"run": str(run.path.relative_to(root))}
        row.update({k: run.config.get(k) for k in keys})
        row.update(figures(run.summary))
        rows.append(row)
    return rows


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def markdown(rows: list[dict]) -> str:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write_csv(rows: list[dict], path: Path) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def plot_curves(runs: list[Run], labels: list[str], path: Path) -> None:
    """Validation score, loss and epoch time per epoch, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for run, label in zip(runs, labels):
        evaluated = [r for r in run.records if r["val_acc"] is not None]
        axes[0].plot([r["epoch"] for r in evaluated], [r["val_acc"] for r in evaluated], label=label)
        axes[1].plot([r["epoch"] for r in run.records], [r["loss"] for r in run.records], label=label)
        axes[2].plot([r["epoch"] for r in run.records], [r["epoch_time"] * 1e3 for r in run.records], label=label)
    for ax, title in zip(axes, ("validation score", "training loss", "epoch time (ms)")):
        ax.set_xlabel("epoch")
        ax.set_title(title)
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(root: Path, out: Path | None = None) -> Path:
    """Write ``report.md``, ``report.csv`` and ``curves.png`` for the runs under ``root`` into
    ``out`` (default: ``root``); prints the table. Returns the markdown file."""
    runs = find_runs(root)
    out = out or root
    out.mkdir(parents=True, exist_ok=True)
    rows = table_rows(runs, root)
    text = markdown(rows)
    (out / "report.md").write_text(f"# Runs under {root}\n\n{text}")
    write_csv(rows, out / "report.csv")
    keys = differing_keys(runs)
    labels = [", ".join(f"{k.split('.')[-1]}={row[k]}" for k in keys) or row["run"] for row in rows]
    plot_curves(runs, labels, out / "curves.png")
    print(text, end="")
    print(f"wrote {out / 'report.md'}, {out / 'report.csv'}, {out / 'curves.png'}")
    return out / "report.md"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gnntrain-report", description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path, help="a run directory or a directory of runs (e.g. a multirun dir)")
    parser.add_argument("--out", type=Path, default=None, help="where to write the report (default: the runs dir)")
    args = parser.parse_args(argv)
    try:
        report(args.runs, args.out)
    except GnntrainError as exc:
        print(f"gnntrain-report: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

"""What the benchmark scripts (``scripts/bench*.py``) and the reproduction share: run a gnntrain job
(compose the config as the CLI does, launch the workers, return the run), the synthetic benchmark
graph and model, and the
sweep that runs named configurations one after another, printing each row beside the first
(the baseline) and writing the rows to a results file."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import torch

from gnntrain.job import api
from gnntrain.config.schema import RootConfig
from gnntrain.engine.summary import RunSummary
from gnntrain.report.runs import Run, load_run
from gnntrain.repro import CHECKOUT
from gnntrain.storage.files import write_atomically


def compose_config(overrides: list[str]) -> RootConfig:
    """The config the CLI composes for ``overrides`` (W&B disabled), checked and typed."""
    return api.check(api.compose([*overrides, "wandb.mode=disabled"]))


def run_job(overrides: list[str]) -> Run:
    """The job of ``overrides``, run in a temporary run dir: its summary and per-epoch records."""
    run = compose_config(overrides)
    with tempfile.TemporaryDirectory() as run_dir:
        api.run(replace(run, run_dir=run_dir))
        return load_run(Path(run_dir))


def add_bench_args(parser: argparse.ArgumentParser, layers: int = 3) -> None:
    """Options of the synthetic benchmark graph and the GraphSAGE model trained on it."""
    parser.add_argument("--nodes", type=int, default=40_000)
    parser.add_argument("--avg-degree", type=float, default=16.0)
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=layers)
    parser.add_argument("--epochs", type=int, default=8, help="timed epochs")
    parser.add_argument("--warmup", type=int, default=2, help="untimed epochs")


def bench_overrides(args: argparse.Namespace) -> list[str]:
    """Overrides for :func:`add_bench_args`'s graph and model; one evaluation, at the end."""
    epochs = args.warmup + args.epochs
    return ["dataset=synthetic", f"dataset.num_nodes={args.nodes}", f"dataset.avg_degree={args.avg_degree}",
            f"dataset.num_features={args.features}", "model=sage", f"model.hidden={args.hidden}",
            f"model.layers={args.layers}", f"train.epochs={epochs}", f"train.warmup_epochs={args.warmup}",
            f"train.eval_every={epochs}"]


def describe_bench(args: argparse.Namespace) -> str:
    return (f"synthetic graph: {args.nodes} nodes, average degree {args.avg_degree}, {args.features} features; "
            f"GraphSAGE {args.layers} x {args.hidden}")


def bench_setting(args: argparse.Namespace) -> dict:
    """The benchmark graph and model, for a results file."""
    return {"graph": {"nodes": args.nodes, "avg_degree": args.avg_degree, "features": args.features},
            "model": {"name": "sage", "layers": args.layers, "hidden": args.hidden}}


def bench_parser(doc: str, results: Path, workers: int | list[int], layers: int = 3) -> argparse.ArgumentParser:
    """The options every bench takes: the graph and model, ``--workers``, ``--out``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    add_bench_args(parser, layers)
    if isinstance(workers, list):
        parser.add_argument("--workers", nargs="+", type=int, default=workers)
    else:
        parser.add_argument("--workers", type=int, default=workers)
    parser.add_argument("--out", type=Path, default=results)
    return parser


def sweep(args: argparse.Namespace, runs: dict[str, list[str]], row_of: Callable[[str, RunSummary], dict],
          line_of: Callable[[dict, dict], str]) -> list[dict]:
    """Run each named configuration (overrides on top of the bench graph and model), one row
    each from its summary; print every row with :func:`line_of` ``(row, first row)``."""
    print(f"{describe_bench(args)}; {torch.get_num_threads()} threads in this process", flush=True)
    rows: list[dict] = []
    for name, overrides in runs.items():
        rows.append(row_of(name, run_job([*bench_overrides(args), *overrides]).summary))
        print(line_of(rows[-1], rows[0]), flush=True)
    return rows


def epoch_figures(summary: RunSummary) -> dict:
    """What every bench row reports of a run: mean epoch time, exposed ``data`` communication
    and halo bytes per epoch (both directions)."""
    by_kind = summary.mean_comm_bytes_by_kind
    return {"epoch_time_s": summary.mean_epoch_time, "exposed_comm_s": summary.mean_comm_time,
            "halo_bytes_per_epoch": by_kind.get("halo_fwd", 0) + by_kind.get("halo_bwd", 0)}


def compare_figures(row: dict, base: dict, baseline: str) -> str:
    """:func:`epoch_figures` of ``row`` in words, with speed and halo bytes relative to ``base``."""
    return (f"epoch {row['epoch_time_s'] * 1e3:7.1f} ms ({base['epoch_time_s'] / row['epoch_time_s']:.2f}x "
            f"{baseline}'s speed), exposed comm {row['exposed_comm_s'] * 1e3:6.1f} ms, halo "
            f"{row['halo_bytes_per_epoch'] / 2**20:7.2f} MiB/epoch "
            f"({row['halo_bytes_per_epoch'] / max(base['halo_bytes_per_epoch'], 1):.3f}x {baseline})")


def write_results(args: argparse.Namespace, rows: list[dict], **extra) -> None:
    """The bench setting, ``extra`` and the rows, to ``args.out``."""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out, json.dumps({**bench_setting(args), **extra, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


@dataclass
class Measured:
    """A finished process tree: exit code, wall seconds, the peak resident set of its largest
    process (MiB), and its stdout and stderr together."""

    returncode: int
    wall_s: float
    peak_mb: float
    output: str


def measured_process(command: list[str], cwd: Path) -> Measured:
    """Run ``command`` (W&B disabled) to its end, measured: ``wait4`` reports the peak RSS of the
    largest process of its tree."""
    with tempfile.TemporaryFile("w+") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, WANDB_MODE="disabled"))
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        log.seek(0)
        return Measured(os.waitstatus_to_exitcode(status), wall, usage.ru_maxrss / 1024, log.read())


def git_commit() -> str:
    """The checkout's commit, with ``+changes`` where code outside ``results/`` differs from it;
    in a copy without git's history (a lent machine's), ``GNNTRAIN_COMMIT`` as its sender names it."""
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=CHECKOUT)
    if result.returncode != 0:
        return os.environ.get("GNNTRAIN_COMMIT", "unknown")
    # the results being written are not a change to the code that produced them
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"],
                           capture_output=True, text=True, cwd=CHECKOUT).stdout.strip()
    return result.stdout.strip() + ("+changes" if dirty else "")

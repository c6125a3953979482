"""What the papers' tables share: choosing runs, timing them alike, ratios, cells and plots
(:mod:`gnntrain.repro.build` runs the sweeps; each paper's module builds its tables).

Every number is read from a run's ``summary.json`` or ``metrics.jsonl``. Throughput is epochs
per second over the steady epochs (the first ``train.warmup_epochs`` excluded); ``s`` is
the baseline's communication share as its paper defines it (``network.calibrate_traffic``):
``summary.json``'s ``comm_share`` (exposed ``data`` communication over the epoch, all-reduces
apart, mean over ranks: PipeGCN, BNS-GCN, AdaQP, HopGNN) or ``training_comm_share`` (every
training category: GNNPipe); hiding all of it could at best give ``1 / max(s, 1 - s)``.

Speed. Every speed figure compares systems over the same epochs of their runs: from the first
epoch after every run's warm-up and examination epochs (:func:`timed_from`) to the last; each
speed sweep runs three times in interleaved rounds (:mod:`gnntrain.repro.build`), and a speed-up is
given as the median of its per-round ratios with the 95% interval of their geometric mean (log scale)
(:class:`~gnntrain.report.stats.Ratio`). A target counts as met only where the whole interval is past it.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import mean, stdev
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gnntrain.report import network_label  # noqa: E402
from gnntrain.report.runs import Run, one_clock  # noqa: E402
from gnntrain.report.stats import Ratio  # noqa: E402
from gnntrain.storage.files import save_figure


def select(runs: list[Run], **conditions) -> list[Run]:
    """Runs whose config has every ``key=value`` (``__`` in a key stands for ``.``)."""
    want = {k.replace("__", "."): v for k, v in conditions.items()}
    return [r for r in runs if all(r.config.get(k) == v for k, v in want.items())]


def one(runs: list[Run], **conditions) -> Run | None:
    found = select(runs, **conditions)
    return found[0] if found else None


def timed_from(runs: list[Run]) -> int:
    """The first epoch every one of ``runs`` times: after each one's warm-up epochs and its
    examination epochs (HopGNN timing its merge counts), so that all are timed alike."""
    last = 0
    for run in runs:
        examined = [r.epoch for r in run.records if r.strategy_metrics.get("examination")]
        last = max(last, run.config.get("train.warmup_epochs", 0), *examined)
    short = [run for run in runs if not run.records or run.records[-1].epoch <= last]
    if short:
        raise ValueError(f"{short[0].path} ends at epoch {short[0].records[-1].epoch if short[0].records else 0}: a "
                         f"table times every run from epoch {last + 1} (after every run's warm-up and examination "
                         "epochs), so each needs epochs after that")
    return last + 1


def epoch_time(run: Run, start: int) -> float:
    """The run's mean epoch time from epoch ``start`` on."""
    return mean(r.epoch_time for r in run.records if r.epoch >= start)


def speedup(base: list[Run], method: list[Run], start: int, cost: Callable[[Run, int], float] = epoch_time) -> Ratio:
    """``base``'s epoch time over ``method``'s, per round (runs paired by seed), from epoch ``start``;
    runs of one clock only (:func:`gnntrain.report.runs.one_clock`)."""
    one_clock(base, method)
    by_seed = {r.config.get("seed"): r for r in base}
    return Ratio([cost(by_seed[r.config.get("seed")], start) / cost(r, start)
                  for r in method if r.config.get("seed") in by_seed])


def timing_note(runs: list[Run], start: int) -> str:
    """What a table's speed figures time, in one sentence."""
    rounds = sorted({r.config.get("seed") for r in runs})
    last = max(r.records[-1].epoch for r in runs)
    counted = f"{len(rounds)} interleaved round{'s' if len(rounds) > 1 else ''}"
    return (f"Speed: epochs {start}-{last} of every run (each run's warm-up and examination epochs fall before "
            f"them), {counted} (seeds {', '.join(str(x) for x in rounds)}); a speed-up is the median of its "
            f"per-round ratios [95% interval of their geometric mean; one spanning more than 2x is marked].")


def share_cell(runs: list[Run]) -> str:
    """The communication share ``runs`` (a baseline's rounds) reached, their mean, against the
    share their link was calibrated to (``network.calibration``): marked where more than 0.03 off."""
    reached = mean(share(r) for r in runs)
    target = ((runs[0].summary.network or {}).get("calibration") or {}).get("share")
    if target is None:
        return f"{reached:.2f}"
    return f"{reached:.2f}" + ("" if abs(reached - target) <= 0.03 else f" (**off its target {target:.2f}**)")


def share(run: Run) -> float:
    """The run's communication share as its paper defines it (module docstring): its
    ``network.calibrate_traffic``'s exposed time over the epoch."""
    summary = run.summary
    return (summary.training_comm_share if run.config.get("network.calibrate_traffic") == "training"
            else summary.comm_share)


def test_score(run: Run | None) -> float | None:
    return run.summary.test_at_best_val * 100 if run and run.summary.test_at_best_val is not None else None


def fmt(value: float | None, spec: str = ".3g", suffix: str = "") -> str:
    """``value`` as ``spec`` says, ``-`` for None; a ``g`` spec's significant digits are kept
    without exponent notation (``23780`` for 23,780.4 at ``.3g``, ``0.0000221``), as every table
    of gnntrain writes its numbers."""
    if value is None:
        return "-"
    if spec.endswith("g") and spec.startswith(".") and value != 0 and math.isfinite(value):
        digits = int(spec[1:-1] or 6)
        return f"{value:.{max(0, digits - 1 - math.floor(math.log10(abs(value))))}f}{suffix}"
    return f"{value:{spec}}{suffix}"


def setting_line(run: Run, model: bool = True, network: bool = True) -> str:
    summary = run.summary
    parts = [f"{summary.dataset} ({summary.num_nodes} nodes, {summary.num_edges} edges)"]
    parts += [summary.model] if model else []
    parts += [f"network: {network_label(summary)}"] if network else []
    return ", ".join(parts)


def authors_settings(run: Run) -> str:
    """Which of the PipeGCN/BNS-GCN authors' settings a run used."""
    c = run.config
    return ", ".join([("inductive (trained on the training nodes' subgraph)" if c.get("dataset.inductive")
                       else "transductive"),
                      "first layer precomputed" if c.get("model.precompute_first") else "first layer exchanged",
                      f"METIS {c.get('partition.objective', 'cut')} objective"])


def figure_setting(run: Run, model: bool = True) -> str:
    """The line under a figure's title: the graph, the model (where one model is drawn), the
    workers and the clock its times were read on."""
    summary = run.summary
    return (f"{summary.dataset} ({summary.num_nodes:,} nodes), " + (f"{summary.model}, " if model else "")
            + f"{summary.world_size} workers, {summary.clock} clock")


def _titled(ax, title: str, setting: str) -> None:
    ax.set_title(f"{title}\n{setting}", fontsize="medium")


def curves(series: dict[str, Run | list[Run]], path: Path, title: str) -> None:
    """Validation accuracy per epoch, one line per label: a run's, or the mean of several runs'
    (seeds) at the epochs they all evaluated with a band of ± one standard deviation over them."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for label, runs in series.items():
        runs = runs if isinstance(runs, list) else [runs]
        scores = [{r.epoch: r.val_acc for r in run.records if r.val_acc is not None} for run in runs]
        epochs = sorted(set.intersection(*(set(s) for s in scores)))
        at = [[s[e] * 100 for s in scores] for e in epochs]
        line, = ax.plot(epochs, [mean(v) for v in at], label=label + (f" (mean of {len(runs)})" if len(runs) > 1 else ""))
        if len(runs) > 1:
            ax.fill_between(epochs, [mean(v) - stdev(v) for v in at], [mean(v) + stdev(v) for v in at],
                            color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation accuracy (%)")
    first = next(iter(series.values()))
    _titled(ax, title + (" (bands: ± 1 sd over seeds)" if any(isinstance(r, list) and len(r) > 1
                                                               for r in series.values()) else ""),
            figure_setting(first[0] if isinstance(first, list) else first))
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def per_round(runs: list[Run], start: int) -> Ratio:
    """Each round's throughput (epochs per second from epoch ``start``) of ``runs``, one run per
    round, as a :class:`~gnntrain.report.stats.Ratio` of the rounds: median and interval."""
    return Ratio([1 / epoch_time(r, start) for r in runs])


def error_bars(values: list[Ratio]) -> list[list[float]]:
    """Matplotlib's ``yerr``/``xerr`` for ``values`` drawn at their medians: how far each one's
    95% interval reaches below and above it (0 with one round, or where the median lies outside
    the interval of the geometric mean)."""
    spans = [v.bounds or (v.median, v.median) for v in values]
    return [[max(0.0, v.median - low) for v, (low, _) in zip(values, spans)],
            [max(0.0, high - v.median) for v, (_, high) in zip(values, spans)]]


def bars(groups: dict[str, dict[str, Ratio]], ylabel: str, path: Path, title: str, setting: str) -> None:
    """One cluster of bars per group (e.g. partitions), one bar per method: each the median of its
    rounds with its 95% interval (:class:`~gnntrain.report.stats.Ratio`) as an error bar."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    methods = list(dict.fromkeys(m for g in groups.values() for m in g))
    width = 0.8 / max(1, len(methods))
    for i, method in enumerate(methods):
        xs = [j + i * width for j, g in enumerate(groups.values()) if method in g]
        values = [g[method] for g in groups.values() if method in g]
        ax.bar(xs, [v.median for v in values], width, yerr=error_bars(values), capsize=3, label=method)
    ax.set_xticks([j + width * (len(methods) - 1) / 2 for j in range(len(groups))], list(groups))
    ax.set_ylabel(ylabel)
    _titled(ax, f"{title} (error bars: 95% interval of the rounds)", setting)
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def mean_sd(values: list[float]) -> str:
    """Mean ± sd of ``values`` (one value alone; ``-`` for none)."""
    if not values:
        return "-"
    return f"{mean(values):.2f} ± {stdev(values):.2f}" if len(values) > 1 else f"{values[0]:.2f}"


def scores(runs: list[Run]) -> list[float]:
    """The test scores (%) of those of ``runs`` that have one."""
    return [test_score(r) for r in runs if test_score(r) is not None]

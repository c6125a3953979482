"""``gnntrain-report <dir> [--target X]``: one table (markdown and CSV) and plots for any set of runs.

``<dir>`` is a run directory (it holds ``summary.json``) or any directory above run
directories, e.g. a Hydra multirun directory; every run below it is read. Only
``summary.json``, ``metrics.jsonl`` and Hydra's ``.hydra/config.yaml`` are read (its
interpolations resolved against it, so ``strategy.seed: ${seed}`` reads as the run's seed), so
runs copied back from a cluster work the same. The table has one row per run: its ``setting``
(the config keys that tell it from the other runs, :func:`setting_keys`, as ``key=value``), its
seed and strategy, then its summary figures (:data:`RUN_COLUMNS`); a line above it names the
datasets, models, worker counts, devices and networks of the runs.

Time to accuracy (``--target``: a validation score such as ``0.7``, or ``95%``: that fraction of
the best validation score any run reached): per run, the epochs and the training seconds to
the first evaluation at or above the target (:func:`gnntrain.engine.early_stop.time_to_target`,
the rule ``train.target`` stops by; seconds are the epochs' times, under a modelled link
the virtual clock's time), counted from the start and from the end of epoch 1 (whose start-up cost
can be many steady epochs'), or "not reached". Runs of one setting (they differ only in
``seed``) form a group; each group gets the mean and a 95% Student-t interval of its runs'
figures (:data:`GROUP_COLUMNS`; time and epochs to the target over the runs that reached it,
with how many did), and a warning says when intervals rest on fewer than :data:`FEW_SEEDS`
seeds. ``curves.png`` plots the validation score, loss and epoch time per epoch;
``accuracy_vs_time.png`` the validation score against the training seconds, the target drawn
across; their legends sit outside the panels.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import textwrap
from pathlib import Path

from gnntrain.timing import cluster as network
from gnntrain.config.keys import keys_playing, plays
from gnntrain.config.schema import PLACE
from gnntrain.engine.early_stop import time_to_target
from gnntrain.engine.metrics import EpochRecord
from gnntrain.engine.summary import RunSummary
from gnntrain.report.runs import Run, find_runs
from gnntrain.report.stats import interval, paired_ratio
from gnntrain.errors import GnntrainError, command_errors, warn
from gnntrain.storage.files import save_figure, write_atomically

IGNORED_KEYS = keys_playing(PLACE)
"""Config keys that never tell runs apart in a table: the schemas' place keys."""
SEED_KEY = "seed"
"""The key whose runs are repetitions of one setting (grouped, with mean and interval)."""
FEW_SEEDS = 3
"""Intervals over fewer seeds than this get a warning: with 2, the t quantile is 12.7."""


def differing_keys(runs: list[Run]) -> list[str]:
    """Config keys whose values differ between runs (a key missing from a run counts as differing)."""
    keys = sorted({k for r in runs for k in r.config if not plays(k, IGNORED_KEYS)})
    return [k for k in keys if len({json.dumps(r.config.get(k), sort_keys=True) for r in runs}) > 1]


def is_choice(key: str) -> bool:
    """Whether ``key`` names a config group's option (``strategy.name``, ``model.name``)."""
    section, _, leaf = key.partition(".")
    return leaf == "name" and bool(section)


def setting_keys(runs: list[Run]) -> list[str]:
    """The keys that tell the runs' settings apart (``seed`` aside): of the differing keys, the
    group choices (``<section>.name``, first) and every other key that is set in every run or
    differs between runs of the same choices. Left out: keys that follow from the choices (a
    strategy's own keys and defaults follow from ``strategy.name``) and keys that are
    interpolations in every run that has them (``strategy.seed: ${seed}``)."""
    differing = [k for k in differing_keys(runs) if k != SEED_KEY
                 and not all(k in r.interpolated for r in runs if k in r.config)]
    choices = [k for k in differing if is_choice(k)]

    def varies_within_choices(key: str) -> bool:
        seen: dict[str, str] = {}
        for run in runs:
            alike = json.dumps([run.config.get(c) for c in choices])
            value = json.dumps(run.config.get(key), sort_keys=True)
            if seen.setdefault(alike, value) != value:
                return True
        return False

    others = [k for k in differing if k not in choices
              and (all(k in r.config for r in runs) or varies_within_choices(k))]
    return choices + others


def setting_of(run: Run, keys: list[str]) -> dict:
    """The run's values of the setting ``keys`` it has."""
    return {k: run.config[k] for k in keys if k in run.config}


def value_text(value) -> str:
    """A config value as a command-line override writes it (``true``, ``null``, ``[1,2]``)."""
    if isinstance(value, (bool, type(None), list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def setting_text(setting: dict) -> str | None:
    """A setting as ``key=value`` pairs, space separated (None where it is empty)."""
    return " ".join(f"{k}={value_text(v)}" for k, v in setting.items()) or None


def short_label(setting: dict) -> str:
    """A legend's name for a setting: a group choice by its option (``adaqp``), another key by its
    last part (``clip=0.5``)."""
    return " ".join(value_text(v) if is_choice(k) else f"{k.rsplit('.', 1)[-1]}={value_text(v)}"
                    for k, v in setting.items())


def run_label(setting: dict, seed, with_seed: bool, run: str) -> str:
    """A legend's name for one run: its setting's :func:`short_label`, its seed where ``with_seed``;
    where both say nothing, its directory ``run``."""
    return " ".join(filter(None, [short_label(setting), f"seed {seed}" if with_seed else ""])) or run


def network_label(summary: RunSummary) -> str:
    """The network a run ran under (runs from before the ``network`` key: the real transport)."""
    return network.label(summary.network or {"modelled": False})


def named_figures(figures: dict, scale: float = 1.0) -> str | None:
    """Named figures in one cell, ``name=value`` space separated, the largest first (None where
    there are none or all are 0)."""
    ordered = sorted(((k, v * scale) for k, v in figures.items() if v), key=lambda kv: -abs(kv[1]))
    return " ".join(f"{k}={v:.4g}" for k, v in ordered) or None


def figures(summary: RunSummary) -> dict:
    """The summary figures of one run, in table units (ms, MiB)."""
    ms = lambda s: None if s is None else s * 1e3  # noqa: E731
    strategy_metrics = dict(summary.mean_strategy_metrics)
    timing = summary.timing()
    return {
        "strategy": summary.strategy, "model": summary.model, "dataset": summary.dataset,
        "workers": summary.world_size, "network": network_label(summary), "clock": summary.clock,
        "epoch_ms": ms(timing.epoch_time) if summary.mean_epoch_time is not None else None,
        "compute_ms": ms(timing.compute_time) if summary.mean_compute_time is not None else None,
        "comm_share": summary.mean_comm_time / summary.mean_epoch_time,
        "comm_split_ms": named_figures(timing.split("data"), 1e3),
        "link_busy_ms": ms(summary.mean_link_busy_time) if network.is_modelled(summary.network or {}) else None,
        "reduce_exposed_ms": ms(summary.mean_reduce_time),
        "MiB_per_epoch": summary.mean_comm_bytes_per_epoch / 2**20,
        "MiB_by_kind": named_figures(summary.mean_comm_bytes_by_kind, 2**-20),
        "best_val": summary.best_val, "test_at_best_val": summary.test_at_best_val,
        "peak_mem_mb": summary.peak_mem_mb,
        "peak_tensor_mb": summary.peak_tensor_mb,
        "saved_for_backward_mb": strategy_metrics.pop("saved_for_backward_mb", None),
        "strategy_metrics": named_figures(strategy_metrics),
    }


TO_TARGET = ("epochs_to_target", "s_to_target", "s_to_target_after_epoch1")
"""The figures of a run's time to a target (None each where it was not reached)."""


def to_target(records: list[EpochRecord], target: float) -> dict:
    """Epochs and training seconds to the first evaluation at or above ``target``, the seconds
    counted from the start and from the end of epoch 1; None each where it was not reached."""
    reached = time_to_target(records, target)
    if reached is None:
        return dict.fromkeys(TO_TARGET)
    first_epoch = sum(r.epoch_time for r in records if r.epoch == 1)
    return {"epochs_to_target": reached.epoch, "s_to_target": reached.train_time,
            "s_to_target_after_epoch1": reached.train_time - first_epoch}


def table_rows(runs: list[Run], root: Path, target: float | None = None) -> list[dict]:
    """One row per run: where it is, its seed, device and :func:`figures`, and with a ``target``
    the time to it (:func:`to_target`)."""
    rows = []
    for run in runs:
        row = {"run": str(run.path.relative_to(root)), SEED_KEY: run.config.get(SEED_KEY),
               "device": run.config.get("cluster.device"), **figures(run.summary)}
        if target is not None:
            row.update(to_target(run.records, target))
        rows.append(row)
    return rows


RUN_COLUMNS = {
    "run": "The run's directory, relative to the directory reported.",
    "setting": "The config keys that tell this run's setting from the other runs' "
               "(`gnntrain.report.setting_keys`), `key=value`, space separated; empty where none do.",
    "seed": "The run's `seed`.",
    "strategy": "The run's strategy.",
    "epoch_ms": "Mean epoch time over the steady epochs (`summary.json`'s `mean_epoch_time`), ms.",
    "comm_share": "The communication share: exposed `data` communication per epoch, mean over ranks "
                  "(`mean_comm_time`), over `epoch_ms` (`summary.json`'s `comm_share`; `training_comm_share` counts "
                  "every training category, as `network.calibrate_traffic=training` does).",
    "comm_split_ms": "`data` communication per epoch, mean over ranks, ms, the largest first: `wait` (blocked while "
                     "no transfer could move, a peer not there yet: imbalance) and `transfer` (blocked while one "
                     "moved) add up to the exposed time; `transfer` and `hidden` (moving while the rank computed) "
                     "to the time in flight (`summary.json`'s `mean_comm_*_time_by_category`).",
    "link_busy_ms": "Under a modelled link: the links' busy time per epoch, bytes on the wire / bandwidth "
                    "(`mean_link_busy_time`), ms; empty on the real transport.",
    "reduce_exposed_ms": "Exposed `sync` communication per epoch (`mean_reduce_time`), ms.",
    "MiB_per_epoch": "Training bytes per epoch, all kinds (`mean_comm_bytes_per_epoch`), MiB.",
    "MiB_by_kind": "MiB per epoch of each traffic kind that moved bytes (`mean_comm_bytes_by_kind`), "
                   "`kind=MiB`, the largest first.",
    "best_val": "Best validation score.",
    "test_at_best_val": "Test score at the epoch of the best validation score.",
    "peak_mem_mb": "Peak memory, max over epochs and ranks (`summary.json`'s `peak_mem_mb`): on cpu the "
                   "process's peak resident set, on cuda the peak of tensor memory.",
    "peak_tensor_mb": "Peak of tensor memory, max over epochs and ranks (`summary.json`'s `peak_tensor_mb`): "
                      "on cuda as `peak_mem_mb`, on cpu measured in the last warm-up epoch; empty where "
                      "no epoch measured it.",
    "saved_for_backward_mb": "Graph-parallel strategies: the most any rank's forward kept for backward, "
                             "mean over the steady epochs (the strategy figure), MiB: a part of "
                             "`peak_tensor_mb`.",
    "strategy_metrics": "The strategy's other figures, mean over the steady epochs (`mean_strategy_metrics`, "
                        "e.g. `projected_rows`), `name=value`.",
    "epochs_to_target": "With `--target`: epochs to the first evaluation at or above the target; empty "
                        "(\"not reached\") where none was.",
    "s_to_target": "With `--target`: training seconds from the start to there, epoch 1 included.",
    "s_to_target_after_epoch1": "With `--target`: training seconds from the end of epoch 1 to there "
                                "(start-up apart; 0 where epoch 1 reached it).",
}
"""The columns of the run table (``report.md``, ``report.csv``), in order; ``--help`` lists them."""
ABOUT = ("dataset", "model", "workers", "device", "network", "clock")
"""The row fields that the line above the table lists, each with its values over the runs."""


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
    best = [run.summary.best_val for run in runs if run.summary.best_val is not None]
    if not best:
        raise GnntrainError(f"--target {text} needs a best validation score, and no run under the path has one")
    return value * max(best)


GROUPED = ("epochs_to_target", "s_to_target", "s_to_target_after_epoch1", "best_val", "test_at_best_val",
           "epoch_ms", "comm_share", "link_busy_ms", "MiB_per_epoch", "peak_mem_mb", "peak_tensor_mb",
           "saved_for_backward_mb")
"""The per-run figures a group reports as mean and interval."""
GROUP_COLUMNS = {
    "setting": "The setting its runs share (as in the run table).",
    "runs": "How many runs it has.",
    "seeds": "Their seeds.",
    "reached": "With `--target`: how many of its runs reached the target, `k/n`.",
    **{name: f"Mean of the runs' `{name}`, over those that {'reached the target' if name in TO_TARGET else 'have it'}."
       for name in GROUPED},
    "<figure>_ci95": "In `groups.csv`: the half-width of the figure's 95% Student-t interval over the runs "
                     "(empty with fewer than 2); in `report.md`, `mean ± half-width`.",
}
"""The columns of the group table (``report.md``, ``groups.csv``), in order; ``--help`` lists them."""


def group_rows(rows: list[dict], keys: list[str]) -> list[dict]:
    """One row per setting (the rows' ``keys`` but ``seed``): runs, seeds, and per figure of
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


def warn_few_seeds(groups: list[dict]) -> None:
    """One warning line where some settings' intervals rest on 2 to :data:`FEW_SEEDS` - 1 seeds."""
    few = [g for g in groups if 1 < g["runs"] < FEW_SEEDS]
    if few:
        warn(f"the 95% intervals of {len(few)} of {len(groups)} setting(s) rest on fewer than {FEW_SEEDS} seeds, "
             f"too wide to tell settings apart; run {FEW_SEEDS} or more seeds per setting (e.g. seed=0,1,2,3,4)")


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


NOT_REACHED = dict.fromkeys(TO_TARGET, "not reached")


def _cell(value, column: str = "", decimals: int | None = None) -> str:
    """One cell: a float at ``decimals`` (its column's, :func:`column_decimals`; else 4
    significant digits), never in exponent notation."""
    if value is None:
        return NOT_REACHED.get(column, "-")
    if isinstance(value, float):
        return f"{value:.{column_decimals([value]) if decimals is None else decimals}f}"
    return str(value)


SIGNIFICANT = 4
"""The significant digits a column's largest number is shown with."""


def column_decimals(values: list) -> int:
    """The decimals one column's floats are all shown with: enough for :data:`SIGNIFICANT`
    significant digits of the largest, at most 8 (so ``23780.4`` and ``946.9`` read ``23780`` and
    ``947``, ``2.35`` and ``0.2546`` read ``2.350`` and ``0.255``), never exponent notation."""
    largest = max((abs(v) for v in values if isinstance(v, float) and math.isfinite(v) and v != 0), default=1.0)
    return max(0, min(8, SIGNIFICANT - 1 - math.floor(math.log10(largest))))


def selected(rows: list[dict], columns: list[str]) -> list[dict]:
    """The rows with only those of ``columns`` that the first row has, in that order."""
    present = [c for c in columns if rows and c in rows[0]]
    return [{c: row.get(c) for c in present} for row in rows]


def measured(rows: list[dict]) -> list[dict]:
    """The rows without the columns that no row has a value in (time to a target kept: there
    empty is "not reached")."""
    columns = [c for c in dict.fromkeys(k for row in rows for k in row)
               if c in NOT_REACHED or any(row.get(c) is not None for row in rows)]
    return selected(rows, columns)


def markdown(rows: list[dict]) -> str:
    """The rows as a markdown table, each column's floats in one format (:func:`column_decimals`)."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    decimals = {c: column_decimals([row.get(c) for row in rows]) for c in columns}
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c), c, decimals[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


CONSOLE_WIDTH = 120
"""The widest line of a table the report prints; its files hold every column."""


def fitted(rows: list[dict], width: int = CONSOLE_WIDTH) -> str:
    """:func:`markdown` of the rows' first columns, as many as keep every line within ``width``
    characters (the first one always), and a line naming how many more the files hold."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    kept = columns[:1]
    for column in columns[1:]:
        trial = kept + [column]
        if max(map(len, markdown([{c: row.get(c) for c in trial} for row in rows]).splitlines())) > width:
            break
        kept = trial
    table = markdown([{c: row.get(c) for c in kept} for row in rows])
    more = len(columns) - len(kept)
    return table + (f"({more} more column{'s' if more > 1 else ''} in report.md and the CSV)\n" if more else "")


def write_csv(rows: list[dict], path: Path) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    write_atomically(path, text.getvalue())


def about_line(rows: list[dict]) -> str:
    """The :data:`ABOUT` fields of the runs, each with its distinct values."""
    values = {name: ", ".join(dict.fromkeys(_cell(row.get(name)) for row in rows)) for name in ABOUT}
    return "; ".join([f"{len(rows)} run(s)", *(f"{name}: {text}" for name, text in values.items())])


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


SEED_STYLES = ("-", "--", ":", "-.")


def plot_curves(runs: list[Run], labels: list[str], settings: list[str], seeds: list, path: Path) -> None:
    """Validation score, loss and epoch time per epoch, one line per run: a colour per setting
    (20 before one repeats), a line style per seed; the legend right of the panels."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
    colours = {s: plt.get_cmap("tab20" if len(set(settings)) > 10 else "tab10")(i % 20)
               for i, s in enumerate(dict.fromkeys(settings))}
    styles = {seed: SEED_STYLES[i % len(SEED_STYLES)] for i, seed in enumerate(dict.fromkeys(seeds))}
    for run, label, setting, seed in zip(runs, labels, settings, seeds):
        look = {"color": colours[setting], "linestyle": styles[seed]}
        evaluated = [r for r in run.records if r.val_acc is not None]
        axes[0].plot([r.epoch for r in evaluated], [r.val_acc for r in evaluated], **look)
        axes[1].plot([r.epoch for r in run.records], [r.loss for r in run.records], label=label, **look)
        axes[2].plot([r.epoch for r in run.records], [r.epoch_time * 1e3 for r in run.records], **look)
    for ax, title in zip(axes, ("validation score", "training loss", "epoch time (ms)")):
        ax.set_xlabel("epoch")
        ax.set_title(title)
    fig.legend(*axes[1].get_legend_handles_labels(), loc="outside right upper", fontsize="small")
    save_figure(fig, path, dpi=110)
    plt.close(fig)


PANEL_SERIES = 6
"""The most groups one panel of :func:`plot_accuracy_vs_time` draws: more are split into small
multiples, so that every line can be told from the others."""


def plot_accuracy_vs_time(runs: list[Run], groups: list[str], target: float | None, path: Path,
                          log_time: bool = False, title: str | None = None) -> None:
    """Validation score against training seconds (on a log axis with ``log_time``), one line per
    run, one colour per group, the legend right of the panel; more than :data:`PANEL_SERIES` groups
    are drawn as small multiples sharing their axes, :data:`PANEL_SERIES` groups (in order) to a
    panel, each with its legend. ``title``: the figure's,
    above its setting (the default names the clock the runs' seconds are read on)."""
    plt = _pyplot()
    names = list(dict.fromkeys(groups))
    panels = [names[i:i + PANEL_SERIES] for i in range(0, len(names), PANEL_SERIES)] or [[]]
    columns = min(3, len(panels))
    rows = -(-len(panels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.8 * rows), sharex=True, sharey=True,
                             layout="constrained", squeeze=False)
    palette = plt.get_cmap("tab10")
    colours = {group: palette(i % PANEL_SERIES) for panel in panels for i, group in enumerate(panel)}
    where = {group: axes.flat[i] for i, panel in enumerate(panels) for group in panel}
    labelled = set()
    for run, group in zip(runs, groups):
        seconds, points = 0.0, []
        for r in run.records:
            seconds += r.epoch_time
            if r.val_acc is not None:
                points.append((seconds, r.val_acc))
        where[group].plot(*zip(*points) if points else ([], []), color=colours[group], alpha=0.8,
                          label=None if group in labelled else group)
        labelled.add(group)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax in axes.flat[:len(panels)]:
        if target is not None:
            ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.4g}")
        if log_time:
            ax.set_xscale("log")
        if len(panels) > 1:
            ax.legend(fontsize="x-small", loc="lower right")
    if len(panels) == 1:
        fig.legend(loc="outside right upper", fontsize="small")
    for ax in axes[-1]:
        ax.set_xlabel("training time (s)")
    for ax in axes[:, 0]:
        ax.set_ylabel("validation score")
    clocks = sorted({run.summary.clock for run in runs})
    heading = textwrap.fill(title or "validation score against training time", 40 * columns + 20)
    fig.suptitle(f"{heading}\n{', '.join(clocks) or 'no'} clock; one line per run", fontsize="medium")
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def against_baseline(rows: list[dict], baseline: str) -> list[dict]:
    """Each setting but the baseline's (the one setting whose ``key=value`` words include all of
    ``baseline``'s; ``strategy=x`` reads as ``strategy.name=x``) against it: the baseline's epoch time over the setting's and, with a target,
    its time to the target over the setting's, runs paired by seed, each with its 95% interval
    over the pairs and a verdict (``ahead``: the interval above 1, ``behind``: below, else
    ``undecided``), as ``make compare`` gives them."""
    settings = list(dict.fromkeys(row["setting"] or "" for row in rows))
    wanted = {word if "." in word.partition("=")[0] else word.replace("=", ".name=", 1) for word in baseline.split()}
    matching = [s for s in settings if wanted <= set(s.split())]
    if len(matching) != 1:
        raise GnntrainError(f"--baseline {baseline} matches {len(matching)} settings; valid: words of exactly one of "
                            f"{'; '.join(s or '(all runs)' for s in settings)}")
    base = [row for row in rows if (row["setting"] or "") == matching[0]]
    out = []
    for setting in settings:
        if setting == matching[0]:
            continue
        members = [row for row in rows if (row["setting"] or "") == setting]
        row = {"setting": setting}
        for name, key in (("epoch_time", "epoch_ms"), ("time_to_target", "s_to_target")):
            if key not in members[0]:
                continue
            ratio = paired_ratio(base, members, key)
            row[f"{name}_speedup"] = str(ratio) if ratio else "no pair"
            row[f"{name}_verdict"] = ratio.verdict() if ratio else "undecided (no seed in common)"
        out.append(row)
    return out


def report(root: Path, out: Path | None = None, target: str | None = None, baseline: str | None = None,
           log_time: bool = False) -> Path:
    """Write ``report.md``, ``report.csv``, ``curves.png`` and ``accuracy_vs_time.png`` (and,
    where runs repeat a setting over seeds or a target is given, ``groups.csv``) for the runs
    under ``root`` into ``out`` (default: ``root``); prints the tables. Returns the markdown file."""
    runs = find_runs(root)
    score = resolve_target(target, runs) if target is not None else None
    out = out or root
    out.mkdir(parents=True, exist_ok=True)
    keys = setting_keys(runs)
    settings = [setting_of(run, keys) for run in runs]
    rows = [{"run": row["run"], "setting": setting_text(setting), **row}
            for row, setting in zip(table_rows(runs, root, score), settings)]
    table = selected(rows, list(RUN_COLUMNS))
    lead = f"{about_line(rows)}\n\n"
    if score is not None:
        lead = f"Target: validation score {score:.4g}" + (f" ({target} of the best run's)" if target.endswith("%")
                                                           else "") + "\n\n" + lead
    sections = [("", measured(table))]
    write_csv(table, out / "report.csv")
    written = [out / "report.md", out / "report.csv", out / "curves.png", out / "accuracy_vs_time.png"]
    groups = group_rows(rows, ["setting"]) if SEED_KEY in differing_keys(runs) or score is not None else None
    if groups is not None:
        sections.append(("\nRuns grouped by setting (mean, and the half-width of a 95% t-interval over seeds):\n\n",
                         measured(with_intervals(groups))))
        write_csv(groups, out / "groups.csv")
        written.append(out / "groups.csv")
    if baseline is not None:
        compared = against_baseline(rows, baseline)
        sections.append((f"\nAgainst the baseline `{baseline}` (its time over each setting's, runs paired by seed; "
                         "95% interval over the pairs; ahead or behind where the interval excludes 1):\n\n", compared))
        write_csv(compared, out / "baseline.csv")
        written.append(out / "baseline.csv")
    text = lead + "".join(heading + markdown(table) for heading, table in sections)
    write_atomically(out / "report.md", f"# Runs under {root}\n\n{text}")
    with_seed = len({row[SEED_KEY] for row in rows}) > 1
    plot_curves(runs, [run_label(setting, row[SEED_KEY], with_seed, row["run"]) for setting, row in zip(settings, rows)],
                [row["setting"] or "" for row in rows], [row[SEED_KEY] for row in rows], out / "curves.png")
    plot_accuracy_vs_time(runs, [short_label(setting) or "all runs" for setting in settings], score,
                          out / "accuracy_vs_time.png", log_time)
    print(lead + "".join(heading + fitted(table) for heading, table in sections), end="")
    print("wrote " + ", ".join(str(p) for p in written), flush=True)
    if groups is not None:
        warn_few_seeds(groups)
    return out / "report.md"


def columns_help() -> str:
    """The columns of both tables and what they hold, for ``--help``."""
    lines = ["run table (report.md, report.csv):"]
    lines += [f"  {name}: {text}" for name, text in RUN_COLUMNS.items()]
    lines += ["group table (report.md, groups.csv; with several seeds or --target):"]
    lines += [f"  {name}: {text}" for name, text in GROUP_COLUMNS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gnntrain-report", description=__doc__.splitlines()[0],
                                     epilog=columns_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, help="a run directory or a directory of runs (e.g. a multirun dir)")
    parser.add_argument("--out", type=Path, default=None, help="where to write the report (default: the runs dir)")
    parser.add_argument("--target", default=None,
                        help="a validation score (0.7) or a percentage of the best run's best score (95%%): "
                             "epochs and seconds to first reach it per run, mean and 95%% interval per setting")
    parser.add_argument("--baseline", default=None,
                        help="a setting, as the tables name it (e.g. strategy=vanilla): every other setting's "
                             "speed-up over it in epoch time (and time to --target), paired by seed, with a 95%% "
                             "interval and a verdict: ahead, behind or undecided")
    parser.add_argument("--log-time", action="store_true",
                        help="accuracy_vs_time.png's time axis on a log scale (runs of very different speeds)")
    args = parser.parse_args(argv)
    with command_errors("gnntrain-report"):
        report(args.runs, args.out, args.target, args.baseline, args.log_time)


if __name__ == "__main__":
    main()

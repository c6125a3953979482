"""Every method of every family on one graph and cluster, each tuned, compared on time to
accuracy under a fast and a slow link (``make compare``): ``results/compare/table.md``.

Epoch time rewards a method that saves communication even where it needs more epochs
(staleness, sampling, quantization, mini-batches); the time a user waits for a model does not.
So, as the empirical study of full-graph and mini-batch systems argues (arXiv 2406.00552),
every strategy is compared on the training seconds to a validation target, each at its own best
setting:

1. **Tuning** (seed :data:`TUNING_SEED`, under each link): every strategy gets the same budget
   of :data:`TUNING_BUDGET` settings, its own knob's values (:data:`KNOBS`: PipeGCN's smoothing,
   BNS-GCN's boundary sampling rate p, AdaQP's bit-widths, Sylvie's staleness bound (the
   authors' sweep: 5, 10, 20 epochs), Sancus's and PipeQS's change thresholds, GraNNDis's
   expansion sampling rate (its servers: the links' nodes, a rank each where the link describes
   none, so every rank preloads all it reads), GNNPipe's chunks, the mini-batch
   family's batch size; vanilla, data parallelism and NeutronTP have none) times as many learning rates as
   the budget leaves (:func:`learning_rates`: spread evenly on a log scale over
   :data:`LEARNING_RATE_RANGE`), stopping at the target (``train.target``) or after the preset's
   patience. The setting chosen under a link is the one that reached the target in the fewest
   training seconds there; where none reached it, the one with the best validation score.
   Where the chosen rate sits on an edge of the rates its knob value was tried at, that value is
   tried at :data:`EDGE_FACTOR` times further out (:func:`beyond_edge`) and the choice made again, until the
   chosen rate lies inside (at most :data:`EDGE_STEPS` steps; the table marks one still on an
   edge): a setting on a grid's edge says only that the best lies at or beyond it.
   GNNPipe's chunks start at 2: with one chunk its stages take turns and nothing pipelines, so
   on this 2-layer model it would train exactly as vanilla does.
2. **Runs** at each link's chosen setting: seeds 0-2 (none of them the tuning seed) under that
   link (:data:`LINKS`), the preset's whole budget (patience, no target stop), so the best test
   score is the method's, not the one at the target. They run in interleaved rounds, one per
   seed: each round runs every strategy once under each link, so that a slow spell of the
   machine falls on every strategy alike rather than on the one whose seeds it met.
3. **Table**: per link and strategy, the training seconds and epochs to the target (mean and
   95% t-interval over the seeds that reached it, with how many did), the speed-up over vanilla
   in time to the target (the median of its per-round ratios and the 95% interval of their geometric mean (log scale),
   :class:`gnntrain.report.stats.Ratio`, over the rounds where both reached it), the best test score at the
   best validation epoch, MiB moved per training epoch, peak memory and the chosen setting, read by
   :mod:`gnntrain.report` from the runs' own records (the same rule as ``train.target``); a
   one-line verdict per link; ``accuracy_vs_time_<link>.png`` plots every run's validation score
   against its training seconds (log axis).

Every sweep runs through ``gnntrain -m`` into ``multirun/compare/<scale>/``; a sweep whose jobs
all completed is not run again (``--fresh`` reruns all), so an interrupted comparison goes on
where it stopped. ``runs.csv`` holds every run, tuning and final (``run``: its folder under
``multirun/compare/<scale>/``), each with its wall time (``wall_s``); ``--dry-run`` lists the sweeps,
their jobs and the wall time those records suggest, and starts nothing (:mod:`gnntrain.repro.plan`).
``--scale paper`` uses ``experiment=compare_paper`` (a GPU cluster) and its grid. Usage:
``python -m gnntrain.repro.compare [--scale small|paper] [--strategies vanilla bns ...] [--fresh] [--table]
[--dry-run]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from gnntrain.engine.summary import SUMMARY_FILE, RunSummary
from gnntrain.report import about_line, group_rows, network_label, plot_accuracy_vs_time, write_csv
from gnntrain.report.runs import Run, find_runs, same_clock
from gnntrain.report.stats import Ratio, paired_ratio
from gnntrain.repro import CHECKOUT, use_shared_data
from gnntrain.repro.jobs import git_commit
from gnntrain.repro.plan import Countdown, Sweep, dry_run, expand, launch, timed_rows
from gnntrain.repro.staleness import write_manifest
from gnntrain.strategies import method
from gnntrain.storage.files import write_atomically
STRATEGIES = ["vanilla", "pipegcn", "bns", "adaqp", "sylvie", "pipeqs", "sancus", "granndis", "gnnpipe",
              "data_parallel", "neutrontp", "minibatch", "hopgnn", "p3", "naive", "lo"]
BATCH = {"small": ["strategy.batch_size=16", "strategy.batch_size=32", "strategy.batch_size=64"],
         "paper": ["strategy.batch_size=1024", "strategy.batch_size=4096", "strategy.batch_size=16384"]}
KNOBS: dict[str, list[list[str]]] = {
    "vanilla": [[]],
    "data_parallel": [[]],
    "pipegcn": [["strategy.smooth=none"], ["strategy.smooth=gf"]],
    "bns": [["strategy.p=0.01"], ["strategy.p=0.1"], ["strategy.p=0.5"]],
    "adaqp": [["strategy.assign=adaptive"], ["strategy.assign=fixed", "strategy.bits=4"],
              ["strategy.assign=fixed", "strategy.bits=2"]],
    "gnnpipe": [["strategy.chunks=2"], ["strategy.chunks=4"], ["strategy.chunks=8"]],
    "sylvie": [["strategy.sync_every=5"], ["strategy.sync_every=10"], ["strategy.sync_every=20"]],
    "sancus": [["strategy.threshold=0.05"], ["strategy.threshold=0.1"], ["strategy.threshold=0.3"]],
    "pipeqs": [["strategy.threshold=0.05"], ["strategy.threshold=0.1"], ["strategy.threshold=0.3"]],
    "granndis": [["strategy.rate=1"], ["strategy.rate=0.5"], ["strategy.rate=0.1"]],
    "neutrontp": [[]],
}
"""Each strategy's own knob: the override sets tuned (the mini-batch family: :data:`BATCH`)."""
TUNING_BUDGET = 12
"""Settings tuned per strategy and link, whatever its knob: each knob value gets an equal share
of learning rates (so no strategy is tuned harder than another)."""
LEARNING_RATE_RANGE = (0.005, 0.02)
EDGE_STEPS = 6
"""At most this many learning rates a strategy's grid is extended by under one link."""
EDGE_FACTOR = 2.0
"""The ratio of each learning rate beyond a grid's edge to the one before it: coarser than the
grids' own steps, so that a few steps span what the grid left out."""
TUNING_SEED = 100
"""The seed tuning runs at: not one of the reported :data:`SEEDS`, so a setting is not chosen on
the very runs that report it."""
LINKS = {
    "small": {"fast": ["network=ib100"], "slow": ["network=eth10g", "network.bandwidth_gbps=0.25"]},
    "paper": {"fast": ["network=ib100"], "slow": ["network=eth10g"]},
}
"""The two links, fast first."""
TARGET = {"small": 0.75, "paper": 0.95}
"""The validation score to reach: Cora ~95% of GCN's best validation score (0.79); Reddit's."""
SEEDS = (0, 1, 2)
"""The reported seeds, one per round of the final runs."""
BASELINE = "vanilla"
"""The strategy every speed-up in time to the target is taken over."""


def family(strategy: str) -> str:
    """The name of the family module that implements ``strategy`` (``graph-parallel``, ...)."""
    return method(strategy).family.name.replace("_", "-")


def knobs(strategy: str, scale: str) -> list[list[str]]:
    return KNOBS.get(strategy) or [[knob] for knob in BATCH[scale]]


def learning_rates(strategy: str, scale: str) -> list[float]:
    """The learning rates each of the strategy's knob values is tuned at: the budget's share,
    spread evenly on a log scale over :data:`LEARNING_RATE_RANGE` (both ends included)."""
    count = TUNING_BUDGET // len(knobs(strategy, scale))
    low, high = LEARNING_RATE_RANGE
    if count == 1:
        return [round((low * high) ** 0.5, 4)]
    return [float(f"{low * (high / low) ** (i / (count - 1)):.3g}") for i in range(count)]


def beyond_edge(rates: list[float], chosen: float, step: float) -> float | None:
    """The learning rate one ``step`` beyond the edge of ``rates`` (those tried) that ``chosen``
    sits on; None where it lies inside them."""
    if chosen >= max(rates):
        return float(f"{max(rates) * step:.3g}")
    if chosen <= min(rates):
        return float(f"{min(rates) / step:.3g}")
    return None


def learning_rate(setting: list[str]) -> float:
    return float(next(o for o in setting if o.startswith("train.lr=")).split("=", 1)[1])


@dataclass
class Plan:
    scale: str
    root: Path
    """Where the sweeps go: ``multirun/compare/<scale>``."""
    fresh: bool = False
    """Rerun sweeps that already completed."""
    read_only: bool = False
    """Run nothing: read the runs there are."""
    countdown: Countdown | None = None
    """The build's progress lines (:class:`~gnntrain.repro.plan.Countdown`)."""

    def preset(self) -> str:
        return f"experiment=compare_{self.scale}"


def complete(path: Path, jobs: list[list[str]]) -> bool:
    """Whether ``path`` holds a completed run of each of ``jobs`` (their overrides): a run of other
    overrides there (a final run at the setting an earlier tuning chose) does not count."""
    done = {frozenset(yaml.safe_load((summary.parent / ".hydra" / "overrides.yaml").read_text()))
            for summary in path.rglob(SUMMARY_FILE)
            if "calibration_probe" not in summary.parts and (summary.parent / ".hydra" / "overrides.yaml").is_file()
            and RunSummary.read(summary).status == "completed"}
    return all(frozenset(job) in done for job in jobs)


def skipped(plan: Plan, sweep: Sweep) -> str | None:
    """Why ``sweep`` is not run (nothing runs with ``--table``; a sweep whose folder holds all its
    jobs' completed runs is not run again without ``--fresh``); None where it is."""
    if plan.read_only:
        return "--table: its runs are read"
    if not plan.fresh and complete(plan.root / sweep.name, expand(sweep.overrides)):
        return "its runs completed: they are read (--fresh runs it again)"
    return None


def run_sweep(plan: Plan, sweep: Sweep) -> None:
    """``gnntrain -m`` the sweep into its folder, emptied first (so that it holds no run of other
    overrides), unless it is :func:`skipped`."""
    if skipped(plan, sweep) is None:
        shutil.rmtree(plan.root / sweep.name, ignore_errors=True)
        launch(sweep.name, sweep.overrides, plan.root / sweep.name, check=False, countdown=plan.countdown)


def tune_sweeps(plan: Plan, strategy: str, link: str) -> list[tuple[list[str], Sweep]]:
    """The strategy's tuning sweeps under ``link``, one per setting of its knob: the knob's
    overrides and the sweep (its learning rates, to the target, at the tuning seed)."""
    rates = ",".join(str(lr) for lr in learning_rates(strategy, plan.scale))
    return [(knob, Sweep(f"tune/{link}/{strategy}/{index}",
                         [plan.preset(), f"strategy={strategy}", *knob, f"train.lr={rates}", f"seed={TUNING_SEED}",
                          f"train.target={TARGET[plan.scale]}", *LINKS[plan.scale][link]]))
            for index, knob in enumerate(knobs(strategy, plan.scale))]


def final_sweep(plan: Plan, strategy: str, setting: list[str], link: str, seed: int) -> Sweep:
    """The strategy's final run at ``setting`` under ``link`` in the round of ``seed``."""
    return Sweep(f"runs/{link}/{strategy}/seed{seed}",
                 [plan.preset(), f"strategy={strategy}", *setting, f"seed={seed}", *LINKS[plan.scale][link]])


def edge_sweep(plan: Plan, strategy: str, knob: list[str], link: str, lr: float, step: int) -> Sweep:
    """The ``step``-th tuning run of the strategy under ``link`` beyond its grid's edge."""
    return Sweep(f"tune/{link}/{strategy}/edge{step}",
                 [plan.preset(), f"strategy={strategy}", *knob, f"train.lr={lr}", f"seed={TUNING_SEED}",
                  f"train.target={TARGET[plan.scale]}", *LINKS[plan.scale][link]])


@dataclass
class Tuned:
    """A strategy's tuning under one link: the setting chosen, the tuning runs' rows, and the
    learning rates its knob value was tried at."""

    setting: list[str]
    rows: list[dict]
    rates: list[float]

    @property
    def on_edge(self) -> bool:
        return learning_rate(self.setting) in (min(self.rates), max(self.rates))


def tune(plan: Plan, strategy: str, link: str) -> Tuned | None:
    """Run the strategy's grid under ``link``, extended beyond the edge its choice sits on (see
    the module docstring); None where no tuning run completed."""
    candidates, rows = [], []

    def tried(knob: list[str], sweep: Sweep) -> None:
        run_sweep(plan, sweep)
        for run, row in zip(*runs_and_rows(plan, sweep)):
            setting = [*knob, f"train.lr={run.config['train.lr']}"]
            candidates.append((row, setting))
            rows.append({**about(strategy, link, setting, row), **row})

    for knob, sweep in tune_sweeps(plan, strategy, link):
        tried(knob, sweep)
    if not candidates:
        print(f"compare: no tuning run of {strategy} completed under {plan.root / 'tune' / link / strategy}",
              flush=True)
        return None
    def rates_of(chosen: list[str]) -> list[float]:
        """The learning rates the chosen setting's knob value was tried at (a setting ends with its rate)."""
        return sorted(learning_rate(setting) for _, setting in candidates if setting[:-1] == chosen[:-1])

    for extension in range(1, EDGE_STEPS + 1):
        chosen = choose(candidates)
        beyond = beyond_edge(rates_of(chosen), learning_rate(chosen), EDGE_FACTOR)
        if beyond is None:
            break
        tried(chosen[:-1], edge_sweep(plan, strategy, chosen[:-1], link, beyond, extension))
    chosen = choose(candidates)
    return Tuned(chosen, rows, rates_of(chosen))


def choose(candidates: list[tuple[dict, list[str]]]) -> list[str]:
    """Of (tuning run's row, its overrides): the overrides of the run that reached the target in
    the fewest training seconds; where none did, of the one with the best validation score."""
    reached = [c for c in candidates if c[0]["s_to_target"] is not None]
    if reached:
        return min(reached, key=lambda c: c[0]["s_to_target"])[1]
    return max(candidates, key=lambda c: c[0]["best_val"] or 0.0)[1]


def runs_and_rows(plan: Plan, sweep: Sweep) -> tuple[list[Run], list[dict]]:
    """The sweep's completed runs and their rows (:func:`gnntrain.repro.plan.timed_rows`, ``run`` relative
    to the plan's root)."""
    out = plan.root / sweep.name
    if not list(out.rglob(SUMMARY_FILE)):
        return [], []
    runs = find_runs(out)
    return runs, timed_rows(runs, plan.root, TARGET[plan.scale])


def about(strategy: str, link: str, setting: list[str], row: dict) -> dict:
    """What a row of ``runs.csv`` and of the table say first: the strategy, its family, the link,
    the setting and the network."""
    return {"strategy": strategy, "family": family(strategy), "link": link, "setting": " ".join(setting),
            "network": row["network"]}


def final(plan: Plan, strategy: str, setting: list[str], link: str) -> tuple[dict | None, list[dict], list[Run]]:
    """The final runs at ``setting`` under ``link``, one per round: their group row (None where
    none completed), the runs' own rows and the runs."""
    runs, rows = [], []
    for seed in SEEDS:
        seed_runs, seed_rows = runs_and_rows(plan, final_sweep(plan, strategy, setting, link, seed))
        runs += seed_runs
        rows += seed_rows
    if not rows:
        return None, [], []
    group = {**about(strategy, link, setting, rows[0]), **group_rows(rows, ["seed"])[0]}
    return group, [{**about(strategy, link, setting, row), **row} for row in rows], runs


def planned(plan: Plan, strategies: list[str]) -> list[Sweep]:
    """Every sweep of the comparison of ``strategies``, in the order they run (every tuning sweep,
    then the final runs round after round), each with why it is :func:`skipped`; a final sweep's
    setting is added once its strategy's tuning has chosen it."""
    sweeps = [sweep for strategy in strategies for link in LINKS[plan.scale]
              for sweep in [*(sweep for _, sweep in tune_sweeps(plan, strategy, link)),
                            replace(edge_sweep(plan, strategy, [], link, 0.0, 1), overrides=[],
                                    added=f"up to {EDGE_STEPS} learning rates, one at a time, where the chosen one "
                                          f"sits on an edge")]]
    sweeps += [replace(final_sweep(plan, strategy, [], link, seed), added="the setting tuning chooses there")
               for seed in SEEDS for strategy in strategies for link in LINKS[plan.scale]]
    return [replace(sweep, skipped=skipped(plan, sweep)) for sweep in sweeps]


def time_ratio(base: list[dict], rows: list[dict]) -> Ratio | None:
    """``base``'s training seconds to the target over those of ``rows``, per round (rows paired by
    seed, where both reached it); None where no round has both. Rows of one clock only
    (:func:`gnntrain.report.runs.same_clock`)."""
    same_clock([(row["clock"], row["run"]) for row in base + rows])
    return paired_ratio(base, rows, "s_to_target")


def ci(row: dict, key: str, scale: float = 1.0, digits: int = 2) -> str:
    mean, half = row.get(key), row.get(f"{key}_ci95")
    if mean is None:
        return "not reached" if key.endswith("to_target") else "-"
    text = f"{mean * scale:.{digits}f}"
    return text + (f" ± {half * scale:.{digits}f}" if half is not None else "")


def verdict(rows: list[dict]) -> str:
    """The link's one line: the fastest to the target, the runner-up (and whether their intervals
    overlap, i.e. the lead is within the seeds' spread), the slowest, and who reached it with only
    some seeds or none."""
    reached = sorted((r for r in rows if r["s_to_target"] is not None), key=lambda r: r["s_to_target"])
    if not reached:
        return "no strategy reached the target"
    line = f"fastest to the target: {reached[0]['strategy']} ({reached[0]['s_to_target']:.2f} s)"
    if len(reached) > 1:
        first, second = reached[0], reached[1]
        overlap = (first["s_to_target"] + (first.get("s_to_target_ci95") or 0.0)
                   >= second["s_to_target"] - (second.get("s_to_target_ci95") or 0.0))
        line += (f", {second['s_to_target'] / first['s_to_target']:.2f}x ahead of {second['strategy']}"
                 f"{' (their 95% intervals overlap)' if overlap else ''}; slowest that reached it: "
                 f"{reached[-1]['strategy']} ({reached[-1]['s_to_target']:.2f} s)")
    partly = [f"{r['strategy']} ({r['reached']})" for r in reached if r["reached"] != f"{r['runs']}/{r['runs']}"]
    if partly:
        line += f"; reached by some seeds only: {', '.join(partly)}"
    never = [r["strategy"] for r in rows if r["s_to_target"] is None]
    if never:
        line += f"; never reached: {', '.join(never)}"
    return line


def table(rows: list[dict], plan: Plan, runs: list[dict]) -> str:
    """The table of the strategies' group ``rows``, headed by what the final ``runs`` (their own
    rows) ran on: the graph, model, workers, device, networks and clock."""
    scale = plan.scale
    lines = [f"Built by `make compare` (scale={scale}) at commit {git_commit()} on {os.cpu_count()} CPU cores. "
             f"Preset `{plan.preset()}`; target: validation score {TARGET[scale]}. Each strategy tuned under "
             f"each link at seed {TUNING_SEED} over {TUNING_BUDGET} settings, its knob's values x learning rates "
             f"in [{LEARNING_RATE_RANGE[0]}, {LEARNING_RATE_RANGE[1]}] (the setting that reached the target in the "
             f"fewest training seconds), the chosen knob value's rates extended {EDGE_FACTOR:g}x at a time beyond the "
             f"edge the chosen rate sat on until it lay inside (at most {EDGE_STEPS} steps; lr tried: the range and "
             f"count of its knob value's rates); then seeds {', '.join(map(str, SEEDS))} at that link's setting, with the "
             "preset's whole epoch budget, in interleaved rounds (one per seed, each running every strategy once "
             "under each link); GNNPipe's chunks from 2 (one chunk pipelines nothing). Time to target: training seconds "
             f"on the {' and '.join(sorted({r['clock'] for r in runs}))} clock (evaluation "
             "left out; the links emulated, so their time is the emulated time) to the first evaluation at or above "
             "the target; mean ± 95% t-interval over the seeds that reached it (reached: how many did). x vanilla: "
             "vanilla's time to target over the strategy's, the median of the per-round ratios [95% interval of "
             "their mean], over the rounds where both reached it. Test: the "
             "test score at the best validation epoch. MiB/epoch: every byte moved per training epoch.", "",
             f"The final runs: {about_line(runs)}.", ""]
    for link in LINKS[scale]:
        at_link = [r for r in rows if r["link"] == link]
        if not at_link:
            continue
        lines += [f"## {link} link: {at_link[0]['network']}", "",
                  f"| strategy | family | time to target (s) | x {BASELINE} | epochs to target | reached | test (%) "
                  "| epoch (ms) | MiB/epoch | peak MiB | setting | lr tried |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sorted(at_link, key=lambda r: (r["s_to_target"] is None, r["s_to_target"] or 0.0)):
            lines.append(f"| {r['strategy']} | {r['family']} | {ci(r, 's_to_target')} | {r['x_vanilla'] or '-'} | "
                         f"{ci(r, 'epochs_to_target', digits=1)} | {r['reached']} | "
                         f"{ci(r, 'test_at_best_val', 100, 1)} | {ci(r, 'epoch_ms', digits=1)} | "
                         f"{r['MiB_per_epoch']:.2f} | {r['peak_mem_mb']:.0f} | `{r['setting']}` | "
                         f"{r.get('lr_tried', '-')} |")
        lines += ["", f"Verdict ({link}): {verdict(at_link)}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=["small", "paper"], default="small")
    parser.add_argument("--strategies", nargs="+", choices=STRATEGIES, default=STRATEGIES)
    parser.add_argument("--fresh", action="store_true", help="rerun sweeps that already completed")
    parser.add_argument("--quiet", action="store_true", help="no progress lines (sweeps done, jobs left, estimate)")
    parser.add_argument("--table", action="store_true", help="only rebuild the table from the runs there are")
    parser.add_argument("--dry-run", action="store_true", help="list the sweeps, their jobs and the wall time the "
                                                             "recorded runs suggest; start nothing")
    args = parser.parse_args()
    use_shared_data()
    os.environ.setdefault("WANDB_MODE", "disabled")
    plan = Plan(args.scale, CHECKOUT / "multirun" / "compare" / args.scale, args.fresh, args.table)
    out = CHECKOUT / "results" / "compare" / ("" if args.scale == "small" else "paper")
    if args.dry_run:
        print(dry_run(f"make compare (scale={args.scale})", planned(plan, args.strategies), plan.root,
                      out / "runs.csv"))
        return
    if not args.table:
        plan.countdown = Countdown([s for s in planned(plan, args.strategies) if skipped(plan, s) is None], args.quiet)
    out.mkdir(parents=True, exist_ok=True)
    groups, rows, settings, grids = [], [], {}, {}
    for strategy in args.strategies:
        for link in LINKS[args.scale]:
            tuned = tune(plan, strategy, link)
            if tuned is not None:
                rows.extend(tuned.rows)
                settings[strategy, link] = tuned.setting
                grids[strategy, link] = tuned
    for seed in SEEDS:
        for (strategy, link), setting in settings.items():
            run_sweep(plan, final_sweep(plan, strategy, setting, link, seed))
    curves: dict[str, list[tuple[Run, str]]] = {link: [] for link in LINKS[args.scale]}
    finals: dict[tuple[str, str], list[dict]] = {}
    for (strategy, link), setting in settings.items():
        group, run_rows, runs = final(plan, strategy, setting, link)
        if group is not None:
            grid = grids[strategy, link]
            group["lr_tried"] = (f"{min(grid.rates):g}-{max(grid.rates):g} ({len(grid.rates)})"
                                 + (" **on an edge**" if grid.on_edge else ""))
            groups.append(group)
            finals[strategy, link] = run_rows
            rows.extend(run_rows)
            curves[link].extend((run, strategy) for run in runs)
    for group in groups:
        base = finals.get((BASELINE, group["link"]))
        group["x_vanilla"] = time_ratio(base, finals[group["strategy"], group["link"]]) if base else None
    if not groups:
        raise SystemExit(f"compare: no completed runs under {plan.root}")
    write_csv(rows, out / "runs.csv")
    for link, runs in curves.items():
        if runs:
            plot_accuracy_vs_time([run for run, _ in runs], [name for _, name in runs], TARGET[args.scale],
                                  out / f"accuracy_vs_time_{link}.png", log_time=True,
                                  title=f"make compare: every strategy's final runs, {link} link "
                                        f"({network_label(runs[0][0].summary)})")
    text = table(groups, plan, [row for run_rows in finals.values() for row in run_rows])
    write_atomically(out / "table.md", text)
    write_manifest(out / "table.md", [run for link_runs in curves.values() for run, _ in link_runs])
    print(text)
    print(f"wrote {out / 'table.md'}, {out / 'runs.csv'} and the accuracy-vs-time plots beside them")


if __name__ == "__main__":
    main()

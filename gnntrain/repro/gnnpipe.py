"""GNNPipe (arXiv 2308.10087): communication volume (Table 4), epoch time on deep models with its
breakdown and accounting (Table 3, Fig. 8), accuracy and convergence with and without its tricks
(Figs. 6-7), and the share curve of the pipeline over graph parallelism, replayed from one trace of
each (``make repro-gnnpipe``).

The pipeline moves stage activations instead of every layer's halo rows, so it removes most of
the baseline's data traffic rather than hiding it: its curve is held to the remove-all bound
``1 / (1 - s)`` (:mod:`gnntrain.repro.replayed`). It also has no gradient all-reduce (each stage
owns its layers), which that bound keeps; Table 3's accounting gives the baseline's all-reduce
beside its data, and its column "no communication at all" bounds the pipeline by the baseline's
epoch over its compute."""

from __future__ import annotations

from pathlib import Path
from statistics import mean, median

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gnntrain.report import markdown  # noqa: E402
from gnntrain.report.runs import Run, one_clock  # noqa: E402
from gnntrain.report.stats import Ratio  # noqa: E402
from gnntrain.repro.accounting import account, accounting_table  # noqa: E402
from gnntrain.repro.paper import Curve, Paper  # noqa: E402
from gnntrain.storage.files import save_figure  # noqa: E402
from gnntrain.repro.tables import (  # noqa: E402
    curves, epoch_time, figure_setting, fmt, mean_sd, select, setting_line, share_cell, speedup, test_score, timed_from,
    timing_note,
)

ACCURACY = ["experiment=gnnpipe_accuracy", "seed=0,1,2"]
SWEEPS = {
    "volume_graph": ["experiment=gnnpipe_table4", "model=gcn,sage,gcnii", "strategy=vanilla"],
    "volume_pipe": ["experiment=gnnpipe_table4", "model=gcn,sage,gcnii", "strategy=gnnpipe",
                    "strategy.graph_parallel=1"],
    # SAGE's hybrid at 32 x 1000 on 8 CPU workers outgrows a 24 GiB machine; GPU clusters may add it
    "volume_hybrid": ["experiment=gnnpipe_table4", "model=gcn,gcnii", "strategy=gnnpipe",
                      "strategy.graph_parallel=2"],
    "time_graph": ["experiment=gnnpipe_table3", "model=gcn,sage,gcnii", "strategy=vanilla"],
    "time_pipe": ["experiment=gnnpipe_table3", "model=gcn,sage,gcnii", "strategy=gnnpipe",
                  "strategy.graph_parallel=1,2"],
    "accuracy_graph": [*ACCURACY, "dataset=cora,squirrel", "strategy=vanilla"],
    "tricks_all": [*ACCURACY, "dataset=cora,squirrel", "strategy=gnnpipe"],
    "tricks_none": [*ACCURACY, "dataset=cora,squirrel", "strategy=gnnpipe", "strategy.shuffle=false",
                    "strategy.detach_history=false", "strategy.fixed_history=false"],
    "tricks_no_shuffle": [*ACCURACY, "dataset=cora", "strategy=gnnpipe", "strategy.shuffle=false"],
    "tricks_no_detach": [*ACCURACY, "dataset=cora", "strategy=gnnpipe", "strategy.detach_history=false"],
    "tricks_no_fixed": [*ACCURACY, "dataset=cora", "strategy=gnnpipe", "strategy.fixed_history=false"],
}


GNNPIPE_PAPER = {"gcn": {"volume": (4.43, 0.27, 1.38), "time": (0.19, 0.08, 0.11)},
                 "sage": {"volume": (6.10, 0.27, 1.61), "time": (0.27, 0.15, 0.19)},
                 "gcnii": {"volume": (4.53, 0.54, 1.51), "time": (0.20, 0.11, 0.14)}}
"""GNNPipe Tables 4 (GB per epoch) and 3 (s per epoch) on Squirrel: graph parallelism, pipeline
(8 stages), hybrid (4 x 2)."""
LAYOUTS = {"graph": "graph-parallel", "pipeline": "pipeline", "hybrid": "hybrid"}
GIB = 2**30


def _layout(run: Run) -> str:
    if run.config["strategy.name"] != "gnnpipe":
        return "graph"
    return "pipeline" if run.config["strategy.graph_parallel"] == 1 else "hybrid"


def _by_layout(runs: list[Run], model: str) -> dict[str, Run]:
    """One run per layout of ``model`` (the first round's where there are several)."""
    return {layout: rs[0] for layout, rs in _rounds_by_layout(runs, model).items()}


def _rounds_by_layout(runs: list[Run], model: str) -> dict[str, list[Run]]:
    found: dict[str, list[Run]] = {}
    for r in sorted(runs, key=lambda r: r.config.get("seed", 0)):
        if r.config["model.name"] == model:
            found.setdefault(_layout(r), []).append(r)
    return found


def data_bytes(run: Run) -> float:
    """Mean bytes per epoch of a run's training data traffic between ranks (halo rows, stage
    activations and their gradients; the history warm-up of epoch 1 excluded)."""
    kinds = run.summary.mean_comm_bytes_by_kind
    return sum(kinds.get(k, 0) for k in ("halo_fwd", "halo_bwd", "pipe_fwd", "pipe_bwd"))


def gnnpipe(runs: dict[str, list[Run]], out: Path, scale: str) -> str:
    return "\n".join([_gnnpipe_volume(runs["volume_graph"] + runs["volume_pipe"] + runs["volume_hybrid"]),
                      _gnnpipe_time(runs["time_graph"] + runs["time_pipe"], out)]
                     + ([_gnnpipe_accuracy(runs, out)] if "tricks_all" in runs else []))


def _gnnpipe_volume(runs: list[Run]) -> str:
    rows = []
    for model, paper in GNNPIPE_PAPER.items():
        found = _by_layout(runs, model)
        if "pipeline" not in found or "graph" not in found:
            continue
        pipe = found["pipeline"].summary
        stages, width = pipe.mesh["pp"], found["pipeline"].config["model.hidden"]
        analytic = 2 * (stages - 1) * pipe.num_nodes * width * 4 * (2 if model == "gcnii" else 1)
        ours = {name: data_bytes(run) / GIB for name, run in found.items()}
        g, p, h = paper["volume"]
        rows.append({"model": model, **{f"{LAYOUTS[k]} GiB": fmt(ours.get(k), ".4g") for k in LAYOUTS},
                     "2(S-1)NH GiB": fmt(analytic / GIB, ".4g"),
                     "graph / pipeline": fmt(ours["graph"] / ours["pipeline"], ".1f", "x"),
                     "graph / hybrid": fmt(ours["graph"] / ours["hybrid"], ".1f", "x") if "hybrid" in ours else "-",
                     "paper Table 4, Squirrel: graph / pipeline / hybrid GB": f"{g:.2f} / {p:.2f} / {h:.2f}",
                     "ratio of the paper's figures, computed here": fmt(g / p, ".1f", "x"),
                     "graph all-reduce GiB": fmt(found["graph"].summary.mean_comm_bytes_by_kind.get("allreduce", 0)
                                                 / GIB, ".3g")})
    setting = setting_line(runs[0], model=False)
    return (f"## GNNPipe Table 4: communication volume per epoch\n\nSetting: {setting}, "
            f"{runs[0].config['model.layers']} layers x {runs[0].config['model.hidden']} hidden, "
            f"{runs[0].config['cluster.world_size']} workers: graph parallelism on as many METIS parts, pipeline "
            f"8 x 1, hybrid 4 x 2; chunks 4 x workers (the paper's K = 4M). Volume: halo rows and stage activations with their "
            f"gradients, float32 (the all-reduce of the graph-parallel baseline's gradients is listed apart; "
            f"the pipeline has none).\n\n{markdown(rows)}\n")


GNNPIPE_TARGETS = {"gcn": 1.5, "sage": 1.5, "gcnii": 1.3}
"""The speed-up over graph parallelism each model's pipeline is expected to reach here (the
paper's Table 3's Squirrel rows, ratios computed here: 1.80-2.38x; the paper: "up to 2.45x (on
average 2.03x)", Sec. 4.2); the pipeline's compute is expected within 1.3x of the baseline's."""
COMPUTE_TARGET = 1.3


def stage_parts(run: Run) -> list[dict[str, float]]:
    """Per pipeline stage, its mean compute, communication within its group and bubble (s)."""
    metrics = run.summary.mean_strategy_metrics
    return [{part: metrics[f"stage{s}/{part}"] for part in ("compute", "communication", "bubble")}
            for s in range(run.summary.mesh["pp"])]


def _gnnpipe_time(runs: list[Run], out: Path) -> str:
    rows, breakdown, verdicts, settings = [], {}, [], {}
    start = timed_from(runs)
    for model, paper in GNNPIPE_PAPER.items():
        rounds = _rounds_by_layout(runs, model)
        if "graph" not in rounds:
            continue
        found = {k: rs[0] for k, rs in rounds.items()}
        epoch = {k: median(epoch_time(r, start) for r in rs) for k, rs in rounds.items()}
        speed = {k: speedup(rounds["graph"], rs, start) for k, rs in rounds.items() if k != "graph"}
        compute = {k: median(r.summary.mean_compute_time for r in rs) for k, rs in rounds.items()}
        settings.update({f"{model}, {LAYOUTS[k]}": rs for k, rs in rounds.items()})
        base = account(rounds["graph"], start)
        g, p, h = paper["time"]
        row = {"model": model, "graph-parallel comm share": share_cell(rounds["graph"]),
               **{f"{LAYOUTS[k]} s": fmt(epoch.get(k), ".3g") for k in LAYOUTS},
               "graph / pipeline": str(speed["pipeline"]) if "pipeline" in speed else "-",
               "graph / hybrid": str(speed["hybrid"]) if "hybrid" in speed else "-",
               "paper Table 3, Squirrel: graph / pipeline / hybrid s": f"{g:.2f} / {p:.2f} / {h:.2f}",
               "ratio of the paper's figures, computed here": fmt(g / p, ".2f", "x"),
               "bound: no communication at all": fmt(base.epoch / base.compute, ".2f", "x")}
        if "pipeline" in found:
            stages = stage_parts(found["pipeline"])
            mean_compute = mean(st["compute"] for st in stages)
            rows_mapped = [found[k].summary.mean_strategy_metrics["projected_rows"] for k in ("graph", "pipeline")]
            row.update({"compute graph / pipeline s": f"{compute['graph']:.3g} / {compute['pipeline']:.3g}",
                        "pipeline compute / graph": fmt(compute["pipeline"] / compute["graph"], ".2f", "x"),
                        "mean stage compute / graph": fmt(mean_compute / compute["graph"], ".2f", "x"),
                        "projected rows graph / pipeline": f"{rows_mapped[0]:.0f} / {rows_mapped[1]:.0f}"})
            verdicts.append(_gnnpipe_verdict(model, speed["pipeline"], compute, stages))
        rows.append(row)
        for name, run in found.items():
            summary = run.summary
            if name == "graph":
                breakdown[f"{model} graph"] = {"compute": summary.mean_compute_time,
                                               "communication": summary.mean_epoch_time - summary.mean_compute_time,
                                               "bubble": 0.0}
            else:
                for stage, parts in enumerate(stage_parts(run)):
                    breakdown[f"{model} {name} stage {stage}"] = parts
    _stacked(breakdown, out / "breakdown.png", figure_setting(runs[0], model=False))
    first = runs[0].config
    return (f"## GNNPipe Table 3 / Fig. 8: epoch time on deep models\n\nSetting: {setting_line(runs[0], model=False)} "
            f"(each model's links calibrated to its own graph-parallel run, so the bandwidth differs per model), "
            f"{first['model.layers']} layers x {first['model.hidden']} hidden, {first['cluster.world_size']} workers "
            f"(pipeline {first['cluster.world_size']} x 1, hybrid {first['cluster.world_size'] // 2} x 2, "
            f"K = 4 x workers chunks). Timed on the {one_clock(runs)} clock. {timing_note(runs, start)} Epoch "
            f"times: the median over the rounds; compute: mean over ranks (the accounting below), and the mean of "
            f"the pipeline's stages; the graph-parallel comm share is GNNPipe Table 1's communication overhead "
            f"(communication time over training time; here every exposed training transfer, gradient all-reduces "
            f"included, as the paper does not set them apart); no communication at all: the baseline's epoch over "
            f"its compute, what a method that keeps its compute and drops every transfer, the all-reduce with "
            f"them, reaches.\n\n{markdown(rows)}\n"
            + "".join(f"- {v}\n" for v in verdicts)
            + f"\n{accounting_table(settings, start)}"
            + "\nBreakdown (Fig. 8's shape, per pipeline stage: the mean over its ranks): compute; communication "
              "(graph-parallel: exposed waits; a hybrid stage: its group's halo exchanges and all-reduce); bubble = "
              "time blocked on a neighbouring stage, with any transfer still under way.\n\n"
              "![breakdown](breakdown.png)\n")


def _gnnpipe_verdict(model: str, speed: Ratio, compute: dict[str, float], stages: list[dict[str, float]]) -> str:
    """One line per model: the targets met or missed, with the stage profile where compute is."""
    ratio = compute["pipeline"] / compute["graph"]
    goal = GNNPIPE_TARGETS[model]
    line = (f"{model}: speed-up {speed}, target >= {goal}x {speed.met(goal)}; "
            f"pipeline compute {ratio:.2f}x the baseline's, target <= {COMPUTE_TARGET}x "
            f"{'met' if ratio <= COMPUTE_TARGET else 'MISSED'}")
    if ratio > COMPUTE_TARGET:
        per_stage = ", ".join(f"{st['compute']:.3g}" for st in stages)
        slowest = max(range(len(stages)), key=lambda s: stages[s]["compute"])
        line += (f" on its slowest stage, stage {slowest} (stage compute s: {per_stage}; their mean is "
                 f"{mean(st['compute'] for st in stages) / compute['graph']:.2f}x the baseline's)")
        if slowest == 0:
            line += (": stage 0 also maps every node's input features, work the graph-parallel "
                     "ranks share four ways, while the layers are split evenly by count")
    return line


def _stacked(parts: dict[str, dict[str, float]], path: Path, setting: str) -> None:
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(parts)), 4.5))
    bottom = [0.0] * len(parts)
    for key in ("compute", "communication", "bubble"):
        values = [p[key] for p in parts.values()]
        ax.bar(range(len(parts)), values, bottom=bottom, label=key)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(parts)), list(parts), rotation=30, ha="right", fontsize="small")
    ax.set_ylabel("s per epoch")
    ax.set_ylim(0, max(bottom) * 1.08)
    ax.set_title(f"GNNPipe Fig. 8 in shape: epoch time breakdown per stage\n{setting}", fontsize="medium")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


TRICK_VARIANTS = {"all tricks": "tricks_all", "no shuffling": "tricks_no_shuffle",
                  "historical gradients": "tricks_no_detach", "no fixed history": "tricks_no_fixed",
                  "no tricks": "tricks_none"}
REACH = 0.95
"""Convergence speed: the first evaluation at which a variant's validation accuracy (mean of the
seeds) reaches this fraction of the graph-parallel baseline's best (mean of the seeds)."""
LATE_EPOCHS = 50
"""Final accuracy beside the test score: the mean validation accuracy over the last this many
epochs, which a lucky evaluation moves less than the best one."""


def val_curve(runs: list[Run]) -> dict[int, float]:
    """Validation accuracy (%) per evaluated epoch, the mean of ``runs`` (seeds)."""
    per_run = [{r.epoch: r.val_acc * 100 for r in run.records if r.val_acc is not None} for run in runs]
    epochs = sorted(set.intersection(*(set(s) for s in per_run)))
    return {e: mean(s[e] for s in per_run) for e in epochs}


def largest_drop(run: Run) -> float:
    """The largest fall (points) of a run's validation accuracy between two consecutive evaluations."""
    vals = [r.val_acc * 100 for r in run.records if r.val_acc is not None]
    return max([0.0, *(a - b for a, b in zip(vals, vals[1:]))])


def convergence_rows(variants: dict[str, list[Run]], baseline: list[Run]) -> list[dict]:
    """Fig. 7's three claims measured per variant: convergence speed (the epoch reaching
    :data:`REACH` of the baseline's best), stability (the largest drop between evaluations, mean
    over seeds), final accuracy (validation over the last :data:`LATE_EPOCHS` epochs and test
    at the best validation epoch)."""
    target = REACH * max(val_curve(baseline).values())
    rows = []
    for label, runs in {"graph-parallel": baseline, **variants}.items():
        curve = val_curve(runs)
        last = max(curve)
        reached = next((e for e, v in curve.items() if v >= target), None)
        rows.append({"variant": label, f"epoch reaching {target:.1f}% val": "never" if reached is None else reached,
                     "largest val drop (points)": mean_sd([largest_drop(r) for r in runs]),
                     f"val over the last {LATE_EPOCHS} epochs (%)": fmt(
                         mean(v for e, v in curve.items() if e > last - LATE_EPOCHS), ".2f"),
                     "test at best val (%)": mean_sd([test_score(r) for r in runs])})
    return rows


def _gnnpipe_accuracy(runs: dict[str, list[Run]], out: Path) -> str:
    datasets = sorted({r.config["dataset.name"] for r in runs["tricks_all"]})
    scores = lambda found: [test_score(r) for r in found]  # noqa: E731
    rows, convergence = [], ""
    for dataset in datasets:
        baseline = select(runs["accuracy_graph"], dataset__name=dataset)
        graph = scores(baseline)
        variants = {label: select(runs[sweep], dataset__name=dataset) for label, sweep in TRICK_VARIANTS.items()
                    if select(runs.get(sweep, []), dataset__name=dataset)}
        row = {"dataset": dataset, "graph-parallel": mean_sd(graph)}
        for label in TRICK_VARIANTS:
            found = scores(variants.get(label, []))
            row[f"GNNPipe, {label}"] = mean_sd(found)
            if found and label in ("all tricks", "no tricks"):
                row[f"{label} vs graph (points)"] = fmt(mean(found) - mean(graph), "+.2f")
        rows.append(row)
        convergence += f"{dataset}:\n\n{markdown(convergence_rows(variants, baseline))}\n"
        curves({"graph-parallel": baseline, **variants}, out / f"tricks_{dataset}.png",
               f"GNNPipe Figs. 6-7 in shape: GCNII on {dataset} (mean of seeds)")
    first = runs["tricks_all"][0]
    seeds = len(select(runs["tricks_all"], dataset__name=datasets[0]))
    return (f"## GNNPipe Figs. 6-7: accuracy and the three tricks\n\nSetting: GCNII "
            f"{first.config['model.layers']} x {first.config['model.hidden']}, {first.config['train.epochs']} epochs, "
            f"{first.config['cluster.world_size']} workers (GNNPipe: {first.summary.mesh['pp']} stages, "
            f"{first.summary.partition['parts']} chunks, alpha {first.config['strategy.alpha']}); test accuracy (%) "
            f"at the best validation epoch, mean ± sd over {seeds} seeds. Disabling a trick: shuffling off (fixed "
            f"chunk order), historical gradients on (detach_history=false), history refreshed every epoch "
            f"(fixed_history=false).\n\n{markdown(rows)}\n"
            f"Fig. 7's claims (Sec. 4.5: the version with all tricks \"converges at the fastest speed, exhibits the "
            f"best training stability (i.e., less fluctuation), and achieves the highest final model accuracy\"), "
            f"measured per variant: the first evaluation whose validation accuracy (mean of the seeds) reaches "
            f"{REACH:.0%} of the graph-parallel baseline's best; the largest fall between two consecutive "
            f"evaluations (mean ± sd over the seeds); validation accuracy over the last {LATE_EPOCHS} epochs (mean "
            f"of the seeds), beside the test score at the best validation epoch, which one lucky evaluation can "
            f"lift.\n\n{convergence}"
            + "".join(f"![{d}](tricks_{d}.png)\n" for d in datasets))


PAPER = Paper(
    name="gnnpipe", sweeps=SWEEPS, speed=("time_graph", "time_pipe"), tables=gnnpipe, trusting=("time_pipe",),
    curve=Curve(("experiment=gnnpipe_table3", "model=gcn"), ("strategy=vanilla",),
                ("strategy=gnnpipe", "strategy.graph_parallel=1"), ("time_graph", "time_pipe"),
                "GNNPipe (pipeline) over graph parallelism, GCN",
                0.665, 2.03, "share 66.5% on average (Fig. 8, Sec. 4.6), speed-up 2.03x on average "
                             "(geometric mean, Sec. 4.2)", removes=True),
    reference='Jingji Chen, Zhuoming Chen, Xuehai Qian. "GNNPipe: Accelerating Distributed Full-Graph GNN '
              'Training with Pipelined Model Parallelism." arXiv preprint, 2023. '
              'https://arxiv.org/abs/2308.10087',
)

"""Does the predictor pick the right method? (``make predict-choose``, docs/testing.md)

For each of 24 settings (a graph size x ranks x link x model; none of them a cell of ``make
predict-check``), every registered method is predicted with ``gnntrain-predict``'s code (compute
from each method's profiled steps, :mod:`gnntrain.predict.step_fit`) and then run on the virtual
clock with the ranks taking turns (``cluster.virtual_compute=alone``); six of the settings are run
again on kernel-shaped TCP (``network.mode=kernel``, the wall clock), predicted with the link
presets ``gnntrain-measure-link`` measured for those links, so that the link model is not judged
by itself. Per setting the predictor's pick is the predicted fastest of the methods that fit
a node, and its regret is

    regret = measured epoch of the pick / measured epoch of the measured best,

beside the regret of always running vanilla and of always running the one method that is
measured best most often. Targets (the issue's): median regret <= 1.05, worst <= 1.25. Results
in ``results/predict_choose.json`` (written after every setting) and ``results/predict_choose.png``.

Settings: synthetic graphs of one kind (average degree 10, 128 features, 16 classes) at 4,000 and
16,000 nodes, so that one step fit serves both sizes; 2 and 4 ranks; links of 10, 1 and 0.1 Gbit/s
(20 us); GraphSAGE 2 x 64 and GCN 3 x 128; 8 epochs, the first 4 left out (as the fits read
them). HopGNN runs without merging and GNNPipe where it has a layer per stage, as in
predict-check. A method a setting refuses (GNNPipe's 4 stages on 2 layers, a mini-batch larger
than the training nodes) is left out of that setting, on both sides.

Usage: ``python scripts/predict_choose.py [--settings N] [--no-kernel] [--resume] [--plot-only]``
(``--resume`` keeps the settings ``--out`` already holds; ``--plot-only`` draws the figure again
from them and runs nothing). The kernel-shaped links carry no added latency
(``network.latency_us=0``: netem is missing from some kernels, this host's among them), as the
presets describing them were measured.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
from collections import Counter
from pathlib import Path

from gnntrain.cost.compute import Costs
from gnntrain.cost.profile import profile_for
from gnntrain.cost.shape import partition_shape
from gnntrain.errors import ConfigError
from gnntrain.job import api
from gnntrain.job.memory import available_mb
from gnntrain.job.step_profile import step_fit
from gnntrain.predict.predictor import peak_mb, predicted, written
from gnntrain.repro.jobs import git_commit, run_job
from gnntrain.strategies import METHODS, method
from gnntrain.timing.cluster import Topology

RESULTS = Path(__file__).resolve().parents[1] / "results"
GRAPH = ["dataset=synthetic", "dataset.avg_degree=10", "dataset.num_features=128", "dataset.num_classes=16"]
SIZES = (4000, 16000)
RANKS = (2, 4)
LINKS_GBPS = (10.0, 1.0, 0.1)
MODELS = {"sage-2x64": ["model=sage", "model.hidden=64", "model.layers=2"],
          "gcn-3x128": ["model=gcn", "model.hidden=128", "model.layers=3"]}
KERNEL = {0.2: "measured_tcp_0g2", 1.0: "measured_tcp_1g"}
"""Kernel-shaped links and the presets measured on them (conf/network/)."""
KERNEL_SETTINGS = [(size, 2, gbps, model) for size in SIZES for gbps in KERNEL for model in ("sage-2x64",)] + \
    [(16000, 2, gbps, "gcn-3x128") for gbps in KERNEL]
EPOCHS, WARMUP = 8, 4
OWN = {"hopgnn": ["strategy.merge=false"]}
TARGETS = {"median_regret": 1.05, "worst_regret": 1.25}


def setting_overrides(size: int, ranks: int, model: str) -> list[str]:
    return [*GRAPH, f"dataset.num_nodes={size}", *MODELS[model], f"cluster.world_size={ranks}",
            f"train.epochs={EPOCHS}", f"train.warmup_epochs={WARMUP}", f"train.eval_every={EPOCHS}"]


def prediction(overrides: list[str], network: list[str]) -> tuple[float, bool]:
    """The predicted steady epoch of ``overrides`` on ``network`` and whether its ranks fit here."""
    run = api.check(api.compose([*overrides, *network]))
    shape = partition_shape(run, method(run.strategy.name).strategy.layout(run, run.cluster.world_size).parts)
    profile = profile_for("cpu", run.partition.cache_dir)
    fitted = step_fit(overrides, run, shape, profile)
    line = written(run, shape, Costs(run, shape.features, shape.classes, profile), step_fit=fitted)
    fits = max(peak_mb(run, shape)) * run.cluster.world_size <= available_mb()
    return predicted(line, Topology.of(run.network)).epoch_time, fits


def measured(overrides: list[str], network: list[str]) -> float:
    return run_job([*overrides, *network]).summary.mean_epoch_time


def judged(methods: dict[str, dict]) -> dict:
    """A setting's pick, best and regret from its methods' predicted and measured epochs."""
    fitting = {m: v for m, v in methods.items() if v["fits"]}
    pick = min(fitting, key=lambda m: fitting[m]["predicted_s"])
    best = min(methods, key=lambda m: methods[m]["measured_s"])
    return {"pick": pick, "best": best, "regret": methods[pick]["measured_s"] / methods[best]["measured_s"]}


def link_name(kernel: bool) -> str:
    return "kernel TCP (wall clock)" if kernel else "modelled (virtual clock)"


def setting_row(size: int, ranks: int, gbps: float, model: str, kernel: bool, strategies: list[str]) -> dict:
    base = setting_overrides(size, ranks, model)
    if kernel:
        predict_net = [f"network={KERNEL[gbps]}"]
        run_net = ["network=none", "network.mode=kernel", f"network.bandwidth_gbps={gbps}", "network.latency_us=0",
                   "cluster.clock=wall"]
    else:
        predict_net = run_net = ["network=eth10g", f"network.bandwidth_gbps={gbps}", "network.latency_us=20",
                                 "cluster.clock=virtual", "cluster.virtual_compute=alone"]
    methods, refused = {}, {}
    for strategy in strategies:
        overrides = [*base, f"strategy={strategy}", *OWN.get(strategy, [])]
        try:
            predicted_s, fits = prediction(overrides, predict_net)
        except ConfigError as exc:
            refused[strategy] = str(exc)
            continue
        methods[strategy] = {"predicted_s": predicted_s, "fits": fits, "measured_s": measured(overrides, run_net)}
    row = {"nodes": size, "ranks": ranks, "bandwidth_gbps": gbps, "model": model, "link": link_name(kernel),
           "methods": methods,
           "refused": refused, **judged(methods)}
    best = methods[row["best"]]["measured_s"]
    row["vanilla_regret"] = methods["vanilla"]["measured_s"] / best
    return row


def summary(rows: list[dict]) -> dict:
    wins = Counter(r["best"] for r in rows)
    most, count = wins.most_common(1)[0]
    fixed = [r["methods"][most]["measured_s"] / r["methods"][r["best"]]["measured_s"] for r in rows
             if most in r["methods"]]
    regrets = [r["regret"] for r in rows]
    return {"settings": len(rows), "median_regret": statistics.median(regrets), "worst_regret": max(regrets),
            "picked_best": sum(r["pick"] == r["best"] for r in rows),
            "vanilla_median_regret": statistics.median(r["vanilla_regret"] for r in rows),
            "vanilla_worst_regret": max(r["vanilla_regret"] for r in rows),
            "most_often_best": most, "most_often_best_settings": count,
            "most_often_best_median_regret": statistics.median(fixed), "most_often_best_worst_regret": max(fixed),
            "measured_best": dict(wins), "targets": TARGETS}


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = range(len(rows))
    most = summary(rows)["most_often_best"]
    ax.plot(x, [r["regret"] for r in rows], "o", label="predictor's pick")
    ax.plot(x, [r["vanilla_regret"] for r in rows], "x", label="always vanilla")
    ax.plot(x, [r["methods"][most]["measured_s"] / r["methods"][r["best"]]["measured_s"] if most in r["methods"]
                else float("nan") for r in rows], "+", label=f"always {most}")
    ax.axhline(TARGETS["worst_regret"], color="grey", ls="--", lw=0.8, label="worst-case target 1.25")
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set(yscale="log", xlabel="setting", ylabel="measured epoch / measured best",
           title="The predictor's pick against the measured best, per setting\n(epochs on the virtual clock; the /tcp settings on kernel-shaped TCP, the wall clock)")
    ax.set_xticks(list(x), [f"{r['nodes'] // 1000}k/{r['ranks']}/{r['bandwidth_gbps']:g}G/{r['model'][:4]}"
                            + ("/tcp" if r["link"].startswith("kernel") else "") for r in rows],
                  rotation=90, fontsize=6)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", type=int, default=None, help="only the first N settings (a trial)")
    parser.add_argument("--no-kernel", action="store_true", help="leave out the kernel-shaped TCP settings")
    parser.add_argument("--strategies", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "predict_choose.json")
    parser.add_argument("--resume", action="store_true", help="keep the settings --out holds, run the others")
    parser.add_argument("--plot-only", action="store_true", help="draw the figure again from --out's rows; run nothing")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(args.out.read_text())["rows"], args.out.with_suffix(".png"))
        return
    strategies = args.strategies or sorted(METHODS)
    settings = [(size, ranks, gbps, model, False) for size, ranks, gbps, model in
                itertools.product(SIZES, RANKS, LINKS_GBPS, MODELS)]
    settings += [] if args.no_kernel else [(*s, True) for s in KERNEL_SETTINGS]
    settings = settings[:args.settings]
    rows = json.loads(args.out.read_text())["rows"] if args.resume and args.out.exists() else []
    held = {(r["nodes"], r["ranks"], r["bandwidth_gbps"], r["model"], r["link"]) for r in rows}
    started = time.perf_counter()
    for done, setting in enumerate(settings, 1):
        if (*setting[:4], link_name(setting[4])) in held:
            continue
        row = setting_row(*setting, strategies)
        rows.append(row)
        print(f"[{done}/{len(settings)}] {row['nodes']} nodes x{row['ranks']} {row['bandwidth_gbps']:g} Gbit/s "
              f"{row['model']} {row['link']}: pick {row['pick']}, best {row['best']}, regret {row['regret']:.3f} "
              f"(vanilla {row['vanilla_regret']:.3f})", flush=True)
        args.out.write_text(json.dumps({"commit": git_commit(), "settings": {
            "graph": GRAPH, "sizes": SIZES, "ranks": RANKS, "links_gbps": LINKS_GBPS, "models": MODELS,
            "kernel": {str(k): v for k, v in KERNEL.items()}, "epochs": EPOCHS, "warmup_epochs": WARMUP,
            "own": OWN}, "summary": summary(rows), "rows": rows, "wall_s": time.perf_counter() - started}, indent=1))
    plot(rows, args.out.with_suffix(".png"))
    print(json.dumps(summary(rows), indent=1))


if __name__ == "__main__":
    main()

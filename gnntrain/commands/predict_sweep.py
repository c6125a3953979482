"""What ``gnntrain-predict`` (:mod:`gnntrain.commands.predict`) does with its parsed arguments:
each setting composed, its partition shaped, each method priced on the described cluster, the
table printed and the plot and JSON written."""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from gnntrain.config.typed import plain
from gnntrain.data.phases import left, note, phase, quiet
from gnntrain.errors import ConfigError, DatasetUnavailable, GnntrainError, command_errors, interrupt
from gnntrain.job import api
from gnntrain.job.memory import available_mb
from gnntrain.job.step_profile import step_fit
from gnntrain.cost.compute import Costs
from gnntrain.cost.memory import RUNTIME_MB, partition_peak_mb
from gnntrain.predict.predictor import EPOCHS, peak_mb, predicted, written
from gnntrain.timing.epoch import EpochTiming
from gnntrain.cost.profile import measure, profile_for, save, saved_name
from gnntrain.cost.shape import PartitionShape, partition_shape, proxy_shape
from gnntrain.commands.replay import bandwidths
from gnntrain.timing.cluster import at_bandwidth
from gnntrain.strategies import method
from gnntrain.timing.cluster import Topology
from gnntrain.storage.files import save_figure, write_atomically


def jobs(overrides: list[str]) -> list[list[str]]:
    """Each setting's overrides: the cartesian product of the comma lists (Hydra's sweep syntax)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] if o.is_discrete_sweep()
               else [o.input_line] for o in parsed]
    return [list(job) for job in itertools.product(*choices)]


def graph_overrides(args: argparse.Namespace) -> list[str]:
    """The proxy's dataset overrides for a graph given by its statistics."""
    given = [args.nodes, args.edges, args.features, args.classes]
    if all(v is None for v in given):
        return []
    if any(v is None for v in given) or min(given) < 1:
        raise GnntrainError("--nodes, --edges, --features and --classes describe a graph together; valid: all four, "
                            "positive")
    if args.proxy_nodes < 1:
        raise GnntrainError(f"--proxy-nodes {args.proxy_nodes}: valid: a positive count")
    proxy_nodes = min(args.proxy_nodes, args.nodes)
    proxy_edges = round(proxy_nodes * args.edges / args.nodes)
    needed, here = partition_peak_mb(proxy_nodes, proxy_edges, args.features, "float32"), available_mb()
    if needed > here:
        fitting = int(proxy_nodes * (here - RUNTIME_MB["started"]) / max(needed - RUNTIME_MB["started"], 1.0))
        raise GnntrainError(f"--proxy-nodes {args.proxy_nodes}: building its proxy of {proxy_nodes} nodes and "
                            f"{proxy_edges} edges takes an estimated {needed / 1024:.1f} GiB, this machine has "
                            f"{here / 1024:.1f} GiB available; valid: --proxy-nodes <= about {max(fitting, 0)}")
    return ["dataset=synthetic", f"dataset.num_nodes={proxy_nodes}",
            f"dataset.avg_degree={args.edges / args.nodes}", f"dataset.num_features={args.features}",
            f"dataset.num_classes={args.classes}"]


def shape_for(run, args: argparse.Namespace, cache: dict) -> PartitionShape:
    """The run's partition shape, scaled from the proxy to ``--nodes`` where given. A dataset
    whose files are not here is refused in one line that offers the route without them: its
    statistics, ``--nodes --edges --features --classes``."""
    parts = method(run.strategy.name).strategy.layout(run, run.cluster.world_size).parts
    key = (json.dumps(plain(run.dataset), sort_keys=True, default=str), run.partition.method, parts, run.seed)
    if key not in cache:
        try:
            cache[key] = (proxy_shape(run, parts, args.nodes, args.edges) if args.nodes is not None
                          and args.nodes > run.dataset.num_nodes else partition_shape(run, parts))
        except DatasetUnavailable as exc:
            raise DatasetUnavailable(
                f"{exc}; or predict without its files, from its statistics: drop dataset={run.dataset.name} and give "
                "--nodes N --edges E --features F --classes C (directed edges; docs/usage.md shows ogbn-products' "
                "as an example)") from None
    return cache[key]


def without_download(overrides: list[str]) -> list[str]:
    """The override that keeps a prediction from downloading a dataset (it answers before any
    training, from the files that are here or from a graph's statistics), unless the user set it."""
    return [] if any(o.lstrip("+~").startswith("dataset.download=") for o in overrides) else ["dataset.download=false"]


def _varying(settings: list[list[str]]) -> set[str]:
    """The overrides that differ between the settings (the strategy's always counted)."""
    keys = {o.split("=", 1)[0] for job in settings for o in job}
    varying = {k for k in keys if len({o for job in settings for o in job if o.split("=", 1)[0] == k}) > 1}
    return {o for job in settings for o in job if o.split("=", 1)[0] in varying | {"strategy"}}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.4g}"


def _kinds(figures: dict[str, float], unit, fmt) -> str:
    shown = {k: v for k, v in figures.items() if v > 0}
    return ", ".join(f"{k} {fmt(unit(v))}" for k, v in shown.items()) or "none"


@dataclass(frozen=True)
class Predicted:
    """One method in one setting: its predicted epoch and each rank's estimated peak (MiB)."""

    setting: str
    strategy: str
    timing: EpochTiming
    peak_mb: list[float]

    def to_dict(self) -> dict:
        return {"setting": self.setting, "strategy": self.strategy, **self.timing.to_dict(), "peak_mb": self.peak_mb}


def table(setting: str, predictions: list[Predicted], ranks_per_node: int, node_mb: float) -> str:
    """The setting's methods that fit a node, ranked by epoch time, the fastest named; those that
    do not, listed apart."""
    lines = [f"\n{setting}", f"  {'rank':>4}  {'strategy':<14}{'epoch ms':>10}{'compute':>10}{'exposed':>10}"
                             f"{'MiB/epoch':>11}{'peak GiB':>10}"]
    ranked = sorted(predictions, key=lambda p: p.timing.epoch_time)
    fitting = [p for p in ranked if max(p.peak_mb, default=0.0) * ranks_per_node <= node_mb]
    for place, p in enumerate(fitting, 1):
        e = p.timing
        lines.append(f"  {place:>4}  {p.strategy:<14}{_ms(e.epoch_time):>10}{_ms(e.compute_time):>10}"
                     f"{_ms(e.exposed_time):>10}{e.comm_bytes / 2**20:>11.4g}{max(p.peak_mb) / 1024:>10.3g}")
    for p in ranked:
        if p not in fitting:
            lines.append(f"     -  {p.strategy:<14}does not fit: {ranks_per_node} x "
                         f"{max(p.peak_mb) / 1024:.3g} GiB per node, {node_mb / 1024:.3g} GiB there; not ranked")
    lines.append(f"  predicted fastest: {fitting[0].strategy}" if fitting else "  predicted fastest: none fits a node")
    for p in ranked:
        e = p.timing
        exposed = {k: e.exposed(k) for k in e.wait_by_kind}
        lines.append(f"  {p.strategy}: exposed ms: {_kinds(exposed, lambda v: v * 1e3, '{:.3g}'.format)}; "
                     f"hidden ms: {_kinds(e.hidden_by_kind, lambda v: v * 1e3, '{:.3g}'.format)}; "
                     f"MiB: {_kinds(e.bytes_by_kind, lambda v: v / 2**20, '{:.4g}'.format)}")
    return "\n".join(lines)


PUBLISHED = Path(__file__).resolve().parents[2] / "results" / "predict_check.json"
"""The predictor's error, published by ``make predict-check``."""


def stated_error(path: Path = PUBLISHED) -> str:
    """The predictor's published error (``make predict-check``) in one line, per regime."""
    try:
        check = json.loads(path.read_text())
        figures = check["summary"]
        regimes = "; ".join(f"{regime} cells: median {v['full_graph_median_error']:.1%}, worst "
                            f"{v['full_graph_worst_error']:.1%} ({v['cells']})"
                            for regime, v in figures.get("by_regime", {}).items())
        return (f"stated error (make predict-check at {check['commit']}, epoch predicted against run): full-graph "
                f"median {figures['full_graph_median_error']:.1%}, worst {figures['full_graph_worst_error']:.1%}"
                + (f"; {regimes}" if regimes else "")
                + (f"; mini-batch median {figures['minibatch_median_error']:.1%}"
                   if figures.get("minibatch_median_error") is not None else ""))
    except (OSError, ValueError, KeyError, TypeError):
        return f"stated error: none published ({path} not found or unreadable: run make predict-check)"


def _plot(curves: dict[str, list[tuple[float, float]]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours = plt.get_cmap("tab20")
    for i, (name, points) in enumerate(curves.items()):
        ax.plot([x for x, _ in points], [y * 1e3 for _, y in points], marker=".", label=name, color=colours(i % 20))
    ax.set(xscale="log", yscale="log", xlabel="link bandwidth (Gbit/s)", ylabel="predicted epoch (ms, virtual clock)",
           title=title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


LARGE_WORLD = 64
"""From this many ranks a setting's pricing takes seconds to minutes (13 s at 256 ranks, 58 s at 1,024
here), and shows its progress (:func:`pricing`)."""


@contextmanager
def pricing(run, what: str, total: int) -> Iterator[Callable[..., None]]:
    """A step of pricing ``run`` (``total`` units, counted by calling what it yields, with a count
    where it is not 1): shown as
    a phase (:func:`gnntrain.data.phases.phase`: a bar on a terminal, one line when it ends) where
    the world is :data:`LARGE_WORLD` ranks or more, silent below."""
    if run.cluster.world_size < LARGE_WORLD:
        yield lambda amount=1: None
        return
    with phase(f"predict {run.strategy.name} on {run.cluster.world_size} ranks: {what}", total) as shown:
        yield shown.advance


def predict(args: argparse.Namespace) -> None:
    """Predict every setting ``args`` sweeps and print (and write) the figures."""
    with command_errors("gnntrain-predict"):
        signal.signal(signal.SIGTERM, interrupt)  # a stop ends it in one line; profiling runs stop their workers
        with quiet(args.quiet):
            _predict(args)


def _predict(args: argparse.Namespace) -> None:
    """:func:`predict`'s work, inside its errors' handling."""
    if args.measure_profile:
        run = api.check(api.compose(list(args.overrides)))
        device = torch.device("cuda", 0) if run.cluster.device == "cuda" else torch.device("cpu")
        with phase(f"measure the device profile of {device} (micro-benchmarks)"):
            measured = measure(device)
        print(f"profile of {device}: {save(measured)} (--device {saved_name(device)})")
        return
    started = time.perf_counter()
    points = bandwidths(args.bandwidths)
    settings = jobs(list(args.overrides) + graph_overrides(args) + without_download(list(args.overrides)))
    shapes: dict = {}
    profiled = args.compute == "profiled" and args.device == "cpu"
    results, curves = [], {}
    varying = _varying(settings)
    refused = []
    for done, overrides in enumerate(settings):
        if len(settings) > 1:  # each setting may take seconds (a dataset to build, steps to profile)
            elapsed = time.perf_counter() - started
            note(f"gnntrain-predict: setting {done + 1}/{len(settings)}: "
                 f"{' '.join(o for o in overrides if o in varying) or '(defaults)'} ({elapsed:.0f} s so far"
                 f"{left(elapsed, done, len(settings))})", sys.stdout)
        try:
            run = api.check(api.compose(overrides))
            profile = profile_for(args.device, run.partition.cache_dir)
            shape = shape_for(run, args, shapes)
            fitted = (step_fit(overrides, run, shape, profile, args.reprofile) if profiled else None)
            with pricing(run, f"{EPOCHS} epochs written", EPOCHS) as advance:
                line = written(run, shape, Costs(run, shape.features, shape.classes, profile, args.cores),
                               step_fit=fitted, on_epoch=advance)
        except ConfigError as exc:
            if len(settings) == 1:
                raise
            refused.append(f"{' '.join(o for o in overrides if o in varying)}: not predicted: {exc}")
            continue
        setting = " ".join(o for o in overrides if o in varying and not o.startswith("strategy="))
        curved = run.network.bandwidth_gbps is not None and (args.plot is not None or args.json is not None)
        networks = [run.network, *(at_bandwidth(run.network, g) for g in points if curved)]
        with pricing(run, f"{line.events} events replayed on {len(networks)} network(s)",
                     line.events * len(networks)) as advance:
            timings = [predicted(line, Topology.of(network), advance) for network in networks]
        results.append(Predicted(setting, run.strategy.name, timings[0], peak_mb(run, shape)))
        if curved:
            label = " ".join(o.split("=", 1)[1] if o.startswith("strategy=") else o
                             for o in overrides if o in varying)
            curves[label or run.strategy.name] = [(float(g), t.epoch_time) for g, t in zip(points, timings[1:])]
    if not results:
        raise ConfigError(f"none of the {len(settings)} settings can be predicted: {'; '.join(refused)}")
    ranks_per_node = run.network.gpus_per_node or 1
    node_mb = args.node_memory_gib * 1024 if args.node_memory_gib else (
        available_mb() if args.device == "cpu" else profile.memory_gib * 1024)
    ranks = ("ranks as each setting says" if any(o.startswith("cluster.world_size=") for o in varying)
             else f"{run.cluster.world_size} ranks")
    compute = ("compute from each method's steps profiled here" if profiled else
               f"compute counted, priced by the {args.device} profile ({profile.source})"
               + ("" if args.device == "cpu" else "; no step of a method profiled on it"))
    where = (f"{ranks}, {ranks_per_node} per node; device {args.device}"
             f"{f' ({args.cores} core(s) per rank)' if args.device == 'cpu' else ''}; {node_mb / 1024:.1f} GiB per node"
             f"; {compute}"
             + (f"; graph of {args.nodes} nodes, {args.edges} edges through a proxy of "
                f"{min(args.proxy_nodes, args.nodes)}" if args.nodes else ""))
    print(f"gnntrain-predict: {where}; epochs on the virtual clock, means over ranks")
    print(stated_error() if profiled else "stated error: predict-check publishes the profiled compute's only; "
          "counted compute was a median 23% low there before steps were profiled")
    for setting, group in itertools.groupby(sorted(results, key=lambda r: r.setting), key=lambda r: r.setting):
        print(table(setting or "(defaults)", list(group), ranks_per_node, node_mb))
    for line_refused in refused:
        print(f"\n{line_refused}")
    if curves and args.plot is not None:
        _plot(curves, args.plot, where)
        print(f"\nplot of the epoch against the link bandwidth: {args.plot}")
    if args.json is not None:
        write_atomically(args.json, json.dumps({"cluster": where, "predictions": [
            p.to_dict() for p in results], "curves": curves}, indent=1))
    print(f"predicted in {time.perf_counter() - started:.1f} s")


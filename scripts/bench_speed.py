"""Benchmark: where the papers' methods lost speed, each row measured side by side in one run.

1. **Quantization codec.** Encoding and decoding one halo message (``--codec-rows`` rows of
   ``--codec-dim`` float32 values at 2 bits) against reading the message twice from memory (two
   copies of it), with the stochastic-rounding noise drawn alone as the generator's floor.
2. **AdaQP at 2 bits vs vanilla.** The bench graph on ``--workers`` workers, mean epoch time of
   fixed 2-bit AdaQP over vanilla's, on the real loopback (wall clock) and on a described
   10 Gbit/s link (``network=eth10g``, the virtual clock).
3. **Adaptive bit assignment.** AdaQP's adaptive widths reassigned every ``--period`` epochs:
   the assignment time per reassignment, its share of training time at the paper's period 50
   (``a / (50 t + a)`` with ``t`` the epoch time without assignment), the slowest solve against
   one epoch, and the largest certified gap to the MILP optimum. On a large synthetic instance
   the rounded relaxation is also compared with HiGHS' branch and bound.
4. **GAT vs PyG's GATConv**, single process, same graph (``scripts/bench.py``'s comparison).
5. **CPU dropout.** Single-process full-graph epochs of the same model on a ``--dropout-nodes``
   graph with dropout 0 and 0.5: ours with keyed masks (:func:`gnntrain.rng.random16.dropout`), the
   same with masks drawn from the generator's stream (gnntrain's before keyed masks), and
   torch's ``F.dropout``, in the same model: the extra time dropout adds to an epoch.
6. **GPU communication timing**: where a CUDA device is present, vanilla on 2 workers sharing it
   (gloo) with its device-timed exposed and in-flight communication; otherwise not measured.

The single-process rows run with :func:`gnntrain.job.launch.allocator.keep_freed_memory`, as every worker
does by default; row 2 also times vanilla with ``cluster.keep_freed_memory=false``.

Results go to ``results/bench_speed.json``, each row with the commit it was measured at.
Usage: ``python scripts/bench_speed.py [--workers 4] [--rows dropout ...] ...``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

import gnntrain.models.gnn as gnn_module
from gnntrain.job.launch.allocator import keep_freed_memory
from gnntrain.comm.quantized_exchange import WidthLayout, decode, encode
from gnntrain.data.synthetic import generate
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models import build_model, model_spec
from gnntrain.models.gnn import step_key
from gnntrain.rng.random16 import LEVELS, _Dropout, uniform16, unit_noise
from gnntrain.strategies.graph_parallel.bit_assignment import PairGroups, assign_bits, group_messages

from bench import compare_model
from gnntrain.repro.jobs import add_bench_args, bench_overrides, describe_bench, git_commit, run_job

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench_speed.json"


def median_time(step: Callable[[], object], repeats: int) -> float:
    step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def codec_row(args: argparse.Namespace) -> dict:
    rows = torch.randn(args.codec_rows, args.codec_dim, generator=torch.Generator().manual_seed(0))
    bits = torch.full((args.codec_rows,), 2)
    splits = [args.codec_rows // 3, args.codec_rows // 3, args.codec_rows - 2 * (args.codec_rows // 3)]
    generator = torch.Generator().manual_seed(1)
    layout = WidthLayout.of(bits, splits)
    buffer = encode(rows, layout, generator)
    row = {"rows": args.codec_rows, "dim": args.codec_dim, "bits": 2,
           "read_twice_s": 2 * median_time(rows.clone, args.repeats),
           "encode_s": median_time(lambda: encode(rows, layout, generator), args.repeats),
           "decode_s": median_time(lambda: decode(buffer, layout, args.codec_dim), args.repeats),
           "noise_s": median_time(lambda: unit_noise(tuple(rows.shape), generator), args.repeats)}
    row["codec_over_read_twice"] = (row["encode_s"] + row["decode_s"]) / row["read_twice_s"]
    row["codec_without_noise_over_read_twice"] = (row["encode_s"] + row["decode_s"] - row["noise_s"]) / row["read_twice_s"]
    print(f"[1] codec, {args.codec_rows} x {args.codec_dim} at 2 bits: encode {row['encode_s'] * 1e3:.2f} ms "
          f"(noise {row['noise_s'] * 1e3:.2f} ms), decode {row['decode_s'] * 1e3:.2f} ms, reading it twice "
          f"{row['read_twice_s'] * 1e3:.2f} ms: codec / read twice = {row['codec_over_read_twice']:.1f} "
          f"({row['codec_without_noise_over_read_twice']:.1f} without the noise draw)", flush=True)
    return row


def adaqp_rows(args: argparse.Namespace) -> dict:
    result = {}
    configs = {"vanilla": ["strategy=vanilla"],
               "adaqp_2bit": ["strategy=adaqp", "strategy.assign=fixed", "strategy.bits=2"],
               "vanilla_fresh_pages": ["strategy=vanilla", "cluster.keep_freed_memory=false"]}
    for network in ("none", "eth10g"):
        names = configs if network == "none" else ["vanilla", "adaqp_2bit"]
        times = {name: run_job([*bench_overrides(args), f"cluster.world_size={args.workers}", f"network={network}",
                                *configs[name]]).summary.mean_epoch_time for name in names}
        result[network] = {**{f"{name}_epoch_s": t for name, t in times.items()},
                           "adaqp_2bit_over_vanilla": times["adaqp_2bit"] / times["vanilla"]}
        fresh = (f"; vanilla with cluster.keep_freed_memory=false {times['vanilla_fresh_pages'] * 1e3:.0f} ms/epoch"
                 if "vanilla_fresh_pages" in times else "")
        print(f"[2] network={network}: vanilla {times['vanilla'] * 1e3:.0f} ms/epoch, 2-bit AdaQP "
              f"{times['adaqp_2bit'] * 1e3:.0f} ms/epoch: 2-bit / vanilla = {result[network]['adaqp_2bit_over_vanilla']:.3f}"
              f"{fresh}", flush=True)
    return result


def assignment_row(args: argparse.Namespace) -> dict:
    run = run_job([*bench_overrides(args), f"cluster.world_size={args.workers}", "strategy=adaqp",
                   f"strategy.period={args.period}"])
    steady = run.records[args.warmup:]
    assigned = [r.strategy_metrics for r in steady if r.strategy_metrics.get("assign_time", 0) > 0]
    train_s = statistics.mean(r.epoch_time - r.strategy_metrics.get("assign_time", 0.0) for r in steady)
    assign_s = statistics.mean(m["assign_time"] for m in assigned)
    row = {"period_run": args.period, "reassignments": len(assigned), "epoch_without_assign_s": train_s,
           "assign_s": assign_s, "slowest_solve_s": max(m["solve_time"] for m in assigned),
           "share_at_period_50": assign_s / (50 * train_s + assign_s),
           "largest_certified_gap": max(m["assign_gap"] for m in assigned)}
    print(f"[3] adaptive assignment: {assign_s * 1e3:.0f} ms per reassignment (slowest solve "
          f"{row['slowest_solve_s'] * 1e3:.0f} ms; an epoch takes {train_s * 1e3:.0f} ms), "
          f"{100 * row['share_at_period_50']:.2f}% of training time at period 50; certified gap to the MILP "
          f"optimum at most {100 * row['largest_certified_gap']:.3f}%", flush=True)
    row["large_instance"] = large_instance_check()
    return row


def large_instance_check(pairs: int = 12, messages: int = 4000, group_size: int = 10, lam: float = 0.5) -> dict:
    """The rounded relaxation against branch and bound (HiGHS, relative gap 1e-4) on one
    synthetic 4-worker instance with heavy-tailed traces (the normalised objective, where both
    terms trade off; the raw one puts every group at 8 bits here)."""
    rng = np.random.default_rng(0)
    instance = []
    for _ in range(pairs):
        beta = rng.lognormal(0.0, 2.0, messages) * rng.uniform(0.1, 10.0)
        groups = group_messages(beta, group_size)
        instance.append(PairGroups(np.array([beta[g].sum() for g in groups]), np.array([len(g) * 256.0 for g in groups]),
                                   theta=rng.uniform(0.5e-10, 2e-10), gamma=rng.uniform(1e-5, 1e-4),
                                   round=1 + len(instance) % 3))
    start = time.perf_counter()
    rounded = assign_bits(instance, lam, gap=0.01, normalize=True)
    rounded_s = time.perf_counter() - start
    start = time.perf_counter()
    branched = assign_bits(instance, lam, gap=1e-4, normalize=True)
    branched_s = time.perf_counter() - start
    row = {"groups": pairs * -(-messages // group_size), "relaxation_s": rounded_s, "branch_and_bound_s": branched_s,
           "relaxation_objective_over_branch_and_bound": rounded.objective / branched.objective,
           "certified_gap": rounded.gap}
    print(f"    {row['groups']} groups: rounded relaxation {rounded_s:.3f} s, branch and bound {branched_s:.1f} s; "
          f"objective ratio {row['relaxation_objective_over_branch_and_bound']:.5f}, certified gap "
          f"{100 * rounded.gap:.3f}%", flush=True)
    return row


def gat_row(args: argparse.Namespace) -> dict:
    layer_args = argparse.Namespace(nodes=args.gat_nodes, avg_degree=24.0, classes=8, features=128, hidden=128,
                                    layers=2, heads=8, gcnii_layers=8, warmup=1, epochs=args.gat_epochs, repeats=3)
    print(f"[4] GAT 2 x 128, 8 heads, on {args.gat_nodes} nodes of mean degree 24:", flush=True)
    return compare_model(layer_args, "gat")


def stream_dropout(h: torch.Tensor, p: float, training: bool, key: int, ids: torch.Tensor,
                   first_column: int = 0) -> torch.Tensor:
    """Dropout with masks drawn from the global generator's stream (gnntrain's before keyed
    masks): the same 16-bit resolution and the same backward, a mask the reader draws."""
    if not training or p == 0.0:
        return h
    dropped = min(round(p * LEVELS), LEVELS - 1)
    keep = uniform16(tuple(h.shape), device=h.device) >= dropped - LEVELS // 2
    return _Dropout.apply(h, keep, LEVELS / (LEVELS - dropped))


def torch_dropout(h: torch.Tensor, p: float, training: bool, key: int, ids: torch.Tensor,
                  first_column: int = 0) -> torch.Tensor:
    return F.dropout(h, p, training)


def dropout_row(args: argparse.Namespace) -> dict:
    torch.manual_seed(0)
    data = generate(args.dropout_nodes, 16.0, 8, 128, homophily=0.8)
    graph = build_local_graph(data, torch.zeros(data.num_nodes, dtype=torch.long), 0, 1)
    no_halo = lambda h, layer: h.new_zeros(0, h.shape[1])  # noqa: E731 - one part, no halo
    keyed = gnn_module.dropout
    variants = {"none": (0.0, keyed), "keyed": (0.5, keyed), "stream": (0.5, stream_dropout),
                "torch": (0.5, torch_dropout)}
    models = {}
    for name, (rate, _) in variants.items():
        torch.manual_seed(0)
        models[name] = build_model(model_spec("gcn").config(name="gcn", hidden=256, layers=3, dropout=rate),
                                   data.num_features, data.num_classes)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for epoch in range(1 + args.dropout_epochs):
        for name, (_, function) in variants.items():
            model = models[name]
            model.begin_step(step_key(0, epoch))
            gnn_module.dropout = function
            start = time.perf_counter()
            model.zero_grad()
            F.cross_entropy(model(data.x, graph, no_halo)[data.train_mask], data.y[data.train_mask]).backward()
            if epoch:
                times[name].append(time.perf_counter() - start)
    gnn_module.dropout = keyed
    epoch = {name: statistics.median(t) for name, t in times.items()}
    added = {name: epoch[name] / epoch["none"] - 1 for name in ("keyed", "stream", "torch")}
    row = {"nodes": data.num_nodes, "model": "gcn 3 x 256", **{f"{name}_epoch_s": t for name, t in epoch.items()},
           **{f"{name}_added": a for name, a in added.items()},
           "keyed_over_stream": (epoch["keyed"] - epoch["none"]) / (epoch["stream"] - epoch["none"])}
    print(f"[5] CPU dropout 0.5, GCN 3 x 256 on {data.num_nodes} nodes: epoch without dropout "
          f"{epoch['none'] * 1e3:.0f} ms; keyed masks (ours) {epoch['keyed'] * 1e3:.0f} ms "
          f"(+{100 * added['keyed']:.0f}%), masks from the generator's stream {epoch['stream'] * 1e3:.0f} ms "
          f"(+{100 * added['stream']:.0f}%), torch's F.dropout {epoch['torch'] * 1e3:.0f} ms "
          f"(+{100 * added['torch']:.0f}%); keyed dropout costs {row['keyed_over_stream']:.2f}x the stream's",
          flush=True)
    return row


def gpu_row(args: argparse.Namespace) -> dict:
    if not torch.cuda.is_available():
        print("[6] GPU communication timing: no CUDA device here, not measured", flush=True)
        return {"measured": False, "reason": "no CUDA device"}
    summary = run_job([*bench_overrides(args), "cluster.device=cuda", "cluster.backend=gloo", "cluster.world_size=2"]).summary
    row = {"measured": True, "device": torch.cuda.get_device_name(), "workers": 2, "backend": "gloo",
           "epoch_time": summary.mean_epoch_time, "comm_time": summary.mean_comm_time,
           "comm_total_time": summary.mean_comm_total_time, "reduce_time": summary.mean_reduce_time}
    print(f"[6] GPU communication timing (CUDA events), vanilla on 2 workers sharing {row['device']}: epoch "
          f"{row['epoch_time'] * 1e3:.1f} ms, halo exposed {row['comm_time'] * 1e3:.1f} ms of "
          f"{row['comm_total_time'] * 1e3:.1f} ms in flight, all-reduce {row['reduce_time'] * 1e3:.1f} ms", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_bench_args(parser)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--period", type=int, default=2, help="reassignment period of the adaptive run")
    parser.add_argument("--codec-rows", type=int, default=12_000)
    parser.add_argument("--codec-dim", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=20, help="timed repeats of the codec")
    parser.add_argument("--gat-nodes", type=int, default=100_000)
    parser.add_argument("--gat-epochs", type=int, default=3)
    parser.add_argument("--dropout-nodes", type=int, default=200_000)
    parser.add_argument("--dropout-epochs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS),
                        help="the rows to measure (default: all); the others are kept as --out has them")
    args = parser.parse_args()
    kept = keep_freed_memory()  # as in every worker (cluster.keep_freed_memory)
    print(f"{describe_bench(args)}, {args.workers} workers; {torch.get_num_threads()} threads in this process",
          flush=True)
    result = json.loads(args.out.read_text()) if args.out.exists() and args.rows != list(ROWS) else {}
    result.update({"machine": {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                               "torch": torch.__version__, "keep_freed_memory": kept},
                   "bench_graph": {"nodes": args.nodes, "avg_degree": args.avg_degree, "features": args.features,
                                   "model": f"sage {args.layers} x {args.hidden}", "workers": args.workers,
                                   "timed_epochs": args.epochs}})
    commit = git_commit()
    measured_at = result.setdefault("measured_at", {})
    for name in args.rows:
        result[name] = ROWS[name](args)
        measured_at[name] = commit
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


ROWS = {"codec": codec_row, "adaqp_2bit": adaqp_rows, "assignment": assignment_row, "gat": gat_row,
        "dropout": dropout_row, "gpu_timing": gpu_row}
"""The rows, in the order they run; ``measured_at`` in the results records each one's commit."""


if __name__ == "__main__":
    main()

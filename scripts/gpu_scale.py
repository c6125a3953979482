"""ogbn-products' size on one GPU: our layers against PyG's fastest path, then the full-graph
methods on 4 ranks sharing the GPU (``results/gpu_scale.json``; ``make gpu-session`` runs it).

The graph is synthetic with ogbn-products' statistics (OGB's paper, Table 2: 2,449,029 nodes,
123,718,280 directed edges, 100 features, 47 classes), drawn by ``make scale``'s generator at the
settings of its ladder's top (average degree 53.5 before duplicates are dropped, homophily 0.97:
METIS replication under 2, as partitionable as real graphs). The model is PipeGCN's for
ogbn-products: 3-layer GraphSAGE, 128 hidden, dropout 0.5. Sections:

1. ``single``: one rank, our model against PyG's ``SAGEConv`` stack over a CSR ``adj_t``, its
   fastest way for GraphSAGE on the bench's 2M-node graph (40.6 against 105.1 ms over the
   ``edge_index``, ``results/bench_gpu.json``; the ``edge_index`` way's messages would take
   ~50 GB here): epochs alternating, each timed by CUDA events, with its peak device memory.
2. ``ranks``: vanilla, pipegcn, bns (p=0.1, as BNS-GCN's Table 5 on ogbn-products), adaqp and gnnpipe on 4
   gloo ranks sharing the GPU on a described 10 Gbit/s link (``network=eth10g``) and the
   virtual clock (``cluster.clock=virtual``: each rank's compute by CUDA events, the transfers
   by the link model; 4 ranks on one GPU take turns on it, and the virtual clock charges each
   only its own kernels). GNNPipe runs 2 stages x 2 graph-parallel ranks (3 layers allow at
   most 3 stages) on 4 chunks, the graph-parallel runs' METIS partition (its default 16 chunks
   would need a second partition, more than a minute of CPU). Per method: mean virtual epoch
   time after the warm-up, its compute and exposed communication, bytes per epoch, the largest
   rank's peak device memory.

``--prepare`` does the CPU work and trains nothing: it draws the graph, saves it as a
``source: file`` dataset in the cache (``<cache>/products_like.pt``: every later process loads it
instead of drawing it again) and writes its 4-part METIS partition as part files, which the
graph-parallel ranks load. ``make gpu-session`` runs it beside the CUDA tests.

Published figures quoted beside ours (``PUBLISHED``) are not ours to check: the paper is not
among ``../shared/papers``. Usage: ``python scripts/gpu_scale.py [--prepare] [--sections single
ranks] [--device cpu --nodes 20000 ...]`` (``--device cpu`` with small sizes tries the script
where there is no GPU; its figures mean nothing there).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from bench_gpu import compare_layers
from gnntrain.data.graph_data import GraphData
from gnntrain.data.job import prepare_job_data, write_partitioned_dataset
from gnntrain.data.synthetic import generate
from gnntrain.repro.jobs import compose_config, git_commit, run_job
from gnntrain.storage.safe_load import load_plain

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results" / "gpu_scale.json"
PRODUCTS = {"nodes": 2_449_029, "directed_edges": 123_718_280, "features": 100, "classes": 47}
"""ogbn-products (OGB's paper, Table 2)."""
STRATEGIES = {"vanilla": [], "pipegcn": [], "bns": ["strategy.p=0.1"], "adaqp": [],
              "gnnpipe": ["strategy.stages=2", "strategy.graph_parallel=2", "strategy.chunks=4"]}
"""The methods of section 2 and the settings each runs with."""
PUBLISHED = {
    "source": "Bajaj et al., arXiv 2406.00552, from their logs: ogbn-products, 3-layer GraphSAGE-128",
    "pipegcn_4_v100_epoch_s": [0.18, 0.19],
    "dgl_minibatch_epoch_s": [0.72, 0.75],
}
SECTIONS = ["single", "ranks"]
GRAPH_FILE = "products_like.pt"


def dataset_overrides(args) -> list[str]:
    """The saved graph as a ``source: file`` dataset, and the cache everything shares."""
    return ["dataset=ogbn-products", "dataset.source=file", f"dataset.file={args.cache / GRAPH_FILE}",
            "dataset.name=products_like", "dataset.to_undirected=false", f"partition.cache_dir={args.cache}"]


def model_overrides(args) -> list[str]:
    return ["model=sage", f"model.hidden={args.hidden}", f"model.layers={args.layers}", "model.dropout=0.5"]


def prepare(args) -> dict:
    """Draw the graph, save it, and write its partition into ``args.workers`` parts (CPU only)."""
    start = time.monotonic()
    torch.manual_seed(0)
    data = generate(args.nodes, args.avg_degree, PRODUCTS["classes"], PRODUCTS["features"], args.homophily)
    drawn = time.monotonic()
    args.cache.mkdir(parents=True, exist_ok=True)
    torch.save({"x": data.x, "y": data.y, "edge_index": data.edge_index, "train_mask": data.train_mask,
                "val_mask": data.val_mask, "test_mask": data.test_mask}, args.cache / GRAPH_FILE)
    run = compose_config(dataset_overrides(args) + model_overrides(args) + [f"cluster.world_size={args.workers}"])
    job = prepare_job_data(run, args.workers)
    write_partitioned_dataset(run, args.workers, job)
    figures = {"nodes": data.num_nodes, "edges": data.num_edges, "features": data.num_features,
               "draw_s": round(drawn - start, 1), "partition_and_write_s": round(time.monotonic() - drawn, 1),
               "replication": job.stats["replication_factor"]}
    print(f"prepared {data.num_nodes} nodes, {data.num_edges} edges in {args.cache}: drawn in {figures['draw_s']} s, "
          f"partitioned and written in {figures['partition_and_write_s']} s", flush=True)
    return figures


def saved_graph(args) -> GraphData:
    tensors = load_plain(args.cache / GRAPH_FILE)
    return GraphData("products_like", num_classes=PRODUCTS["classes"], **tensors)


def single_rank(args, device: torch.device) -> dict:
    """Section 1: our GraphSAGE against PyG's over ``adj_t`` on one rank."""
    data = saved_graph(args)
    print(f"[1] one rank: {data.num_nodes} nodes, {data.num_edges} edges; GraphSAGE {args.layers} x {args.hidden}, "
          "ours against PyG over adj_t", flush=True)
    layers = argparse.Namespace(models=["sage"], layers=args.layers, hidden=args.hidden, epochs=args.epochs,
                                warmup=args.warmup, pyg_ways=["csr"], heads=1, gcnii_layers=0)
    return compare_layers(data, layers, device)["sage"]


def ranks(args, keep) -> dict:
    """Section 2: each method on ``args.workers`` gloo ranks sharing the GPU, virtual clock, a described 10 Gbit/s link."""
    print(f"[2] {', '.join(args.strategies)} on {args.workers} gloo ranks sharing the device, eth10g, virtual clock",
          flush=True)
    epochs = args.warmup + args.epochs
    rows = {}
    for name in args.strategies:
        summary = run_job(dataset_overrides(args) + model_overrides(args) + STRATEGIES[name] + [
            f"strategy={name}", f"cluster.device={args.device}", "cluster.backend=gloo",
            f"cluster.world_size={args.workers}", "cluster.clock=virtual", "network=eth10g", f"train.epochs={epochs}",
            f"train.warmup_epochs={args.warmup}", f"train.eval_every={epochs}"]).summary
        rows[name] = {"epoch_s_virtual": summary.mean_epoch_time, "compute_s": summary.mean_compute_time,
                      "exposed_comm_s": summary.mean_comm_time, "comm_bytes_per_epoch": summary.mean_comm_bytes_per_epoch,
                      "peak_allocated_mb": summary.peak_mem_mb, "peak_reserved_mb": summary.peak_mem_reserved_mb,
                      "timed_epochs": summary.epochs - summary.warmup_epochs_excluded}
        print(f"    {name:8s} {summary.mean_epoch_time:7.3f} s/epoch (virtual; exposed comm "
              f"{summary.mean_comm_time:.3f} s), {summary.mean_comm_bytes_per_epoch / 2**20:.0f} MiB/epoch, peak "
              f"{summary.peak_mem_mb / 1024:.1f} GiB per rank", flush=True)
        keep(rows)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=PRODUCTS["nodes"])
    parser.add_argument("--avg-degree", type=float, default=53.5, help="before duplicates are dropped")
    parser.add_argument("--homophily", type=float, default=0.97)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs per way or method")
    parser.add_argument("--warmup", type=int, default=1, help="untimed epochs first")
    parser.add_argument("--strategies", nargs="+", choices=list(STRATEGIES), default=list(STRATEGIES))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/gnntrain-gpu-scale"),
                        help="where the graph, its partition and part files go")
    parser.add_argument("--prepare", action="store_true", help="only draw, save and partition the graph (CPU)")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=SECTIONS)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.prepare:
        figures = prepare(args)
        (args.cache / "prepared.json").write_text(json.dumps(figures, indent=2) + "\n")
        return
    if not (args.cache / "prepared.json").exists():
        raise SystemExit(f"gpu_scale: error: no prepared graph in {args.cache}; run it with --prepare first")
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    result = {
        "card": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "machine": {"torch": torch.__version__, "cuda": torch.version.cuda},
        "commit": git_commit(),
        "graph": {**json.loads((args.cache / "prepared.json").read_text()), "products": PRODUCTS,
                  "avg_degree": args.avg_degree, "homophily": args.homophily},
        "model": {"name": "sage", "layers": args.layers, "hidden": args.hidden},
        "epochs": {"warmup": args.warmup, "timed": args.epochs},
        "published": PUBLISHED,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def keep(section: str, figures: dict) -> None:
        result[section] = figures
        args.out.write_text(json.dumps(result, indent=2) + "\n")

    measures = {"single": lambda: single_rank(args, device),
                "ranks": lambda: ranks(args, lambda rows: keep("ranks", rows))}
    for section in args.sections:  # written after each, so a stopped run keeps what it measured
        keep(section, measures[section]())
    ranked = result.get("ranks", {})
    if "vanilla" in ranked:
        keep("speedup_over_vanilla_virtual", {name: ranked["vanilla"]["epoch_s_virtual"] / row["epoch_s_virtual"]
                                              for name, row in ranked.items()})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

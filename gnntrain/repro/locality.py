"""HopGNN Table 1: the data locality of micrographs against that of mini-batch subgraphs.

For a partition of the graph into ``S`` parts (the job's METIS partition, as ``gnntrain``
caches it) and node-wise sampling with fan-out 10 per layer:

* ``R_micro``: per root of the first iteration of epoch 1 (the first :data:`MICROGRAPHS`
  roots), the micrograph's non-root nodes that share the root's part, over all the
  micrograph's nodes (Sec. 4); the mean over roots;
* ``R_sub``: per root of a mini-batch's subgraph (the model-centric baseline's rank ``d`` trains
  mini-batch ``d``), the subgraph's non-root nodes that share that root's part, over all the
  subgraph's nodes (Sec. 4: "the count of non-root vertices co-located with a specified root
  vertex by the total number of vertices in the subgraph"); the mean over the iteration's roots.
  A subgraph spreads over all ``S`` parts, so it lands near ``1 / S``, as the paper's 50, 25,
  12 and 6% for 2 to 16 servers.

Usage: ``python -m gnntrain.repro.locality [cora|citeseer|synthetic ...]`` prints the table; ``make repro-hopgnn``
writes it to ``results/hopgnn/``.
"""

from __future__ import annotations

import sys

import torch

from gnntrain.data.job import JobData, prepare_job_data
from gnntrain.data.sampling import Topology, sample_blocks, sampling_key
from gnntrain.report import markdown
from gnntrain.repro.jobs import compose_config

PARTS = (2, 4, 8)
LAYERS = (2, 10)
FANOUT = 10
BATCH = 1024
MICROGRAPHS = {2: 256, 10: 32}
"""Micrographs measured per depth (the first roots of the iteration): a 10-layer micrograph
reaches most of a 100k-node graph, so fewer of them are sampled."""
GRAPHS = {"cora": ["dataset=cora"], "citeseer": ["dataset=citeseer"], "synthetic": ["experiment=hopgnn_fig13"]}
"""The graphs measured by default, with the overrides that compose them (synthetic: Figs. 11 and 13's graph)."""
PAPER = {2: ("75/73", "95/88", 50), 4: ("66/45", "92/79", 25), 8: ("59/27", "88/68", 12)}
"""HopGNN Table 1, node-wise sampling, METIS: R_micro 2L/10L (%) on Arxiv and on Products, and R_sub (%), per
number of servers."""


def locality(job: JobData, parts: int, layers: int) -> tuple[float, float]:
    """(mean R_micro, mean R_sub) of a job's graph in its ``parts`` parts, ``layers`` layers."""
    topology, part = Topology.of(job.data), job.part
    train = job.data.train_mask.nonzero().view(-1)
    order = train[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(1))]
    batch = order[:BATCH]
    keys = [sampling_key(0, 1, 0, layer) for layer in range(layers)]
    fanouts = [FANOUT] * layers
    micro = []
    for root in batch[:MICROGRAPHS[layers]]:
        nodes = sample_blocks(topology, root.view(1), fanouts, keys).nodes
        micro.append(float((part[nodes[1:]] == part[root]).sum()) / nodes.numel())
    sub = []
    for roots in torch.tensor_split(batch, parts):
        nodes = sample_blocks(topology, roots, fanouts, keys).nodes
        on_part = torch.bincount(part[nodes[roots.numel():]], minlength=parts)
        sub.extend((on_part[part[roots]].double() / nodes.numel()).tolist())
    return sum(micro) / len(micro), sum(sub) / len(sub)


def locality_table(graphs: list[str]) -> list[dict]:
    """One row per (graph of :data:`GRAPHS`, parts): R_micro and R_sub at each depth, the paper's beside them."""
    rows = []
    for name in graphs:
        run = compose_config(GRAPHS[name])
        for parts in PARTS:
            job = prepare_job_data(run, parts)
            row: dict = {"graph": f"{name} ({job.data.num_nodes} nodes, {job.data.edge_index.size(1)} edges)",
                         "parts": parts}
            for layers in LAYERS:
                r_micro, r_sub = locality(job, parts, layers)
                row[f"R_micro {layers}L (%)"] = round(100 * r_micro, 1)
                row[f"R_sub {layers}L (%)"] = round(100 * r_sub, 1)
            arxiv, products, r_sub = PAPER[parts]
            row.update({"paper R_micro 2L/10L: Arxiv": arxiv, "paper R_micro 2L/10L: Products": products,
                        "paper R_sub": r_sub})
            rows.append(row)
    return rows


if __name__ == "__main__":
    names = sys.argv[1:] or list(GRAPHS)
    unknown = set(names) - set(GRAPHS)
    if unknown:
        sys.exit(f"python -m gnntrain.repro.locality: unknown graph {', '.join(sorted(unknown))}; valid: {', '.join(GRAPHS)}")
    print(markdown(locality_table(names)))

"""HopGNN Table 1: the data locality of micrographs against that of mini-batch subgraphs.

For a partition of the graph into ``S`` parts (the job's METIS partition, as ``gnntrain``
caches it) and node-wise sampling with fan-out 10 per layer:

* ``R_micro``: per root of the first iteration of epoch 1, the micrograph's non-root nodes that
  share the root's part, over all the micrograph's nodes (Sec. 4); the mean over roots;
* ``R_sub``: per mini-batch (the model-centric baseline's rank ``d`` trains mini-batch ``d``),
  the subgraph's non-root nodes owned by the rank that trains it, over all its nodes; the mean
  over the iteration's mini-batches.

Usage: ``python scripts/locality.py [dataset ...]`` prints the table; ``make repro-hopgnn``
writes it to ``results/hopgnn/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import compose_config  # noqa: E402

from gnntrain.data import prepare_job_data  # noqa: E402
from gnntrain.data.sampling import Topology, sample_blocks, sampling_key  # noqa: E402

PARTS = (2, 4, 8)
LAYERS = (2, 10)
FANOUT = 10
BATCH = 1024
MAX_ROOTS = 256
"""Micrographs measured per setting (the first roots of the iteration)."""


def locality(cfg: dict, parts: int, layers: int) -> tuple[float, float]:
    """(mean R_micro, mean R_sub) of the dataset of ``cfg`` in ``parts`` parts, ``layers`` layers."""
    job = prepare_job_data(cfg, parts)
    topology, part = Topology.of(job.data), job.part
    train = job.data.train_mask.nonzero().view(-1)
    order = train[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(1))]
    batch = order[:BATCH]
    keys = [sampling_key(0, 1, 0, layer) for layer in range(layers)]
    fanouts = [FANOUT] * layers
    micro = []
    for root in batch[:MAX_ROOTS]:
        nodes = sample_blocks(topology, root.view(1), fanouts, keys).nodes
        micro.append(float((part[nodes[1:]] == part[root]).sum()) / nodes.numel())
    sub = []
    for rank, roots in enumerate(torch.tensor_split(batch, parts)):
        nodes = sample_blocks(topology, roots, fanouts, keys).nodes
        sub.append(float((part[nodes[roots.numel():]] == rank).sum()) / nodes.numel())
    return sum(micro) / len(micro), sum(sub) / len(sub)


def locality_table(datasets: list[str]) -> list[dict]:
    """One row per (dataset, parts): R_micro and R_sub at each depth."""
    rows = []
    for name in datasets:
        cfg = compose_config([f"dataset={name}"])
        for parts in PARTS:
            row: dict = {"dataset": name, "parts": parts}
            for layers in LAYERS:
                r_micro, r_sub = locality(cfg, parts, layers)
                row[f"R_micro {layers}L (%)"] = round(100 * r_micro, 1)
                row[f"R_sub {layers}L (%)"] = round(100 * r_sub, 1)
            rows.append(row)
    return rows


if __name__ == "__main__":
    from gnntrain.report import markdown

    print(markdown(locality_table(sys.argv[1:] or ["cora", "citeseer", "synthetic"])))

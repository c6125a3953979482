"""A ring of cliques: a new dataset source in one file outside the package (docs/extending.md walks
through it; tests/test_extending.py runs it).

``cliques`` cliques of ``clique_size`` nodes each sit on a ring: every clique is complete and
linked to the next by one edge. A node's class is its clique's index modulo ``num_classes``, its
features that class's one-hot code plus Gaussian noise of ``feature_noise``. Every key has a
default, so the source is a graph of its own: run it with

    GNNTRAIN_PLUGINS=docs/examples/ring_source.py gnntrain dataset=ring dataset.cliques=40
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from gnntrain.config.schema import DatasetConfig, check
from gnntrain.data.graph_data import GraphData, coalesce_edges, random_split
from gnntrain.data.sources import Source, register_source


@dataclass
class RingConfig(DatasetConfig):
    """A ring of cliques."""

    name: str = "ring"
    """What the graph is called in logs, tables and cache file names."""
    source: str = "ring"
    """Generated on the fly by docs/examples/ring_source.py."""
    cliques: int = 20
    """Cliques on the ring."""
    clique_size: int = 6
    """Nodes per clique."""
    num_classes: int = 4
    """Classes: a node's is its clique's index modulo this."""
    feature_noise: float = 0.5
    """Standard deviation of the noise around each class's one-hot features."""
    graph_seed: int = 0
    """Seed of the features and of the 60/20/20 split."""


def validate(config: RingConfig) -> None:
    check("dataset.cliques", config.cliques, config.cliques >= 3, ">= 3")
    check("dataset.clique_size", config.clique_size, config.clique_size >= 2, ">= 2")
    check("dataset.num_classes", config.num_classes, 2 <= config.num_classes <= config.cliques,
          f"in [2, dataset.cliques={config.cliques}]")


def load(config: RingConfig, cache_dir: Path) -> GraphData:
    k, size = config.cliques, config.clique_size
    n = k * size
    clique = torch.arange(n) // size
    within = [(a, b) for a in range(size) for b in range(size) if a != b]
    src = torch.tensor([c * size + a for c in range(k) for a, _ in within])
    dst = torch.tensor([c * size + b for c in range(k) for _, b in within])
    ring = torch.arange(k)
    src, dst = torch.cat([src, ring * size]), torch.cat([dst, (ring + 1) % k * size + 1])
    y = clique % config.num_classes
    generator = torch.Generator().manual_seed(config.graph_seed)
    x = torch.nn.functional.one_hot(y, config.num_classes).float()
    x = x + config.feature_noise * torch.randn(x.shape, generator=generator)
    masks = random_split(torch.ones(n, dtype=torch.bool), 0.6, 0.2, config.graph_seed)
    edge_index = coalesce_edges(src, dst, n, symmetric=True)
    return GraphData(config.name, x, y, edge_index, *masks, config.num_classes, coalesced_undirected=True)


register_source(Source("ring", RingConfig, load, validate))

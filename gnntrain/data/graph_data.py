"""The in-memory form of a node-classification graph that every loader returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class GraphFacts:
    """What a rank needs to know of the whole graph besides its own part: sizes, the label
    kind, and the global number of training nodes (every rank's loss share divides by it)."""

    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    multilabel: bool
    num_train: int


@dataclass
class GraphData:
    """A whole graph on the CPU.

    ``edge_index[0]`` are message sources and ``edge_index[1]`` targets (PyG's convention);
    there are no self-loops and, unless the dataset was loaded with ``to_undirected=false``,
    every edge appears in both directions. ``y`` is ``[N]`` class ids, or ``[N, C]`` 0/1 floats
    when ``multilabel``; nodes without a label are in none of the three masks.
    """

    name: str
    x: torch.Tensor
    y: torch.Tensor
    edge_index: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    num_classes: int
    multilabel: bool = False
    coalesced_undirected: bool = False
    """The edges are :func:`coalesce_edges`' output with ``symmetric``: every edge in both
    directions, sorted by (target, source), so they are the CSR of the graph METIS reads as they
    are (False: not known, and METIS gets a symmetrised copy)."""

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    @property
    def num_edges(self) -> int:
        return self.edge_index.shape[1]

    @property
    def num_features(self) -> int:
        return self.x.shape[1]

    def facts(self) -> GraphFacts:
        return GraphFacts(self.name, self.num_nodes, self.num_edges, self.num_features, self.num_classes,
                          self.multilabel, int(self.train_mask.sum()))


def induced_subgraph(data: GraphData, keep: torch.Tensor) -> GraphData:
    """The subgraph of ``data`` induced by the nodes ``keep`` (a mask) selects: those nodes in
    their order, with their rows, labels and masks, and the edges between them."""
    new_id = torch.full((data.num_nodes,), -1, dtype=torch.long)
    new_id[keep] = torch.arange(int(keep.sum()))
    src, dst = data.edge_index
    inside = keep[src] & keep[dst]
    return GraphData(data.name, data.x[keep], data.y[keep], new_id[data.edge_index[:, inside]],
                     data.train_mask[keep], data.val_mask[keep], data.test_mask[keep], data.num_classes,
                     data.multilabel, data.coalesced_undirected)


def coalesce_edges(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, symmetric: bool) -> torch.Tensor:
    """The edges ``src[i] -> dst[i]`` without self-loops and duplicates, adding the reverse
    edges first when ``symmetric``: a ``[2, E]`` edge index sorted by (target, source), which
    makes CSR construction a no-op sort later.

    Each edge is one int64 key ``target * N + source``, sorted in place and compacted, so the
    peak is about three int64 words per resulting edge beyond the input (a paper-size graph's
    coalescing must not cost a multiple of its edge list)."""
    key = dst.long() * num_nodes + src.long()
    if symmetric:
        key = torch.cat([key, src.long() * num_nodes + dst.long()])
    key = key[key % (num_nodes + 1) != 0]  # target * N + source == source * (N + 1) for a self-loop
    keys = key.numpy()
    keys.sort()
    distinct = np.empty(keys.size, dtype=bool)
    distinct[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=distinct[1:])
    key = key[torch.from_numpy(distinct)]
    del keys, distinct
    edge_index = torch.empty(2, key.numel(), dtype=torch.long)
    torch.remainder(key, num_nodes, out=edge_index[0])
    torch.div(key, num_nodes, rounding_mode="floor", out=edge_index[1])
    return edge_index


def random_split(
    labeled: torch.Tensor, train_frac: float, val_frac: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded train/val/test masks over the nodes where ``labeled`` is true; test gets the rest."""
    idx = labeled.nonzero().view(-1)
    idx = idx[torch.randperm(idx.numel(), generator=torch.Generator().manual_seed(seed))]
    n_train = int(round(train_frac * idx.numel()))
    n_val = int(round(val_frac * idx.numel()))
    masks = []
    for part in (idx[:n_train], idx[n_train : n_train + n_val], idx[n_train + n_val :]):
        mask = torch.zeros_like(labeled)
        mask[part] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]

"""Per-rank local graph of graph-parallel training.

Rank ``r`` owns the *inner* nodes ``{v : part[v] == r}``. Its *halo* is the set of nodes owned
by other ranks that have an edge into an inner node. Local ids are inner nodes first (in
global-id order), then halo nodes grouped by owner rank (ascending) and global id, so the halo
rows received from peer ``q`` form one contiguous block.

The local adjacency has one row per inner node (the message targets) and one column per local
node (inner + halo); normalisations use *global* degrees, so an aggregation over a local graph
with all halo rows present equals the same rows of the full-graph aggregation.

Send plan: for each peer ``q``, the inner nodes that ``q`` has in its halo, in ``q``'s halo
order. Every rank derives its plans from the global edge list and the partition, so no
messages are needed to agree on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import torch

from gnntrain.data.graph_data import GraphData
from gnntrain.sparse import SparseOperator


@dataclass
class LocalGraph:
    rank: int
    world_size: int
    num_inner: int
    num_halo: int
    global_ids: torch.Tensor
    """Global id of every local node (inner then halo); for bookkeeping and tests only."""
    in_degree: torch.Tensor
    """Global in-degree (self-loops excluded) of every local node, float."""
    edge_src: torch.Tensor
    """Local source id of every in-edge of an inner node."""
    edge_dst: torch.Tensor
    """Local (inner) target id of every in-edge of an inner node."""
    recv_splits: list[int]
    """Halo rows received from each peer (0 for self)."""
    send_index: torch.Tensor
    """Local inner ids sent to the peers, concatenated in peer order."""
    send_splits: list[int]
    """Rows sent to each peer (0 for self)."""
    x: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    _operators: dict[str, SparseOperator] = field(default_factory=dict, repr=False)

    @property
    def num_local(self) -> int:
        return self.num_inner + self.num_halo

    @cached_property
    def self_loop_edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Local (source, target) ids of every in-edge of an inner node plus one self-loop per
        inner node, for layers that compute per-edge values (attention, modulation)."""
        loops = torch.arange(self.num_inner)
        return torch.cat([self.edge_src, loops]), torch.cat([self.edge_dst, loops])

    def operator(self, kind: str) -> SparseOperator:
        """The normalised ``[inner, local]`` aggregation matrix, built once per kind.

        * ``"gcn"``: ``D^-1/2 (A + I) D^-1/2`` with ``D = in_degree + 1`` (Kipf & Welling), the
          self-loop of inner node ``i`` at column ``i``;
        * ``"mean"``: ``D^-1 A`` with ``D = in_degree`` (rows of isolated nodes are zero).
        """
        if kind not in self._operators:
            self._operators[kind] = self._build_operator(kind)
        return self._operators[kind]

    def _build_operator(self, kind: str) -> SparseOperator:
        shape = (self.num_inner, self.num_local)
        if kind == "gcn":
            src, dst = self.self_loop_edges
            dinv = (self.in_degree + 1.0).rsqrt()
            return SparseOperator(dst, src, dinv[src] * dinv[dst], shape)
        if kind == "mean":
            value = 1.0 / self.in_degree[self.edge_dst]
            return SparseOperator(self.edge_dst, self.edge_src, value, shape)
        raise ValueError(f"unknown aggregation kind {kind!r}; valid: gcn, mean")


def build_local_graph(data: GraphData, part: torch.Tensor, rank: int, world_size: int,
                      dtype: torch.dtype = torch.float32) -> LocalGraph:
    """Carve rank ``rank``'s local graph out of the whole graph (see the module docstring);
    features, degrees and hence aggregation weights in ``dtype``."""
    n = data.num_nodes
    src, dst = data.edge_index
    inner = (part == rank).nonzero().view(-1)

    into_inner = part[dst] == rank
    e_src, e_dst = src[into_inner], dst[into_inner]
    remote = part[e_src] != rank
    halo_key = torch.unique(part[e_src[remote]] * n + e_src[remote])
    halo = halo_key % n

    local_id = torch.full((n,), -1, dtype=torch.long)
    local_id[inner] = torch.arange(inner.numel())
    local_id[halo] = torch.arange(halo.numel()) + inner.numel()

    out_of_inner = (part[src] == rank) & (part[dst] != rank)
    send_key = torch.unique(part[dst[out_of_inner]] * n + src[out_of_inner])
    send_peer, send_global = send_key // n, send_key % n

    global_ids = torch.cat([inner, halo])
    in_degree = torch.bincount(dst, minlength=n).to(dtype)[global_ids]
    return LocalGraph(
        rank=rank,
        world_size=world_size,
        num_inner=inner.numel(),
        num_halo=halo.numel(),
        global_ids=global_ids,
        in_degree=in_degree,
        edge_src=local_id[e_src],
        edge_dst=local_id[e_dst],
        recv_splits=torch.bincount(halo_key // n, minlength=world_size).tolist(),
        send_index=local_id[send_global],
        send_splits=torch.bincount(send_peer, minlength=world_size).tolist(),
        x=data.x[inner].to(dtype),
        y=data.y[inner],
        train_mask=data.train_mask[inner],
        val_mask=data.val_mask[inner],
        test_mask=data.test_mask[inner],
    )


def partition_stats(data: GraphData, part: torch.Tensor, parts: int) -> dict:
    """Inner and boundary (halo) node counts per part, edge-cut, replication factor.

    ``edge_cut`` counts directed edges whose endpoints lie in different parts (for an undirected
    graph, twice the undirected cut); ``replication_factor`` is (inner + halo rows over all
    parts) / N, i.e. how many copies of a node's features exist on average.
    """
    n = data.num_nodes
    src, dst = data.edge_index
    cut = part[src] != part[dst]
    halo_pairs = torch.unique(part[dst[cut]] * n + src[cut])
    halo = torch.bincount(halo_pairs // n, minlength=parts)
    inner = torch.bincount(part, minlength=parts)
    return {
        "parts": parts,
        "inner_nodes": inner.tolist(),
        "boundary_nodes": halo.tolist(),
        "edge_cut": int(cut.sum()),
        "edge_cut_fraction": float(cut.float().mean()) if cut.numel() else 0.0,
        "replication_factor": float((inner.sum() + halo.sum()) / max(n, 1)),
    }

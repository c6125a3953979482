"""Server-level preloading: a rank's local graph when every server (node of the cluster) holds
the dependencies of its vertices (GraNNDis, Song et al., PACT'24, Sec. 5.1 and 6).

Ranks ``s G .. s G + G - 1`` form server ``s`` (``G`` ranks per server: the cluster's
``network.gpus_per_node``, consecutive ranks on one node as the cluster description lays them
out). Server ``s`` *owns* the vertices of its ranks' parts. Its *expansion* is every vertex
within ``hops`` in-edges of an owned vertex (breadth first over in-edges: hop ``k`` holds the
sources of the edges into hop ``k - 1`` not reached before); with ``hops`` equal to the model's
layers, every vertex an owned vertex's output depends on is in the server (Fig. 7c: "all of the
slow inter-server dependencies are already replicated in the extracted graph").

The expansion is split among the server's ranks (Sec. 6: "the extracted vertices are
distributed to the GPUs in a server"): partitioned again by METIS into as many balanced parts as
the server has ranks (Sec. 5.1; the artifact partitions each server graph with DGL's METIS), with
the run's seed, so every rank of a server computes the same split. A rank then computes the
vertices of its part of the server graph, owned or replicated: which of the server's vertices
a rank computed in the cluster's partition does not matter to the result.

Each rank's local graph is then carved as for graph parallelism
(:func:`~gnntrain.data.partition.carve_part`) from the server's expanded subgraph, the vertices
it computes as its inner rows and the rows of the server's other ranks as its halo: every
halo row comes from a rank of the same server, so no halo crosses servers. Degrees stay the
whole graph's, so every row an owned vertex's output needs equals the full-graph row; the
outermost hops' rows, whose in-edges leave the expansion, are wrong in the last layers and are
read by nothing that matters (a hop-``k`` row is exact up to layer ``hops - k``). Only owned
vertices keep their train, validation and test masks: a replicated vertex is counted by the
server that owns it.

*Expansion-aware sampling* (Sec. 5.3): with ``rate`` below 1 each in-edge whose source lies
outside the server is kept with probability ``rate`` and weighted ``1 / rate`` (an unbiased sum,
as BNS-GCN's sampled edges); edges between owned vertices are all kept. The expansion grows
along kept edges only, so fewer outside vertices are replicated. The draw is keyed by the edge
and ``seed`` (:mod:`gnntrain.rng.keyed`), made once before training (the authors' artifact
samples its server graphs once), and the same on every rank of a server. The paper picks the
outside vertices with the most links to unpicked ones, up to ``f`` per boundary vertex
(``h = 1, f = 15``); the artifact draws ``f`` in-neighbours uniformly per vertex and keeps
every edge among those reached, with means over the kept neighbours. A rate per edge is our
choice: its traffic and compute scale with it, and the weighted sum stays unbiased.

*Cooperative batching* (Sec. 5.2; ``fanout``): a server's ranks share one co-batch, the server's
training vertices (the artifact's ``--epoch-iter 1``: one co-batch per server and epoch), whose
dependencies are sampled: up to ``fanout`` in-neighbours per vertex and hop, the same keyed sample
on every rank, drawn once (the artifact pre-samples its co-batches and reloads them), and every
edge among the vertices reached kept (the artifact's induced subgraph). A kept edge into ``v`` is
weighted ``deg(v) / kept(v)`` (the whole graph's in-degree over the in-edges ``v`` keeps), so a
sum over the kept neighbours stands for the whole neighbourhood's, as the artifact's means over
the kept neighbours do. A co-batch carries its seeds' training masks only: validation and test
are scored on the rank's part of the whole graph (:mod:`gnntrain.strategies.graph_parallel.preloaded`).
With ``fanout`` at least the largest in-degree a co-batch is exact.
"""

from __future__ import annotations

import torch

from dataclasses import dataclass

from gnntrain.data.graph_data import GraphData, induced_subgraph
from gnntrain.data.partition import carve_part, metis_partition
from gnntrain.rng import keyed

SAMPLING_STREAM = 0x6772616E
"""Mixed into the sampling's key, so its draws share nothing with other keyed draws of the seed."""
COOPERATIVE_STREAM = 0x636F62
"""Mixed into the co-batch's neighbour sample's key."""


def server_ranks(rank: int, world_size: int, ranks_per_server: int) -> range:
    """The world ranks of ``rank``'s server."""
    first = rank // ranks_per_server * ranks_per_server
    return range(first, min(first + ranks_per_server, world_size))


def kept_edges(data: GraphData, owned: torch.Tensor, rate: float, seed: int) -> torch.Tensor:
    """Mask of the edges the server's expansion may follow: all, or (``rate`` < 1) those between
    owned vertices and a keyed draw of the rest (module docstring)."""
    if rate >= 1.0:
        return torch.ones(data.num_edges, dtype=torch.bool)
    src, dst = data.edge_index
    draw = keyed.uniform(keyed.key(seed, SAMPLING_STREAM), keyed.pair_ids(src, dst)) < rate
    return owned[src] | draw


def sampled_in_edges(data: GraphData, fanout: int, seed: int) -> torch.Tensor:
    """Mask of up to ``fanout`` in-edges per vertex, the ones with the least keyed uniforms (the same
    sample whichever hop reaches the vertex, on every rank)."""
    src, dst = data.edge_index
    draw = keyed.uniform(keyed.key(seed, COOPERATIVE_STREAM), keyed.pair_ids(src, dst))
    order = torch.argsort(dst.double() + draw)
    counts = torch.bincount(dst, minlength=data.num_nodes)
    first = torch.cumsum(counts, 0) - counts
    position = torch.arange(dst.numel()) - first[dst[order]]
    kept = torch.zeros(dst.numel(), dtype=torch.bool)
    kept[order[position < fanout]] = True
    return kept


def expansion_hops(data: GraphData, owned: torch.Tensor, hops: int, kept: torch.Tensor) -> torch.Tensor:
    """Each vertex's hop distance from the owned vertices along kept in-edges (0: owned), -1
    beyond ``hops``."""
    src, dst = data.edge_index[:, kept]
    hop = torch.full((data.num_nodes,), -1, dtype=torch.long)
    hop[owned] = 0
    for k in range(1, hops + 1):
        reaching = hop[dst] == k - 1
        fresh = src[reaching][hop[src[reaching]] < 0]
        if fresh.numel() == 0:
            break
        hop[fresh] = k
    return hop


@dataclass
class ServerGraph:
    """A server's expanded subgraph (module docstring) and who computes each of its vertices."""

    graph: GraphData
    """The subgraph induced by the expansion along kept edges; only owned vertices keep their masks."""
    ids: torch.Tensor
    """The whole graph's id of each of its vertices."""
    owner: torch.Tensor
    """The world rank that computes each of its vertices."""
    owned: torch.Tensor
    """Over the whole graph: the vertices the server owns."""
    kept_degree: torch.Tensor | None = None
    """With a co-batch: each vertex's in-edges within the server graph (over the whole graph)."""


def server_graph(data: GraphData, part: torch.Tensor, ranks: range, hops: int, rate: float, seed: int,
                 fanout: int | None = None) -> ServerGraph:
    """Server ``ranks``' expanded subgraph, split among its ranks by METIS (module docstring); with
    ``fanout``, its co-batch's (the owned training vertices and their sampled dependencies)."""
    owned = (part >= ranks.start) & (part < ranks.stop)
    seeds = owned if fanout is None else owned & data.train_mask
    kept = kept_edges(data, owned, rate, seed) if fanout is None else sampled_in_edges(data, fanout, seed)
    inside = expansion_hops(data, seeds, hops, kept) >= 0
    ids = inside.nonzero().view(-1)
    graph = induced_subgraph(data, inside)
    src, dst = data.edge_index
    kept_degree = None
    if fanout is None:
        graph.edge_index = graph.edge_index[:, kept[inside[src] & inside[dst]]]
    else:
        kept_degree = torch.zeros(data.num_nodes, dtype=torch.long)
        kept_degree[ids] = torch.bincount(graph.edge_index[1], minlength=ids.numel())
    graph.coalesced_undirected = False
    for mask in ("train_mask", "val_mask", "test_mask"):
        getattr(graph, mask)[~seeds[ids] if mask == "train_mask" else ~owned[ids]] = False
    if fanout is not None:
        graph.val_mask[:] = False
        graph.test_mask[:] = False
    parts = len(ranks)
    owner = (torch.zeros(ids.numel(), dtype=torch.long) if parts == 1 or ids.numel() <= parts
             else metis_partition(graph, parts, seed))
    return ServerGraph(graph, ids, owner + ranks.start, owned, kept_degree)


def carve_rank(server: ServerGraph, data: GraphData, rank: int, world_size: int, rate: float) -> dict:
    """Rank ``rank``'s local graph in its server's expanded subgraph (:func:`carve_preloaded`)."""
    fields = carve_part(server.graph, server.owner, rank, world_size)
    global_ids = server.ids[fields["global_ids"]]
    fields["global_ids"] = global_ids
    fields["in_degree"] = torch.bincount(data.edge_index[1], minlength=data.num_nodes)[global_ids]
    if rate < 1.0:
        from_outside = ~server.owned[global_ids[fields["edge_src"]]]
        fields["edge_scale"] = torch.where(from_outside, 1.0 / rate, 1.0).double()
    if server.kept_degree is not None:
        targets = global_ids[fields["edge_dst"]]
        fields["edge_scale"] = fields["in_degree"][fields["edge_dst"]].double() / server.kept_degree[targets].double()
    fields["replicated"] = int((~server.owned[global_ids[: fields["num_inner"]]]).sum())
    return fields


def carve_preloaded(data: GraphData, part: torch.Tensor, rank: int, world_size: int, ranks_per_server: int,
                    hops: int, rate: float = 1.0, seed: int = 0, fanout: int | None = None) -> dict:
    """Rank ``rank``'s local graph under server-level preloading (module docstring), as
    :func:`~gnntrain.data.partition.carve_part`'s fields with the whole graph's ids and degrees,
    an ``edge_scale`` where the expansion was sampled, and ``replicated``: how many of its inner
    rows belong to other servers."""
    ranks = server_ranks(rank, world_size, ranks_per_server)
    return carve_rank(server_graph(data, part, ranks, hops, rate, seed, fanout), data, rank, world_size, rate)


def preloaded_stats(data: GraphData, part: torch.Tensor, world_size: int, ranks_per_server: int, hops: int,
                    rate: float = 1.0, seed: int = 0, fanout: int | None = None) -> dict:
    """Every rank's local graph under preloading as :func:`~gnntrain.data.partition.partition_stats`
    counts a part (inner rows with the replicated ones, halo rows, rows sent, in-edges), with
    ``replicated_nodes`` per rank: what the memory estimate reads."""
    ranks = []
    for first in range(0, world_size, ranks_per_server):
        server = server_graph(data, part, server_ranks(first, world_size, ranks_per_server), hops, rate, seed, fanout)
        ranks += [carve_rank(server, data, r, world_size, rate) for r in server_ranks(first, world_size, ranks_per_server)]
    return {"parts": world_size, "inner_nodes": [r["num_inner"] for r in ranks],
            "boundary_nodes": [r["num_halo"] for r in ranks], "sent_rows": [sum(r["send_splits"]) for r in ranks],
            "inner_edges": [r["edge_src"].numel() for r in ranks], "replicated_nodes": [r["replicated"] for r in ranks]}

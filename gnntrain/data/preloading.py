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
distributed to the GPUs in a server"): an owned vertex stays with its part's rank; a vertex of
hop ``k`` goes to the server's rank that holds the most of its out-neighbours of hop ``k - 1``
(the lowest such rank on a tie), so the dependencies grow outward from the partition that reads
them. The paper partitions the extracted graph again (METIS); this keeps the cluster's
partition and its locality without a second METIS run per server (our choice).

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
"""

from __future__ import annotations

import torch

from gnntrain.data.graph_data import GraphData, induced_subgraph
from gnntrain.data.partition import carve_part
from gnntrain.rng import keyed

SAMPLING_STREAM = 0x6772616E
"""Mixed into the sampling's key, so its draws share nothing with other keyed draws of the seed."""


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


def assign_expansion(data: GraphData, part: torch.Tensor, hop: torch.Tensor, kept: torch.Tensor,
                     ranks: range) -> torch.Tensor:
    """The world rank that computes each vertex of the expansion (-1 outside it): an owned vertex
    its part's, a hop-``k`` vertex the server rank holding most of its hop-``k - 1`` out-neighbours."""
    owner = torch.where(hop == 0, part.long(), -1)
    src, dst = data.edge_index[:, kept]
    width = len(ranks)
    for k in range(1, int(hop.max()) + 1):
        step = (hop[src] == k) & (hop[dst] == k - 1)
        voters, votes_for = src[step], owner[dst[step]] - ranks.start
        nodes, slot = torch.unique(voters, return_inverse=True)
        votes = torch.zeros(nodes.numel() * width, dtype=torch.long).index_add_(
            0, slot * width + votes_for, torch.ones_like(slot))
        owner[nodes] = votes.view(-1, width).argmax(dim=1) + ranks.start
    return owner


def carve_preloaded(data: GraphData, part: torch.Tensor, rank: int, world_size: int, ranks_per_server: int,
                    hops: int, rate: float = 1.0, seed: int = 0) -> dict:
    """Rank ``rank``'s local graph under server-level preloading (module docstring), as
    :func:`~gnntrain.data.partition.carve_part`'s fields with the whole graph's ids and degrees,
    an ``edge_scale`` where the expansion was sampled, and ``replicated``: how many of its inner
    rows belong to other servers."""
    ranks = server_ranks(rank, world_size, ranks_per_server)
    owned = (part >= ranks.start) & (part < ranks.stop)
    kept = kept_edges(data, owned, rate, seed)
    hop = expansion_hops(data, owned, hops, kept)
    owner = assign_expansion(data, part, hop, kept, ranks)
    inside = hop >= 0
    ids = inside.nonzero().view(-1)
    replica = inside & ~owned
    server_graph = induced_subgraph(data, inside)
    src, dst = data.edge_index
    drop = ~kept[(inside[src] & inside[dst])]
    server_graph.edge_index = server_graph.edge_index[:, ~drop]
    for mask in ("train_mask", "val_mask", "test_mask"):
        getattr(server_graph, mask)[replica[ids]] = False
    fields = carve_part(server_graph, owner[ids], rank, world_size)
    global_ids = ids[fields["global_ids"]]
    fields["global_ids"] = global_ids
    fields["in_degree"] = torch.bincount(dst, minlength=data.num_nodes)[global_ids]
    if rate < 1.0:
        from_outside = ~owned[global_ids[fields["edge_src"]]]
        fields["edge_scale"] = torch.where(from_outside, 1.0 / rate, 1.0).double()
    fields["replicated"] = int(replica[global_ids[: fields["num_inner"]]].sum())
    return fields


def preloaded_stats(data: GraphData, part: torch.Tensor, world_size: int, ranks_per_server: int, hops: int,
                    rate: float = 1.0, seed: int = 0) -> dict:
    """Every rank's local graph under preloading as :func:`~gnntrain.data.partition.partition_stats`
    counts a part (inner rows with the replicated ones, halo rows, rows sent, in-edges), with
    ``replicated_nodes`` per rank: what the memory estimate reads."""
    ranks = [carve_preloaded(data, part, r, world_size, ranks_per_server, hops, rate, seed) for r in range(world_size)]
    return {"parts": world_size, "inner_nodes": [r["num_inner"] for r in ranks],
            "boundary_nodes": [r["num_halo"] for r in ranks], "sent_rows": [sum(r["send_splits"]) for r in ranks],
            "inner_edges": [r["edge_src"].numel() for r in ranks], "replicated_nodes": [r["replicated"] for r in ranks]}

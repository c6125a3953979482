"""GNNPipe's graph chunks and their split among the ranks of a graph-parallel group.

The vertex set is cut into K chunks by the job's locality-aware partition (METIS, the
partition cache of :mod:`gnntrain.data.partition`; GNNPipe Sec. 3.2.2). In hybrid parallelism
(Sec. 3.2.3) every chunk is cut again into G sub-chunks, one per rank of a stage's
graph-parallel group: METIS on the chunk's induced subgraph (a choice: the paper only says the
group "partitions the chunk"). Rank ``g`` of every stage owns sub-chunk ``g`` of every chunk, so
over the epoch it owns the union of them, a G-way partition of the graph whose halo is what the
group exchanges.
"""

from __future__ import annotations

import torch

from gnntrain.data.graph_data import GraphData
from gnntrain.data.partition import metis_partition
from gnntrain.errors import ConfigError


def _induced(data: GraphData, nodes: torch.Tensor) -> GraphData:
    """The subgraph of ``data`` on ``nodes`` (renumbered ``0..len-1``), topology only."""
    local = torch.full((data.num_nodes,), -1, dtype=torch.long)
    local[nodes] = torch.arange(nodes.numel())
    src, dst = local[data.edge_index]
    keep = (src >= 0) & (dst >= 0)
    empty = torch.zeros(nodes.numel(), dtype=torch.bool)
    return GraphData(data.name, torch.empty(nodes.numel(), 0), torch.zeros(nodes.numel(), dtype=torch.long),
                     torch.stack([src[keep], dst[keep]]), empty, empty, empty, 1)


def split_chunks(data: GraphData, chunk: torch.Tensor, chunks: int, ways: int, seed: int) -> torch.Tensor:
    """The member (``0..ways-1``) that owns each node: each of the ``chunks`` chunks of ``chunk``
    (a ``[N]`` tensor of chunk ids) cut ``ways`` ways by METIS on its induced subgraph; where
    METIS would leave a member empty (small or scattered chunks) the chunk is dealt in
    consecutive slices instead. Raises ConfigError where a chunk has fewer than ``ways`` nodes
    (or none)."""
    member = torch.zeros(data.num_nodes, dtype=torch.long)
    for k in range(chunks):
        nodes = (chunk == k).nonzero().view(-1)
        if nodes.numel() < ways or nodes.numel() == 0:
            raise ConfigError(f"chunk {k} of strategy.chunks={chunks} has {nodes.numel()} node(s), fewer than "
                              f"strategy.graph_parallel={ways} (or none); valid: fewer strategy.chunks")
        if ways == 1:
            continue
        split = metis_partition(_induced(data, nodes), ways, seed) if nodes.numel() >= 2 * ways else None
        if split is None or bool((torch.bincount(split, minlength=ways) == 0).any()):
            split = torch.arange(nodes.numel()) * ways // nodes.numel()
        member[nodes] = split
    return member

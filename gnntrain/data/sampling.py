"""Node-wise neighbour sampling on a torch CSR, keyed so that every system builds the same
blocks for the same roots (GraphSAGE's sampler; HopGNN Sec. 2 and 4).

Sampling is keyed, not drawn from a stream (:mod:`gnntrain.rng.keyed`): the neighbours node ``v``
keeps as a target of layer ``l`` in iteration ``i`` of epoch ``e`` are the ``fanout[l]`` in-edges
of ``v`` with the smallest priorities ``hash(seed, e, i, l, edge)``, all of them when ``v`` has
no more. So a node's sample does not depend on which roots brought it in: the blocks of a set of
roots are the union of the blocks of each root (its *micrograph*), and a model trained on the
micrographs of a mini-batch, in any grouping, computes the same outputs as one trained on the
mini-batch.

Blocks (DGL's message-flow graphs). The nodes of a sample are ordered by the hop at which they
first appear (roots first, hop 1's new nodes next, ...; within a hop by global id). With ``L``
layers, layer ``l`` (0-based) aggregates into the nodes of hop ``<= L-1-l`` from those of hop
``<= L-l``: its targets are a prefix of its sources and its output rows are the next layer's
input rows, so per-node state (GCNII's ``h0``) is read by prefix. Each block is a
:class:`~gnntrain.data.local_graph.LocalGraph` (targets as inner nodes, the other sources as halo, no halo
exchange) so the model layers run on it unchanged.

Weights: a sampled edge ``u -> v`` carries ``edge_scale = deg(v) / |S(v)|`` with global degrees,
so GCN's ``D^-1/2 (A+I) D^-1/2`` rows become an unbiased estimate of the full-graph row and
SAGE's and FiLM's means become the mean over the sample; with ``fanout >= deg(v)`` every weight
is the full graph's. (Our choice: DGL's ``norm="both"`` on a block uses the block's own degrees,
which depend on the other roots of the batch and would make micrographs differ from it.)

Devices. Sampling runs where the topology is (:meth:`Topology.to`): every tensor it makes is on
the device of the topology and the roots, in torch operations only, and its one random input is
the keyed hash, integer arithmetic that every device computes alike. So a sample drawn on a GPU
is the sample drawn on the CPU for the same seed, node for node and edge for edge, and a GPU
run's iterations never wait on the host to sample or copy. The sampler asks the device for
sizes only where the next tensor's size depends on them (the kept edges, the new nodes of a
hop): one wait per ``unique`` and per selection.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from gnntrain.rng import keyed
from gnntrain.data.graph_data import GraphData
from gnntrain.data.local_graph import LocalGraph, weight_dtype

def sampling_key(seed: int, epoch: int, iteration: int, layer: int) -> int:
    """The key of one layer's sampling in one iteration (:func:`gnntrain.rng.keyed.key`)."""
    return keyed.key(seed, epoch, iteration, layer)


@dataclass
class Topology:
    """The whole graph's in-edges as CSR: the sources of ``v`` are
    ``indices[indptr[v]:indptr[v+1]]``, each in-edge's id its position."""

    indptr: torch.Tensor
    indices: torch.Tensor
    in_degree: torch.Tensor
    """Global in-degree of every node, int64."""
    max_degree: int
    """The largest in-degree: a fan-out at least this keeps every edge, with nothing to draw."""

    @classmethod
    def of(cls, data: GraphData) -> Topology:
        src, dst = data.edge_index
        order = torch.argsort(dst * data.num_nodes + src)
        in_degree = torch.bincount(dst, minlength=data.num_nodes)
        indptr = torch.zeros(data.num_nodes + 1, dtype=torch.long)
        indptr[1:] = torch.cumsum(in_degree, 0)
        return cls(indptr, src[order], in_degree, int(in_degree.max()) if data.num_nodes else 0)

    def to(self, device: torch.device | str) -> Topology:
        """This topology on ``device``, where :meth:`sample` then runs."""
        return replace(self, indptr=self.indptr.to(device), indices=self.indices.to(device),
                       in_degree=self.in_degree.to(device))

    @property
    def num_nodes(self) -> int:
        return self.in_degree.numel()

    def sample(self, targets: torch.Tensor, fanout: int, key: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(source node, target position in ``targets``) of the in-edges each target keeps,
        grouped by target in ``targets``' order (``targets`` on the topology's device)."""
        degree = self.in_degree[targets]
        edge, target_pos = _ranges(self.indptr[targets], degree)
        if fanout < self.max_degree:
            first = torch.cumsum(degree, 0) - degree
            order = torch.argsort(target_pos.double() + keyed.uniform(key, edge), stable=True)
            rank = torch.arange(order.numel(), device=order.device) - first[target_pos[order]]
            edge = edge[order][rank < fanout]
            target_pos = target_pos[order][rank < fanout]
        return self.indices[edge], target_pos


def _ranges(starts: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` of every ``i`` concatenated,
    and the ``i`` each came from."""
    owner = torch.repeat_interleave(torch.arange(lengths.numel(), device=lengths.device), lengths)
    first = torch.cumsum(lengths, 0) - lengths
    return starts[owner] + torch.arange(owner.numel(), device=owner.device) - first[owner], owner


@dataclass
class SampledBlocks:
    nodes: torch.Tensor
    """Global ids of every node of the sample, by hop of first appearance (roots first)."""
    hop_sizes: list[int]
    """Number of nodes of hop <= h, for h = 0..L."""
    blocks: list[LocalGraph]
    """One per layer, input to output."""

    @property
    def num_roots(self) -> int:
        return self.hop_sizes[0]

    @property
    def roots(self) -> torch.Tensor:
        """The roots, in the order they were given (the first of the nodes)."""
        return self.nodes[: self.num_roots]

    @property
    def input_nodes(self) -> torch.Tensor:
        """The nodes whose features the first layer reads."""
        return self.nodes


def _block(nodes: torch.Tensor, num_targets: int, src: torch.Tensor, dst: torch.Tensor,
           in_degree: torch.Tensor, fanout: int, dtype: torch.dtype) -> LocalGraph:
    """The block aggregating from ``nodes`` (local ids ``src``) into its first ``num_targets``
    (rows ``dst``), from the global in-degrees ``in_degree`` (int64, on the nodes' device); it
    carries no node data of its own (an empty ``x`` of the training dtype ``dtype``). Degrees
    and weights in :func:`~gnntrain.data.local_graph.weight_dtype`."""
    precise = weight_dtype(dtype)
    degree = in_degree[nodes[:num_targets]]
    kept = degree.clamp(max=fanout)
    empty = torch.empty(0, device=nodes.device)
    return LocalGraph(
        rank=0, world_size=1, num_inner=num_targets, num_halo=nodes.numel() - num_targets, global_ids=nodes,
        in_degree=in_degree[nodes].to(precise), edge_src=src, edge_dst=dst, recv_splits=[0],
        send_index=torch.empty(0, dtype=torch.long, device=nodes.device), send_splits=[0], x=empty.to(dtype),
        y=empty, train_mask=empty.bool(), val_mask=empty.bool(), test_mask=empty.bool(),
        edge_scale=(degree.to(precise) / kept.clamp(min=1).to(precise))[dst],
    )


def sample_blocks(topology: Topology, roots: torch.Tensor, fanouts: list[int], keys: list[int],
                  dtype: torch.dtype = torch.float32) -> SampledBlocks:
    """The blocks of ``roots`` (distinct global ids) for a model of ``len(fanouts)`` layers;
    ``keys[l]`` keys layer ``l``'s sampling (:func:`sampling_key`)."""
    return sample_groups(topology, [roots], fanouts, keys, dtype)[0]


def sample_groups(topology: Topology, groups: list[torch.Tensor], fanouts: list[int], keys: list[int],
                  dtype: torch.dtype = torch.float32) -> list[SampledBlocks]:
    """:func:`sample_blocks` of each group of roots, each node sampled once per layer however
    many groups reach it (the samples are keyed, so a group's blocks are those it gets alone):
    one sampler pass per layer over the union of the groups' targets."""
    layers = len(fanouts)
    nodes = list(groups)
    hop_sizes = [[roots.numel()] for roots in groups]
    edges: list[list[tuple[torch.Tensor, torch.Tensor]]] = [[None] * layers for _ in groups]  # type: ignore[list-item]
    for layer in reversed(range(layers)):
        union = nodes[0] if len(groups) == 1 else torch.unique(torch.cat(nodes))
        src, dst = topology.sample(union, fanouts[layer], keys[layer])
        kept = torch.bincount(dst, minlength=union.numel())
        first = torch.cumsum(kept, 0) - kept
        for g, targets in enumerate(nodes):
            if len(groups) == 1:
                group_src, group_dst = src, dst
            else:
                position = torch.searchsorted(union, targets)
                edge, group_dst = _ranges(first[position], kept[position])
                group_src = src[edge]
            nodes[g], edges[g][layer] = _grow(targets, group_src, group_dst)
            hop_sizes[g].append(nodes[g].numel())
    return [_blocks_of(n, h, e, topology.in_degree, fanouts, dtype) for n, h, e in zip(nodes, hop_sizes, edges)]


def _grow(nodes: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """``nodes`` followed by the sources ``src`` not among them (by global id), and the edges
    ``src -> nodes[dst]`` as local (source, target) ids."""
    known, device = nodes.numel(), nodes.device
    unique, inverse = torch.unique(torch.cat([nodes, src]), return_inverse=True)
    first_seen = torch.full((unique.numel(),), known + src.numel(), dtype=torch.long, device=device)
    first_seen.scatter_reduce_(0, inverse, torch.arange(inverse.numel(), device=device), "amin")
    is_fresh = first_seen >= known
    fresh = unique[is_fresh]
    local_of_unique = torch.empty(unique.numel(), dtype=torch.long, device=device)
    local_of_unique[inverse[:known]] = torch.arange(known, device=device)
    local_of_unique[is_fresh] = known + torch.arange(fresh.numel(), device=device)
    return torch.cat([nodes, fresh]), (local_of_unique[inverse[known:]], dst)


def _blocks_of(nodes: torch.Tensor, hop_sizes: list[int], edges: list[tuple[torch.Tensor, torch.Tensor]],
               in_degree: torch.Tensor, fanouts: list[int], dtype: torch.dtype) -> SampledBlocks:
    """The sample of ``nodes`` (by hop) with the (source, target) local edges of its first
    ``len(edges)`` layers."""
    layers = len(hop_sizes) - 1
    blocks = []
    for layer, (src, dst) in enumerate(edges):
        width = hop_sizes[layers - layer]
        blocks.append(_block(nodes[:width], hop_sizes[layers - 1 - layer], src, dst, in_degree, fanouts[layer], dtype))
    return SampledBlocks(nodes, hop_sizes, blocks)


def pack(sample: SampledBlocks, layers: int | None = None) -> torch.Tensor:
    """The topology of ``sample``'s first ``layers`` blocks (all by default) as one int64
    tensor on the sample's device: what a method sends when a subgraph's structure travels
    (:func:`unpack`)."""
    blocks = sample.blocks[:layers]
    head = [len(sample.hop_sizes), len(blocks), *sample.hop_sizes, *(b.edge_src.numel() for b in blocks)]
    edges = [t for b in blocks for t in (b.edge_src, b.edge_dst)]
    head_tensor = torch.tensor(head, dtype=torch.long).to(sample.nodes.device, non_blocking=True)
    return torch.cat([head_tensor, sample.nodes, *edges])


def unpack(packed: torch.Tensor, in_degree: torch.Tensor, fanouts: list[int], dtype: torch.dtype) -> SampledBlocks:
    """The :class:`SampledBlocks` of a :func:`pack`, rebuilt on the packed tensor's device
    against the global in-degrees ``in_degree`` (int64, on that device)."""
    hops, count = packed[:2].tolist()
    head = packed[2: 2 + hops + count].tolist()  # a second read: its length is in the first
    hop_sizes, sizes = head[:hops], head[hops:]
    start = 2 + hops + count
    nodes = packed[start: start + hop_sizes[-1]]
    start += hop_sizes[-1]
    edges = []
    for size in sizes:
        edges.append((packed[start: start + size], packed[start + size: start + 2 * size]))
        start += 2 * size
    return _blocks_of(nodes, hop_sizes, edges, in_degree, fanouts, dtype)

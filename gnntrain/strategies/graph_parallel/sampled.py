"""BNS-GCN (Wan et al., MLSys 2022): random boundary-node sampling, and the edge-sampling
baselines of its Table 9.

``bns`` (Algorithm 1): at the start of every epoch each rank keeps each of its halo (boundary)
nodes independently with probability ``p`` (line 4), tells the owners which rows it kept
(line 6; a 1-bit-per-boundary-node mask, recorded as ``sample_index`` bytes) and trains on the
subgraph induced by its inner nodes and the kept halo nodes (line 5): every layer exchanges
only the kept rows' features (forward) and gradients (backward). Kept halo edges are weighted
by ``1/p`` (the matrix ``S`` of Appendix A) while normalisations keep the full graph's degrees,
so sum and mean aggregations (GCN, GraphSAGE, GCNII, GNN-FiLM) are unbiased. Softmax
aggregations (GAT, DeepGCN's GENConv) normalise over the kept neighbourhood and take no
``1/p`` weight: a softmax already sums to one. ``p = 1`` is the vanilla strategy (no sampling,
no mask traffic); ``p = 0`` trains every partition in isolation (no halo traffic at all).

Table 9's baselines drop *edges* instead, as many as BNS drops in expectation, which is
``(1 - p)`` times the number of cut edges (in-edges from halo nodes):

* ``bes`` (boundary edge sampling) keeps each cut edge with probability ``p``;
* ``dropedge`` keeps each edge of the whole graph with probability
  ``k = 1 - (1 - p) * cut / edges`` (global counts).

Kept edges are weighted by 1/(keep probability), as for BNS. A halo row is exchanged when at
least one kept edge reads it, so these baselines move far more rows than BNS at the same
number of dropped edges: a boundary node is usually read by several cut edges.

Evaluation runs on the full graph with a full exchange. Randomness: one generator per rank,
seeded from ``strategy.seed`` (the run's seed by default) and the rank, drawn once per epoch;
it never touches the global RNG, so dropout masks match the vanilla run's. The generator is a
CPU one on every device, so a seed draws the same samples on CPU and GPU; the draws reach the
device through a pinned buffer (:mod:`gnntrain.parallel.pinned`).

``epoch_metrics`` reports ``sampling_time`` (slowest rank): drawing the sample, exchanging the
masks, building the sampled graph and its sparse matrices (Table 12's overhead); and
``dropped_edges`` (all ranks), which makes the matched-drop comparison checkable.
"""

from __future__ import annotations


from typing import Callable

import torch
import torch.distributed as dist

from gnntrain.timing.clock import Stopwatch
from gnntrain.comm.bitpack import pack, packed_size, unpack
from gnntrain.comm.communicator import Communicator
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import HaloSource, MessagePassingModel
from gnntrain.parallel.halo import HaloExchange
from gnntrain.parallel.pinned import PinnedStaging
from gnntrain.strategies.base import Tallies
from gnntrain.strategies.graph_parallel.config import SamplingConfig
from gnntrain.strategies.graph_parallel.strategy import HaloPolicy, halo_wire

def halo_read_by(graph: LocalGraph, edge_keep: torch.Tensor) -> torch.Tensor:
    """Boolean mask over halo nodes: those that are the source of a kept in-edge."""
    used = torch.zeros(graph.num_local, dtype=torch.bool, device=graph.device)
    used[graph.edge_src[edge_keep]] = True
    return used[graph.num_inner:]

def draw_sample(method: str, graph: LocalGraph, is_cut: torch.Tensor, cut_edges: torch.Tensor,
                draw: Callable[[int], torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(kept in-edges, kept halo nodes) of one sample of ``graph`` by ``method`` (module
    docstring); ``is_cut`` marks its in-edges from halo nodes (``cut_edges``: their positions),
    ``draw(n)`` makes ``n`` keep draws."""
    if method == "bns":
        halo_keep = draw(graph.num_halo)
        edge_keep = ~is_cut
        edge_keep[cut_edges] = halo_keep[graph.edge_src[cut_edges] - graph.num_inner]
    elif method == "bes":
        edge_keep = ~is_cut
        edge_keep[cut_edges] = draw(cut_edges.numel())
        halo_keep = halo_read_by(graph, edge_keep)
    else:
        edge_keep = draw(graph.edge_src.numel())
        halo_keep = halo_read_by(graph, edge_keep)
    return edge_keep, halo_keep


def sampled_graph(graph: LocalGraph, edge_keep: torch.Tensor, edge_scale: torch.Tensor | None, halo_keep: torch.Tensor,
                  send_index: torch.Tensor, send_splits: list[int]) -> LocalGraph:
    """The sampled graph of ``graph``: every inner node, the in-edges in ``edge_keep`` (with weights
    multiplied by ``edge_scale[edge_keep]``), the halo nodes in ``halo_keep`` (which must
    include every source of a kept edge) renumbered in their original order, and the send
    plan the peers' samples call for."""
    keep_local = torch.cat([torch.ones(graph.num_inner, dtype=torch.bool, device=graph.device), halo_keep])
    new_id = torch.cumsum(keep_local, 0) - 1
    kept_edges = edge_keep.nonzero().view(-1)
    recv_splits = kept_per_block(halo_keep, graph.recv_splits)
    return LocalGraph(
        rank=graph.rank,
        world_size=graph.world_size,
        num_inner=graph.num_inner,
        num_halo=sum(recv_splits),
        global_ids=graph.global_ids[keep_local],
        in_degree=graph.in_degree[keep_local],
        edge_src=new_id[graph.edge_src[kept_edges]],
        edge_dst=graph.edge_dst[kept_edges],
        recv_splits=recv_splits,
        send_index=send_index,
        send_splits=send_splits,
        x=graph.x, y=graph.y,
        train_mask=graph.train_mask, val_mask=graph.val_mask, test_mask=graph.test_mask,
        edge_scale=None if edge_scale is None else edge_scale[kept_edges],
        sampled_from=(graph, edge_keep),
    )


def kept_per_block(keep: torch.Tensor, sizes: list[int]) -> list[int]:
    """How many of each consecutive block (``sizes``) of the mask ``keep`` are set (one read of
    the device)."""
    if not sizes:
        return []
    return torch.stack([block.sum() for block in keep.split(sizes)]).tolist()


def _inverse(q: float) -> float:
    return 1.0 / q if q > 0 else 0.0


class BoundarySampling(HaloPolicy):
    """``strategy.name`` in {bns, bes, dropedge}; ``strategy.p`` as in the module docstring."""

    def __init__(self, config: SamplingConfig, graph: LocalGraph, comm: Communicator, model: MessagePassingModel) -> None:
        self.method, self.p = config.name, config.p
        self.graph, self.comm = graph, comm
        self.full = HaloExchange(graph, comm)
        self.wire = halo_wire(config)
        self.training_full = HaloExchange(graph, comm, wire=self.wire)
        self.generator = torch.Generator().manual_seed(config.seed * 65_536 + comm.rank)
        self.is_cut = graph.edge_src >= graph.num_inner
        self.cut_edges = self.is_cut.nonzero().view(-1)
        self.staging = PinnedStaging(graph.device)
        """The epoch's draws (made on the host) go to the device through it."""
        self.keep_prob = self.p
        if self.method == "dropedge":
            counts = torch.tensor([float(self.is_cut.sum()), float(self.is_cut.numel())], dtype=torch.float64,
                                  device=comm.device)
            cut, edges = comm.reduce_untracked(counts, dist.ReduceOp.SUM).tolist()
            self.keep_prob = 1.0 - (1.0 - self.p) * cut / edges if edges else 1.0
        # weight of every in-edge when kept: 1/keep-probability where edges are sampled
        sampled_edges = torch.ones_like(self.is_cut) if self.method == "dropedge" else self.is_cut
        self.edge_scale = torch.where(sampled_edges, _inverse(self.keep_prob), 1.0).to(graph.in_degree.dtype)
        self.sampled: LocalGraph | None = None
        self.sampling = Stopwatch(graph.device)
        """Times drawing the epoch's sample, exchanging the masks and building the sampled graph."""

    def training_view(self, epoch: int) -> tuple[LocalGraph, HaloSource]:
        if self.keep_prob == 1.0:
            return self.graph, self.training_full
        self.sampling.reset()
        with self.sampling:
            edge_keep, halo_keep = self._sample()
            send_index, send_splits = self._rows_peers_kept(halo_keep)
            self.sampled = sampled_graph(self.graph, edge_keep, self.edge_scale, halo_keep, send_index, send_splits)
        return self.sampled, HaloExchange(self.sampled, self.comm, wire=self.wire)

    def evaluation_halo(self) -> HaloSource:
        return self.full

    def _sample(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(kept in-edges, kept halo nodes) for this epoch."""

        def draw(n: int) -> torch.Tensor:
            return self.staging.one(torch.rand(n, generator=self.generator) < self.keep_prob)

        return draw_sample(self.method, self.graph, self.is_cut, self.cut_edges, draw)

    def _rows_peers_kept(self, halo_keep: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        """Send each owner a 1-bit mask of the halo rows kept from it; receive the peers' masks
        over the rows this rank sends them. Returns the epoch's send index and splits."""
        g = self.graph
        if self.keep_prob == 0.0:
            return g.send_index[:0], [0] * g.world_size
        masks = torch.cat([pack(block, 1) for block in halo_keep.split(g.recv_splits)])
        peer_masks = self.comm.all_to_all_start(
            masks, [packed_size(n, 1) for n in g.recv_splits], [packed_size(n, 1) for n in g.send_splits],
            "sample_index").wait()
        blocks = peer_masks.split([packed_size(n, 1) for n in g.send_splits])
        send_keep = torch.cat([unpack(b, 1, n).bool() for b, n in zip(blocks, g.send_splits)])
        return g.send_index[send_keep], kept_per_block(send_keep, g.send_splits)

    def epoch_tallies(self) -> Tallies:
        if self.sampled is None:
            return Tallies()
        return Tallies(summed={"dropped_edges": float(self.graph.edge_src.numel() - self.sampled.edge_src.numel())},
                       peak={"sampling_time": self.sampling.seconds + self.sampled.operator_build_time})

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """Of an epoch: ``sampling_time`` (slowest rank) and ``dropped_edges`` (all ranks)."""
        return {name: totals[name] for name in ("sampling_time", "dropped_edges") if name in totals}

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])

"""GraNNDis (Song et al., PACT'24, arXiv 2311.06837): flexible preloading and expansion-aware
sampling on a cluster of servers, each of several ranks.

Every server holds the dependencies of the vertices its ranks own, split among its ranks
(:mod:`gnntrain.data.preloading`: which vertices, which rank computes each, the sampled
expansion), so each layer's halo exchange, forward and backward, runs between the ranks of one
server, over the fast link within a node; between servers only the gradient all-reduce moves
(the artifact's DDP). The servers are the cluster description's nodes: ``network.gpus_per_node``
consecutive ranks each (a server per rank where the description has no nodes: then every rank
preloads all its dependencies and exchanges nothing). The price is the replicated vertices'
compute and memory: a server computes every layer for its whole expansion (``replicated_rows``
per epoch: the rows the ranks hold of other servers' vertices).

With every dependency preloaded (``strategy.hops`` null, ``strategy.rate`` 1) an epoch equals
single-process full-graph training: every row an owned vertex needs is the full graph's, dropout
is keyed by global node id, and the loss counts each training vertex once, on its owner.
Expansion-aware sampling (``strategy.rate`` < 1) and a shallower expansion (``strategy.hops``
below the model's layers) change the model's inputs: they trade accuracy for compute and memory.

*Cooperative batching* (``strategy.fanout``, Sec. 5.2): each epoch trains the server's co-batch
(:mod:`gnntrain.data.preloading`: its training vertices and their sampled dependencies, split
among its ranks, halos within the server), while evaluation scores the rank's own part of the
whole graph with the family's halo exchange over every rank (``eval`` traffic, which crosses
nodes): the artifact scores on the whole graph too. ``model.precompute_first`` is refused with
it (the first layer's aggregation would be the part's, not the co-batch's).

Not implemented: the paper's partial preloading (``k < L`` hops preloaded, the later layers
exchanging halos between servers, Fig. 4), which its artifact does not implement either.
"""

from __future__ import annotations

import torch

from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.data.local_graph import LocalGraph, local_graph_from_part, weight_dtype
from gnntrain.data.preloading import carve_preloaded, preloaded_stats
from gnntrain.errors import ConfigError
from gnntrain.parallel.halo import HaloExchange
from gnntrain.parallel.mesh import Layout, WorkerContext
from gnntrain.strategies.base import Tallies
from gnntrain.strategies.graph_parallel.strategy import GraphParallel


def ranks_per_server(run: RootConfig) -> int:
    """Ranks per server: the cluster description's ranks per node (1 where it has no nodes)."""
    return run.network.gpus_per_node or 1


def preloaded_hops(run: RootConfig) -> int:
    """Hops a server preloads: ``strategy.hops``, or the model's message-passing layers."""
    return run.strategy.hops if run.strategy.hops is not None else run.model.layers


class ServerPreloading(GraphParallel):
    """The graph-parallel strategy on preloaded servers: the whole graph is carved on each rank
    (its server's expansion reaches beyond any part file)."""

    loads_parts = False

    @staticmethod
    def layout(run: RootConfig, world_size: int) -> Layout:
        """The family's layout; batch norm refused (its statistics would count replicated rows)."""
        if str(run.model.norm) == "batch":
            raise ConfigError("model.norm=batch with strategy=granndis: its statistics would count the rows a server "
                              "replicates; valid: model.norm=none or layer")
        if run.strategy.fanout is not None and run.model.precompute_first:
            raise ConfigError(f"model.precompute_first=true with strategy.fanout={run.strategy.fanout}: a co-batch's "
                              "first layer aggregates its own sample; valid: model.precompute_first=false, or "
                              "strategy.fanout=null")
        return GraphParallel.layout(run, world_size)

    @staticmethod
    def rank_stats(run: RootConfig, job: JobData) -> dict:
        """Each rank's preloaded local graph, replicated rows included: what the estimate made
        before training counts (the replicated rows' features, activations and edges)."""
        return preloaded_stats(job.data, job.part, job.stats["parts"], ranks_per_server(run), preloaded_hops(run),
                               run.strategy.rate, run.strategy.seed, run.strategy.fanout)

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        super().__init__(run, ctx, job)
        self.part: LocalGraph | None = None
        if run.strategy.fanout is not None:
            self.part = GraphParallel.local_graph(self, run, job, self.graph.dtype).to(ctx.device)
            self.part_halo = HaloExchange(self.part, self.comm)

    def local_graph(self, run: RootConfig, job: JobData, dtype: torch.dtype) -> LocalGraph:
        """The rank's share of its server's expansion, or of its co-batch."""
        fields = carve_preloaded(job.data, job.part, self.comm.rank, self.comm.world_size, ranks_per_server(run),
                                 preloaded_hops(run), run.strategy.rate, run.strategy.seed, run.strategy.fanout)
        self.replicated = fields.pop("replicated")
        graph = local_graph_from_part(fields, dtype)
        if graph.edge_scale is not None:
            graph.edge_scale = graph.edge_scale.to(weight_dtype(dtype))
        return graph

    def evaluate(self) -> torch.Tensor:
        """The family's evaluation; with a co-batch, on the rank's part of the whole graph, its
        halo rows from every rank."""
        if self.part is None:
            return super().evaluate()
        counts = self.step.local_eval_counts(self.part_halo, self.part)
        if self.whole_graph_scores is not None:
            counts += self.whole_graph_scores.counts(self.step.model)
        return counts

    def epoch_tallies(self) -> Tallies:
        tallies = super().epoch_tallies()
        tallies.summed["replicated_rows"] = float(self.replicated)
        return tallies

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """The family's figures and ``replicated_rows``: the rows all ranks hold of other servers'
        vertices (in the co-batch, with ``strategy.fanout``)."""
        return {**super().epoch_metrics(totals), "replicated_rows": totals["replicated_rows"]}

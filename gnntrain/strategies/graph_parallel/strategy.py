"""The graph-parallel family's strategy class, which runs every method of the family with the
method's halo policy (:mod:`gnntrain.strategies.graph_parallel`)."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from gnntrain.comm.communicator import Communicator
from gnntrain.comm.meter import CommMeter
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.data.local_graph import LocalGraph, local_graph_from_part
from gnntrain.models.gnn import HaloSource
from gnntrain.parallel.full_batch import FullBatchStep
from gnntrain.parallel.halo import HaloExchange
from gnntrain.parallel.inductive import WholeGraphScores
from gnntrain.parallel.mesh import Layout, WorkerContext
from gnntrain.strategies import registry
from gnntrain.strategies.base import Strategy, Tallies
from gnntrain.strategies.graph_parallel.config import GraphParallelConfig, HalfHalosConfig


def halo_wire(config: GraphParallelConfig) -> torch.dtype | None:
    """The 16-bit dtype ``strategy.halo_dtype`` sends training halo rows in; None for train.dtype
    and for a method without the key."""
    if not isinstance(config, HalfHalosConfig) or config.halo_dtype is None:
        return None
    return getattr(torch, str(config.halo_dtype))


class HaloPolicy(ABC):
    """How a graph-parallel method obtains its layers' halo rows; built as
    ``policy(strategy config, local graph, communicator, model)``. A policy with no figures of
    its own, no state beyond the model's and nothing in flight keeps the defaults below."""

    @abstractmethod
    def training_view(self, epoch: int) -> tuple[LocalGraph, HaloSource]:
        """The graph epoch ``epoch`` trains on (the rank's local graph, or a sample of it with
        the same inner nodes) and the source of its layers' halo rows."""

    @abstractmethod
    def evaluation_halo(self) -> HaloSource:
        """Halo rows for evaluation, which always runs on the rank's full local graph."""

    def epoch_tallies(self) -> Tallies:
        """This rank's policy-specific tallies of the epoch just trained (no communication)."""
        return Tallies()

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """Policy-specific figures from the tallies combined over the ranks
        (:meth:`gnntrain.strategies.base.Strategy.epoch_metrics`)."""
        return {}

    def finish(self) -> None:
        """Complete whatever is still in flight after the last epoch."""

    def state_dict(self) -> dict:
        """The policy's own state for a checkpoint (in-flight halos waited for)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`'s result."""


class GraphParallel(Strategy):
    """A graph-parallel strategy: mesh ``gp`` = all workers, one partition per worker, which is
    all a rank loads."""

    loads_parts = True

    @staticmethod
    def layout(run: RootConfig, world_size: int) -> Layout:
        return Layout({"gp": world_size}, parts=world_size)

    @staticmethod
    def rank_stats(run: RootConfig, job: JobData) -> dict:
        """What each rank's local graph holds, as :func:`~gnntrain.data.partition.partition_stats`
        counts it, for the memory estimate: its part's."""
        return job.stats

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        self.meter = CommMeter()
        self.comm = Communicator.of_mesh_axis(ctx, "gp", self.meter)
        dtype = getattr(torch, run.train.dtype)
        self.graph = self.local_graph(run, job, dtype).to(ctx.device)
        self.step = FullBatchStep(run, job.facts, self.graph, stats=self.comm, sync=self.comm)
        policy = registry.method(run.strategy.name).implementation_class
        self.policy: HaloPolicy = policy(run.strategy, self.graph, self.comm, self.step.model)
        if run.model.precompute_first:
            self.step.first_layer_halo = HaloExchange(self.graph, self.comm)
        self.whole_graph_scores = (WholeGraphScores(job.whole, dtype, ctx.device, job.facts.multilabel)
                                   if job.whole is not None and self.comm.rank == 0 else None)

    def local_graph(self, run: RootConfig, job: JobData, dtype: torch.dtype) -> LocalGraph:
        """The rank's local graph: its part's."""
        return local_graph_from_part(job.part_fields(self.comm.rank, self.comm.world_size), dtype)

    def train_epoch(self, epoch: int) -> torch.Tensor:
        return self.step.train(epoch, *self.policy.training_view(epoch))

    def evaluate(self) -> torch.Tensor:
        counts = self.step.local_eval_counts(self.policy.evaluation_halo())
        if self.whole_graph_scores is not None:
            counts += self.whole_graph_scores.counts(self.step.model)
        return counts

    def epoch_tallies(self) -> Tallies:
        tallies = self.policy.epoch_tallies()
        tallies.peak["saved_for_backward_mb"] = self.step.saved_for_backward / 2**20
        return tallies

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """The policy's figures, and ``saved_for_backward_mb``: the most any rank's forward kept
        for its backward (BNS-GCN's Eq. 4 memory; the memory straggler sets what a part needs)."""
        return {**self.policy.epoch_metrics(totals), "saved_for_backward_mb": totals["saved_for_backward_mb"]}

    def finish(self) -> None:
        self.policy.finish()

    def state_dict(self) -> dict:
        return {**self.step.state_dict(), "policy": self.policy.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.step.load_state_dict(state)
        self.policy.load_state_dict(state["policy"])


"""Data parallelism over full-graph training (``strategy=data_parallel``).

The workers form a ``dp x gp`` mesh (``strategy.graph_parallel`` = G ranks per replica, so
``dp = workers / G`` replicas). Each replica holds the whole graph: G = 1, every rank holds it
all; G > 1, the replica's ``gp`` group holds it in G METIS parts and exchanges halo rows
synchronously (as ``vanilla`` does) within the group. The training nodes are dealt to the
replicas: node ``v`` with position ``i`` among the training nodes (global id order) belongs to
replica ``i mod dp``, and so do the validation and test nodes for scoring. Each rank's loss is
the sum over its replica's training nodes among its inner nodes divided by the global number
of training nodes; gradients are summed over the whole mesh (both axes), so every training
node's loss counts exactly once and one step equals single-process full-graph training.
Cross-rank statistics (batch norm) are summed within the ``gp`` group: every replica
normalises over the whole graph.

The price is redundant compute (each replica runs the whole graph's forward and backward) for
a gradient all-reduce instead of per-layer halo traffic; it is the minimal second family of
parallelism and the reference for the mesh-driven interface.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator
from gnntrain.comm.meter import CommMeter
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.errors import ConfigError
from gnntrain.data.local_graph import LocalGraph, build_local_graph
from gnntrain.parallel.full_batch import SPLITS, FullBatchStep
from gnntrain.parallel.halo import HaloExchange
from gnntrain.parallel.mesh import Layout, WorkerContext
from gnntrain.strategies.base import Strategy


def replica_share(graph: LocalGraph, global_mask: torch.Tensor, replica: int, replicas: int) -> torch.Tensor:
    """The rows of ``graph``'s inner nodes that are in ``global_mask`` (the whole graph's, on
    the host) and dealt to ``replica`` (position among the mask's nodes, in global id order,
    modulo ``replicas``), on the graph's device."""
    position = torch.cumsum(global_mask.long(), 0) - 1
    owner = torch.where(global_mask, position % replicas, -1).to(graph.device)
    return owner[graph.global_ids[: graph.num_inner]] == replica


class DataParallel(Strategy):
    @staticmethod
    def layout(run: RootConfig, world_size: int) -> Layout:
        group = run.strategy.graph_parallel
        if world_size % group:
            raise ConfigError(f"strategy.graph_parallel={group} must divide the number of workers ({world_size}); "
                              f"valid: {', '.join(str(d) for d in range(1, world_size + 1) if world_size % d == 0)}")
        return Layout({"dp": world_size // group, "gp": group}, parts=group)

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        self.meter = CommMeter()
        gp = Communicator.of_mesh_axis(ctx, "gp", self.meter)
        dp = Communicator.of_mesh_axis(ctx, "dp", self.meter)
        mesh = Communicator.of_world(ctx, self.meter)
        dtype = getattr(torch, run.train.dtype)
        graph = build_local_graph(job.data, job.part, gp.rank, gp.world_size, dtype).to(ctx.device)
        masks = {k: replica_share(graph, getattr(job.data, f"{k}_mask"), dp.rank, dp.world_size) for k in SPLITS}
        self.step = FullBatchStep(run, job.facts, graph, stats=gp, sync=mesh, masks=masks)
        self.halo = HaloExchange(graph, gp)

    def train_epoch(self, epoch: int) -> torch.Tensor:
        return self.step.train(epoch, self.step.graph, self.halo)

    def evaluate(self) -> torch.Tensor:
        return self.step.local_eval_counts(self.halo)

    def state_dict(self) -> dict:
        return self.step.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.step.load_state_dict(state)

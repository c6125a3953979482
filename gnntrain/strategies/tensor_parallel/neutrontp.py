"""NeutronTP (Ai et al., PVLDB 18(2), 2024; arXiv 2412.20379): tensor parallelism for
full-graph training.

The workers split the feature dimension instead of the graph (Sec. 3.1, Fig. 6): every rank
holds the whole graph's topology and aggregates over all of it on its own slice of the columns,
so no vertex waits for another rank and the load is balanced by construction; the dense maps
need whole rows and run on the rank's block of vertices. Between the two layouts, the split and
gather operations of Sec. 3.2 are all-to-all transposes
(:mod:`gnntrain.parallel.feature_split`): per aggregation one forward into the columns and one
back into the rows, and the same two for its gradient, ``2 (W-1) N d / W`` values each over all
ranks (Sec. 3.2's ``2 (N-1) V D / N`` per layer and direction). The model is replicated: the
weight gradients, each rank's over its rows, are summed in one all-reduce, and batch-norm
statistics over the ranks' rows, so an epoch equals single-process full-graph training
(dropout keyed by node id, loss over the rank's training rows divided by the global count).

Choices where the paper leaves room or where we differ:

* *Resting layout.* Layer inputs rest in the vertex split and each aggregation is wrapped in its
  two transposes; the paper's naive tensor parallelism (Sec. 3.2) rests in the feature split and
  gathers before the dense map. Per layer the count is the same, two transposes each way. The
  layer runs in the cheaper order for the whole graph (map first where it narrows the rows), so
  the transposes move the narrower of the layer's widths, where the paper always aggregates
  first; a first layer that aggregates first transposes the raw input every epoch, which the
  paper's feature-split storage of the input avoids.
* *Decoupled training* (Sec. 4.1: all dense maps first, then all propagation steps, two
  transposes per direction per epoch) computes ``A^L MLP(X)``, a different model from the GCN,
  GraphSAGE and GCNII this strategy trains exactly; it is not offered. Nor are the chunked
  scheduling with CPU offload (Sec. 4.2.1) and the inter-chunk pipelining (Sec. 4.2.2), which
  change when bytes move, not how many.
* Models: layers whose only cross-row step is their aggregation matrix (``gcn``, ``sage``,
  ``gcnii``). Attention and per-edge modulation (``gat``, ``deepgcn``, ``film``) need per-edge
  scores from whole rows (Sec. 4.1.1 computes GAT's in a separate data-parallel pass): refused.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator
from gnntrain.comm.meter import CommMeter
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.errors import ConfigError
from gnntrain.data.local_graph import build_local_graph
from gnntrain.parallel.feature_split import FeatureSplit, TransposedAggregation
from gnntrain.parallel.full_batch import FullBatchStep
from gnntrain.parallel.mesh import Layout, WorkerContext
from gnntrain.strategies.base import Strategy

MODELS = ("gcn", "sage", "gcnii")
"""The models whose layers aggregate through their matrix alone (module docstring)."""


class NeutronTP(Strategy):
    @staticmethod
    def layout(run: RootConfig, world_size: int) -> Layout:
        if run.model.name not in MODELS:
            raise ConfigError(f"strategy=neutrontp cannot split model={run.model.name}'s per-edge scores by feature "
                              f"columns; valid: model={', '.join(MODELS)}")
        if run.model.precompute_first:
            raise ConfigError("strategy=neutrontp with model.precompute_first=true: the first aggregation already runs "
                              "once per epoch on each rank's columns; valid: model.precompute_first=false")
        return Layout({"tp": world_size}, parts=1)

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        self.meter = CommMeter()
        comm = Communicator.of_mesh_axis(ctx, "tp", self.meter)
        whole = build_local_graph(job.data, job.part, 0, 1, getattr(torch, run.train.dtype)).to(ctx.device)
        self.aggregation = TransposedAggregation(whole, FeatureSplit(comm, whole.num_inner))
        self.step = FullBatchStep(run, job.facts, self.aggregation.rows, stats=comm, sync=comm)

    def train_epoch(self, epoch: int) -> torch.Tensor:
        return self.step.train(epoch, self.aggregation.rows, self.aggregation)

    def evaluate(self) -> torch.Tensor:
        return self.step.local_eval_counts(self.aggregation)

    def state_dict(self) -> dict:
        return self.step.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.step.load_state_dict(state)

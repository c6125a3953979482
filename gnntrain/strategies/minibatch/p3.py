"""P3 (Gandhi & Iyer, OSDI '21), as HopGNN's Sec. 7.1 compares against it (``strategy=p3``):
model parallelism for the first layer, data parallelism for the rest.

Data layout. The input features are split by *columns*: rank ``r`` holds columns ``c_r`` (the
``r``-th of W near-equal consecutive ranges) of every node's features, so no feature row ever
travels. Labels stay with the nodes' owners (``partition.method``: P3 uses random hash
partitioning) and the roots' labels are fetched as in ``minibatch``.

One iteration, rank ``d`` training mini-batch ``d`` (the roots dealt as in ``minibatch``):

1. rank ``d`` samples its blocks and pushes the first layer's computation graph (its input
   ids ``V_d``, the layer-1 targets ``T_d`` and the sampled edges between them) to every other
   rank (``topology``);
2. every rank ``r`` computes, for every mini-batch, the first layer's *partial activations*
   from its columns: the layer's output less its bias on ``T_d`` with ``x[V_d, c_r] @ W[:,
   c_r]^T`` in place of the projected inputs (``W``: the layer's input maps; the raw rows get
   the model's input dropout first). The layer's output is its bias plus one term per input
   row (:attr:`~gnntrain.models.gnn.MessagePassingModel.summed_input_layer`: GCN, SAGE), so
   the W partials sum to it. Each rank sends its partials to the mini-batch's owner, which
   adds them up (``p3_partial``: ``|T_d|`` rows of the layer's width);
3. rank ``d`` adds the bias and runs the rest of the model, data-parallel, to the loss and
   back to the partial activations' gradient, which it sends to every other rank
   (``p3_partial`` again);
4. rank ``r`` back-propagates it through its partials to the columns ``c_r`` of the input
   maps' weight gradients: the whole gradient of its slice, so the slices are never
   all-reduced; every other parameter (the input maps' biases included) is all-reduced as in
   ``minibatch``.

Where the first layer's output is not a sum over input rows (GAT's attention, FiLM's
modulation, GCNII's and DeepGCN's row-wise input maps), the partial results are the
projections ``x[V_d, c_r] @ W[:, c_r]^T`` of all the input rows, ``|V_d|`` rows of the
projection width (``hidden x heads`` for GAT, ``6 hidden`` for FiLM's four input maps):
everything the model needs of ``x``, so it runs unchanged after them. P3's pipelining of
mini-batches is left out: each iteration's exchanges are synchronous.

Each rank steps its whole copy of the input maps' weights, but only its own columns are right;
before evaluation the ranks assemble the full weights from the owners' columns
(``eval_weight_gather``).
"""

from __future__ import annotations

import torch

from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.data.sampling import SampledBlocks, pack
from gnntrain.models import rows as projected_rows
from gnntrain.models.projection import split, stacked_weight
from gnntrain.parallel.mesh import WorkerContext
from gnntrain.strategies.minibatch.common import MiniBatchTraining


class P3(MiniBatchTraining):
    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        super().__init__(run, ctx, job)
        bounds = torch.tensor_split(torch.arange(job.data.num_features), self.world)
        self.columns = [slice(int(b[0]), int(b[-1]) + 1) if b.numel() else slice(0, 0) for b in bounds]
        self.own_columns = self.columns[self.rank]
        self.x_columns = job.data.x[:, self.own_columns].to(ctx.device, self.dtype)
        self.num_features = job.data.num_features
        self.maps = self.model.input_maps
        split_weights = {id(m.weight) for m in self.maps}
        self.synced = [p for p in self.params if id(p) not in split_weights]

    def _from_every_rank(self, mine: torch.Tensor, counts: list[int], kind: str) -> list[torch.Tensor]:
        """Send ``mine`` to every other rank and receive each rank's (``counts[q]`` rows from
        rank ``q``); one entry per rank, ``mine`` at this rank's."""
        others = [q for q in range(self.world) if q != self.rank]
        send = torch.cat([mine] * len(others) + [mine[:0]])
        send_splits = [0 if q == self.rank else mine.shape[0] for q in range(self.world)]
        recv_splits = [0 if q == self.rank else counts[q] for q in range(self.world)]
        received = self.comm.all_to_all_start(send, send_splits, recv_splits, kind).wait()
        pieces = list(received.split(recv_splits))
        pieces[self.rank] = mine
        return pieces

    def _graphs_of_every_rank(self, blocks: SampledBlocks) -> list[SampledBlocks]:
        """Every mini-batch's first-layer computation graph, this rank's pushed to the others."""
        packed = pack(blocks, layers=1)
        counts = self._from_every_rank(packed.new_full((1,), packed.numel()), [1] * self.world, "fetch_ids")
        graphs = self._from_every_rank(packed, torch.cat(counts).tolist(), "topology")
        return [blocks if q == self.rank else self.blocks_from(g) for q, g in enumerate(graphs)]

    def _partial(self, graph: SampledBlocks) -> torch.Tensor:
        """This rank's partial first-layer result for one mini-batch, from its columns (with autograd)."""
        ids = graph.input_nodes
        rows = self.dropped_input(self.x_columns[ids], ids, self.own_columns.start)
        projections = rows @ stacked_weight(self.maps)[:, self.own_columns].t()
        projected_rows.add(rows.shape[0] * rows.shape[1] / self.num_features)
        layer = self.model.summed_input_layer
        if layer is None:
            return projections
        inputs = split(self.maps, projections)
        return layer.linear_part(layer.message(inputs, True), inputs, graph.blocks[0], True)

    def accumulate(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        blocks = self.sample(batch[self.rank], epoch, iteration)
        partials = [self._partial(graph) for graph in self._graphs_of_every_rank(blocks)]
        own, sizes = self.rank, [p.shape[0] for p in partials]
        others = [q for q in range(self.world) if q != own]
        send = torch.cat([partials[q].detach() for q in others] + [partials[own][:0].detach()])
        send_splits = [0 if q == own else sizes[q] for q in range(self.world)]
        recv_splits = [0 if q == own else sizes[own] for q in range(self.world)]
        received = self.comm.all_to_all_start(send, send_splits, recv_splits, "p3_partial").wait()
        assembled = partials[own].detach() + received.view(len(others), *partials[own].shape).sum(0)
        loss, grad = self.train_on_partials(blocks, assembled, self.fetch_labels(blocks.roots),
                                            sum(b.numel() for b in batch))
        torch.autograd.backward(partials, self._from_every_rank(grad, sizes, "p3_partial"))
        return loss

    @torch.no_grad()
    def evaluate(self) -> torch.Tensor:
        """Assemble the input maps' weights from their columns' owners, then evaluate."""
        mine = stacked_weight(self.maps)[:, self.own_columns].t().contiguous()
        with self.meter.tagged("eval_"):
            pieces = self._from_every_rank(mine, [c.stop - c.start for c in self.columns], "weight_gather")
        full = torch.cat(pieces).t()
        for m, rows in zip(self.maps, full.split([m.out_features for m in self.maps])):
            m.weight.copy_(rows)
        return super().evaluate()

"""P3 (Gandhi & Iyer, OSDI '21), as HopGNN's Sec. 7.1 compares against it (``strategy=p3``):
model parallelism for the first layer, data parallelism for the rest.

Data layout. The input features are split by *columns*: rank ``r`` holds columns ``c_r`` (the
``r``-th of W near-equal consecutive ranges) of every node's features, so no feature row ever
travels. Labels stay with the nodes' owners (``partition.method``: P3 uses random hash
partitioning) and the roots' labels are fetched as in ``minibatch``.

One iteration, rank ``d`` training mini-batch ``d`` (the roots dealt as in ``minibatch``):

1. rank ``d`` samples its blocks and sends the ids of their input nodes ``V_d`` to every other
   rank (P3 pushes the layer-1 computation graph; ``fetch_ids``, control);
2. every rank ``r`` computes its partial projections ``x[V_d, c_r] @ W[:, c_r]^T`` of every
   mini-batch's inputs (``W``: the model's input maps, :mod:`gnntrain.models.projection`; the
   raw rows get the model's input dropout first) and sends them to rank ``d``, which sums the
   W partials into the projections of ``V_d`` (``p3_partial``);
3. rank ``d`` runs the rest of the model on them, data-parallel, to the loss and back to the
   projections' gradient, which it sends to every other rank (``p3_partial`` again);
4. rank ``r`` adds ``grad_d^T @ x[V_d, c_r]`` to the columns ``c_r`` of the input maps' weight
   gradients: the whole gradient of its slice, so the slices are never all-reduced; every other
   parameter (the input maps' biases included) is all-reduced as in ``minibatch``.

Bytes per iteration: ``p3_partial = 2 (W - 1) sum_d |V_d| H x element size`` with ``H`` the
projection width (``hidden`` for GCN and GAT, ``2 hidden`` for SAGE, ``6 hidden`` for FiLM's
four input maps). Our reading where the paper is open: the first layer's model-parallel part
is exactly its input maps, so every model runs unchanged after them (P3 describes GCN's
``A X W``; pushing the partial projections of the sources rather than partially aggregated
targets makes it hold for attention and FiLM too, at the cost of ``|V_d|`` instead of the
targets' count rows). P3's pipelining of mini-batches is left out: each iteration's exchanges
are synchronous.

Each rank steps its whole copy of the input maps' weights, but only its own columns are right;
before evaluation the ranks assemble the full weights from the owners' columns
(``eval_weight_gather``).
"""

from __future__ import annotations

import torch

from gnntrain.models import rows as projected_rows
from gnntrain.models.projection import stacked_weight, weight_gradient
from gnntrain.strategies.minibatch.common import MiniBatchTraining


class P3(MiniBatchTraining):
    def __init__(self, cfg, ctx, job) -> None:
        super().__init__(cfg, ctx, job)
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

    def _input_ids_of_every_rank(self, ids: torch.Tensor) -> list[torch.Tensor]:
        count = torch.tensor([ids.numel()], device=self.comm.device)
        counts = self._from_every_rank(count, [1] * self.world, "fetch_ids")
        return self._from_every_rank(ids, [int(c) for c in counts], "fetch_ids")

    def accumulate(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        roots = batch[self.rank]
        blocks = self.sample(roots, epoch, iteration)
        inputs = self._input_ids_of_every_rank(blocks.input_nodes)
        rows = [self.dropped_input(self.x_columns[ids], ids, self.own_columns.start) for ids in inputs]
        weight = stacked_weight(self.maps).detach()[:, self.own_columns]
        partials = [r @ weight.t() for r in rows]
        projected_rows.add(sum(r.shape[0] for r in rows) * weight.shape[1] / self.num_features)
        own, sizes = self.rank, [ids.numel() for ids in inputs]
        others = [q for q in range(self.world) if q != own]
        send = torch.cat([partials[q] for q in others] + [partials[own][:0]])
        send_splits = [0 if q == own else sizes[q] for q in range(self.world)]
        recv_splits = [0 if q == own else sizes[own] for q in range(self.world)]
        received = self.comm.all_to_all_start(send, send_splits, recv_splits, "p3_partial").wait()
        projections = partials[own] + received.view(len(others), sizes[own], weight.shape[0]).sum(0)
        loss, grad = self.train_on_projections(blocks, projections, self.fetch_labels(roots),
                                               sum(b.numel() for b in batch))
        for q, g in enumerate(self._from_every_rank(grad, sizes, "p3_partial")):
            weight_gradient(self.maps, g, rows[q], self.own_columns)
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

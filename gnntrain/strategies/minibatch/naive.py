"""HopGNN's Naive feature-centric baseline (Sec. 3.2, Fig. 6; ``strategy=naive``): each model
travels with its whole subgraph and the intermediate data, and the features never move.

Model ``d`` starts on rank ``d`` with mini-batch ``d`` (dealt as in ``minibatch``) and samples
its blocks there. Where the first layer's output is a bias plus one term per input row
(:attr:`~gnntrain.models.gnn.MessagePassingModel.summed_input_layer`: GCN, SAGE), one
iteration is the paper's Fig. 6:

1. W time steps: at step ``t`` the model is on rank ``d + t`` (mod W), which adds the
   aggregation of the input rows it owns (the raw rows, after the model's input dropout) to
   the subgraph's *partial aggregation* of the layer-1 targets: ``A x`` over the rows seen so
   far, input-wide (SAGE: the neighbours' mean beside the target's own row, twice as wide);
   between steps the model moves one rank on with its parameters and gradients
   (``model_migrate``), the subgraph's topology (node ids and every layer's sampled edges,
   ``topology``) and the partial aggregation (``naive_partial``);
2. on the last rank, ``d - 1``, the aggregation is complete: the model runs its forward pass
   from it and its whole backward pass there (the first layer's weight gradient is
   ``grad^T (A x)``, so nothing travels back), the roots' labels fetched from their owners
   (``label_fetch``);
3. one all-reduce of the gradients and one update on every rank.

So every iteration migrates each model ``W - 1`` times, carrying intermediate data as wide as
the features for every layer-1 target: this is why the paper's Naive can move more than DGL
(up to 2.59x, Fig. 7) and run slower (1.62x, Sec. 7.2).

Where the first layer cannot aggregate before its weights (GAT's attention, FiLM's
modulation, GCNII's and DeepGCN's row-wise input maps), the partial results are the
projections of the input rows by the model's input maps (:mod:`gnntrain.models.projection`):
each rank projects the rows it owns on the way out, the last rank runs the forward and
backward passes to the projections' gradient, and the model travels back through the W ranks
(another ``W - 1`` migrations), each rank adding the gradient of its own rows, ``grad^T @ x``,
to the travelling model's input-map weight gradients; the projection gradients of the ranks
still to visit travel with it (``naive_partial``). Both compute the global mini-batch's
gradient: the iteration equals ``minibatch``'s.

Our reading where the paper is open: the model visits every rank in ring order (with 2- or
3-hop samples on METIS parts, nearly every subgraph needs rows of every rank), and it travels
with its full topology, every byte counted.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import InFlight
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.data.sampling import SampledBlocks, pack
from gnntrain.models import rows as projected_rows
from gnntrain.models.gnn import LinearPart
from gnntrain.models.projection import projection_width, stacked_weight, weight_gradient
from gnntrain.parallel.mesh import WorkerContext
from gnntrain.parallel.migration import migrate, wait_all
from gnntrain.strategies.minibatch.common import MiniBatchTraining


class Naive(MiniBatchTraining):
    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        super().__init__(run, ctx, job)
        self.maps = self.model.input_maps
        self.departed: list[InFlight | None] = []
        """The sends of the models this rank passed on in this iteration (:func:`migrate`)."""

    def _owned_by(self, ids: torch.Tensor, first: int, count: int, step: int) -> torch.Tensor:
        """Which of ``ids`` the ranks ``first, first + step, ...`` (``count`` of them, ``step``
        +1 or -1) own: those whose owner is fewer than ``count`` steps from ``first``."""
        return (self.store.owner[ids] - first) * step % self.world < count

    def _own_rows(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Which of ``ids`` this rank owns, and their raw rows after the input dropout."""
        own = self.store.owner[ids] == self.rank
        return own, self.dropped_input(self.store.read(ids[own], "x"), ids[own])

    def _travel(self, subgraph: SampledBlocks, partial: torch.Tensor) -> tuple[SampledBlocks, torch.Tensor]:
        """Move the held model one rank on with its subgraph's topology and ``partial``
        (``naive_partial``); the subgraph and partial data of the model arriving."""
        packed = self.pass_on(pack(subgraph), 1, "topology")
        arrived = self.pass_on(partial, 1, "naive_partial")
        self.departed.append(migrate(self.params, self.comm, 1))
        return self.blocks_from(packed), arrived

    def accumulate(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        self.departed = []
        loss = (self._accumulate_sums if self.model.summed_input_layer is not None
                else self._accumulate_projections)(epoch, iteration, batch)
        wait_all(self.departed)
        return loss

    def _accumulate_sums(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        """Fig. 6: the partial aggregations travel with the model; the last rank trains."""
        layer = self.model.summed_input_layer
        subgraph = self.sample(batch[self.rank], epoch, iteration)
        aggregated = torch.empty(0)
        for t in range(self.world):
            if t:
                subgraph, aggregated = self._travel(subgraph, aggregated)
            ids = subgraph.input_nodes
            own, x = self._own_rows(ids)
            rows = x.new_zeros((ids.numel(), x.shape[1]))
            rows[own] = x
            mine = layer.aggregated_inputs(rows, subgraph.blocks[0])
            aggregated = mine if t == 0 else aggregated + mine
        return self.train_on(subgraph, LinearPart(layer.from_aggregated(aggregated)),
                             self.fetch_labels(subgraph.roots), sum(b.numel() for b in batch))

    def _accumulate_projections(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        """At forward step ``t`` rank ``r`` holds model ``d = r - t``, which brings the
        projections of ranks ``d .. r - 1``; at backward step ``k`` it holds model
        ``d = r + 1 + k``, which brings the gradients of all rows but those of ranks
        ``d - 1, .., d - k`` (already added to its weight gradients there). Rank ``r`` keeps the
        rows it projected for each model to add their gradient on the way back."""
        world, rank = self.world, self.rank
        weight = stacked_weight(self.maps).detach()
        subgraph = self.sample(batch[rank], epoch, iteration)
        ids = subgraph.input_nodes
        projections = ids.new_zeros((ids.numel(), projection_width(self.maps)), dtype=self.dtype)
        visited: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        for t in range(world):
            model = (rank - t) % world
            if t:
                subgraph, arrived = self._travel(subgraph, projections[self._owned_by(ids, rank - t + 1, t, 1)])
                ids = subgraph.input_nodes
                projections = _filled(arrived, self._owned_by(ids, model, t, 1))
            own, x = self._own_rows(ids)
            projections[own] = x @ weight.t()
            projected_rows.add(x.shape[0])
            visited[model] = (ids, own, x)

        loss, grad = self.train_on_partials(subgraph, projections, self.fetch_labels(subgraph.roots),
                                            sum(b.numel() for b in batch))
        for k in range(world):
            model = (rank + 1 + k) % world
            if k:
                held_ids = visited[(model - 1) % world][0]
                arrived = self.pass_on(grad[~self._owned_by(held_ids, model - 2, k, -1)], -1, "naive_partial")
                self.departed.append(migrate(self.params, self.comm, -1))
                grad = _filled(arrived, ~self._owned_by(visited[model][0], model - 1, k, -1))
            ids, own, x = visited[model]
            weight_gradient(self.maps, grad[own], x)
        return loss


def _filled(rows: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """A zero matrix of ``where.numel()`` rows with ``rows`` at the rows ``where``."""
    filled = rows.new_zeros((where.numel(), rows.shape[1]))
    filled[where] = rows
    return filled

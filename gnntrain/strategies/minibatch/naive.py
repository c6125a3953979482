"""HopGNN's Naive feature-centric baseline (Sec. 3.2, Fig. 6; ``strategy=naive``): each model
travels with its whole subgraph and the intermediate data, and the features never move.

Model ``d`` starts on rank ``d`` with mini-batch ``d`` (dealt as in ``minibatch``), samples its
blocks there and then, in one iteration:

1. forward, W time steps: at step ``t`` the model is on rank ``d + t`` (mod W), which projects
   the subgraph's input rows it owns through the model's input maps (the partial first-layer
   computation, :mod:`gnntrain.models.projection`; the raw rows get the model's input dropout
   first); between steps the model moves one rank on with its parameters and gradients
   (``model_migrate``), the ids of the subgraph's input nodes (``fetch_ids``) and the
   projections computed so far (``naive_partial``);
2. on the last rank, ``d - 1``, every input row is projected: the model runs the rest of the
   forward pass and the backward pass to the projections' gradient (the roots' labels fetched
   from their owners, ``label_fetch``);
3. backward, W time steps the other way round: each rank adds the gradient of its own rows,
   ``grad^T @ x``, to the travelling model's input-map weight gradients; between steps the
   model moves one rank back with its parameters and gradients and the projection gradients
   of the ranks still to visit (``naive_partial``);
4. home again, one all-reduce of the gradients and one update on every rank.

So every iteration migrates each model ``2 (W - 1)`` times, and the partial results travel with
it as the paper describes; it computes the global mini-batch's gradient (the iteration equals
``minibatch``'s). Our reading where the paper is open: the partial first-layer computation is
the projection of the input rows by the input maps, which holds for every model (partial
*aggregations* would hold only for sum-like aggregators); a rank that hosts the model's last
forward step re-derives the subgraph's blocks by keyed sampling rather than receiving their
edges, so the topology's bytes beyond the input ids are not counted.
"""

from __future__ import annotations

import torch

from gnntrain.models import rows as projected_rows
from gnntrain.models.projection import projection_width, stacked_weight, weight_gradient
from gnntrain.parallel.migration import migrate
from gnntrain.strategies.minibatch.common import MiniBatchTraining


class Naive(MiniBatchTraining):
    def __init__(self, cfg, ctx, job) -> None:
        super().__init__(cfg, ctx, job)
        self.maps = self.model.input_maps

    def _owned_by(self, ids: torch.Tensor, first: int, count: int, step: int) -> torch.Tensor:
        """Which of ``ids`` the ranks ``first, first + step, ...`` (``count`` of them) own."""
        ranks = torch.tensor([(first + step * k) % self.world for k in range(count)], device=self.comm.device)
        return torch.isin(self.store.owner[ids], ranks)

    def _pass_ids(self, ids: torch.Tensor) -> torch.Tensor:
        """Send the held model's input ids one rank on; the ids of the model arriving."""
        to, source = (self.rank + 1) % self.world, (self.rank - 1) % self.world
        count = torch.tensor([ids.numel()], device=self.comm.device)
        arriving = self.comm.p2p_start([(to, count)], [(source, torch.empty_like(count))], "fetch_ids").wait()[0]
        return self.comm.p2p_start([(to, ids)], [(source, ids.new_empty(int(arriving[0])))], "fetch_ids").wait()[0]

    def _move(self, shift: int, rows: torch.Tensor, arriving: torch.Tensor) -> torch.Tensor:
        """Move the held model ``shift`` ranks on, with ``rows`` (``naive_partial``); the rows
        that arrive with the next model fill the rows ``arriving`` of a zero matrix."""
        to, source = (self.rank + shift) % self.world, (self.rank - shift) % self.world
        buffer = rows.new_empty((int(arriving.sum()), rows.shape[1]))
        received = self.comm.p2p_start([(to, rows)], [(source, buffer)], "naive_partial").wait()[0]
        migrate(self.params, self.comm, shift)
        filled = rows.new_zeros((arriving.numel(), rows.shape[1]))
        filled[arriving] = received
        return filled

    def accumulate(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        """At forward step ``t`` rank ``r`` holds model ``d = r - t``, which brings the
        projections of ranks ``d .. r - 1``; at backward step ``k`` it holds model
        ``d = r + 1 + k``, which brings the gradients of all rows but those of ranks
        ``d - 1, .., d - k`` (already added to its weight gradients there). Rank ``r`` keeps the
        rows it projected for each model to add their gradient on the way back."""
        world, rank = self.world, self.rank
        weight = stacked_weight(self.maps).detach()
        ids = self.sample(batch[rank], epoch, iteration).input_nodes
        projections = ids.new_zeros((ids.numel(), projection_width(self.maps)), dtype=self.dtype)
        visited: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        for t in range(world):
            model = (rank - t) % world
            if t:
                sent = projections[self._owned_by(ids, rank - t + 1, t, 1)]
                ids = self._pass_ids(ids)
                projections = self._move(1, sent, self._owned_by(ids, model, t, 1))
            own = self.store.owner[ids] == rank
            x = self.dropped_input(self.store.tables["x"][self.store.row_of[ids[own]]], ids[own])
            projections[own] = x @ weight.t()
            projected_rows.add(x.shape[0])
            visited[model] = (ids, own, x)

        roots = batch[(rank + 1) % world]
        loss, grad = self.train_on_projections(self.sample(roots, epoch, iteration), projections,
                                               self.fetch_labels(roots), sum(b.numel() for b in batch))
        for k in range(world):
            model = (rank + 1 + k) % world
            if k:
                held_ids = visited[(model - 1) % world][0]
                sent = grad[~self._owned_by(held_ids, model - 2, k, -1)]
                grad = self._move(-1, sent, ~self._owned_by(visited[model][0], model - 1, k, -1))
            ids, own, x = visited[model]
            weight_gradient(self.maps, grad[own], x)
        return loss

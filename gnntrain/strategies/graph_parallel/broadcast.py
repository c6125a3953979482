"""Broadcast training and Sancus (Peng et al., PVLDB 15(9), 2022: "Sancus: Staleness-Aware
Communication-Avoiding Full-Graph Decentralized Training in Large-Scale Graph Neural
Networks"): every rank broadcasts its whole partition's rows of each layer input, and Sancus
skips a broadcast while the rows have changed little since the last one, its peers reusing
their cached copy.

``broadcast``, the decentralised baseline Sancus builds on (CAGNET's 1-D algorithm, which
multiplies a block of rows of the adjacency by the whole embedding matrix gathered block by
block): in each layer's forward every rank sends all its inner rows to every peer
(``bcast_fwd``: ``I_r d`` values to each of the ``W - 1`` peers, a flat broadcast), and every
rank aggregates over the rows it reads (its halo rows, picked from the blocks that arrived).
Backward, each rank returns the gradients of the halo rows it read to their owners, as the
synchronous baseline does (``halo_bwd``): the prototype broadcasts the output gradients and
multiplies them by the transposed adjacency block instead; the sum that reaches each row is the
same and no rank holds another's out-edges here. So an epoch equals single-process training,
and the forward moves whole partitions where ``vanilla`` moves only the boundary.

``sancus`` (staleness-aware skipping): before each layer's broadcast a rank compares its rows
``H`` with the rows ``H_b`` it last broadcast for that layer and skips the broadcast when
``||H - H_b||_F < threshold * ||H_b||_F`` and its peers' copy is younger than ``max_staleness``
epochs; the peers then aggregate with their cached copy of its rows (the ones they picked from
its last broadcast). Whether each rank broadcasts is announced first, one byte per peer
(``skip_flags``). The gradient of a cached row still reaches its owner's current rows (as the
prototype's backward, which never skips). ``threshold = 0`` never skips and sends no flags: it
is ``broadcast`` exactly. Each epoch reports ``skipped_share``, the broadcasts skipped of all
(ranks x layers), and ``skipped_share/layer<l>`` per layer: the input layer's rows never change
and are reused until the bound, while with dropout the hidden rows change by more than a small
threshold every epoch (``docs/reproducing.md``).

Choices where the text is unavailable or vague (its metrics are summarised as "bounded embedding
staleness metrics"): the relative Frobenius change per layer and rank as the skip metric, the
epoch bound as the staleness bound, both per layer; only the forward skips (the prototype never
caches gradients); the partition is the run's (METIS), where the prototype cuts equal blocks of
node ids. Where each halo row lies in its owner's block is exchanged once when the policy is
built, as setup outside the epochs' bytes. Evaluation uses a fresh exchange of the halo rows
(the reported accuracy is the model's).
"""

from __future__ import annotations

from collections import defaultdict

import torch
import torch.distributed as dist

from gnntrain.comm.communicator import Communicator
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import HaloSource, MessagePassingModel
from gnntrain.parallel.halo import HaloExchange
from gnntrain.strategies.base import Tallies
from gnntrain.strategies.graph_parallel.config import BroadcastConfig, SancusConfig
from gnntrain.strategies.graph_parallel.strategy import HaloPolicy


def owner_positions(graph: LocalGraph, comm: Communicator) -> torch.Tensor:
    """Per halo row (local halo order), its position among its owner's inner rows: the owners'
    send plans, exchanged once (setup, not training traffic)."""
    positions = graph.send_index.new_empty(graph.num_halo)
    if comm.world_size == 1:
        return positions
    dist.all_to_all_single(positions, graph.send_index.contiguous(), graph.recv_splits, graph.send_splits,
                           group=comm.group)
    return positions


class Broadcast(HaloPolicy):
    def __init__(self, config: BroadcastConfig, graph: LocalGraph, comm: Communicator,
                 model: MessagePassingModel) -> None:
        self.graph, self.comm = graph, comm
        self.fresh = HaloExchange(graph, comm)
        self.blocks = comm.gather_untracked(torch.tensor([graph.num_inner], device=comm.device)).view(-1).tolist()
        self.positions = owner_positions(graph, comm).split(graph.recv_splits)
        self.offsets = torch.tensor([0, *graph.recv_splits]).cumsum(0).tolist()
        """Where each owner's rows start among the halo rows."""
        self.cached: dict[int, torch.Tensor] = {}
        """Per layer, the halo rows picked from the last broadcasts."""

    def training_view(self, epoch: int) -> tuple[LocalGraph, HaloSource]:
        return self.graph, self._broadcast_halo

    def evaluation_halo(self) -> HaloSource:
        return self.fresh

    def broadcasts(self, h: torch.Tensor, layer: int) -> list[bool]:
        """Which ranks broadcast layer ``layer``'s rows this epoch: all."""
        return [True] * self.comm.world_size

    def _broadcast_halo(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        return _Broadcast.apply(h, self, layer)

    def receive(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Broadcast this rank's rows where it does, take the peers' blocks that come, and
        return the halo rows: fresh from those, cached from the others."""
        comm, me = self.comm, self.comm.rank
        sending = self.broadcasts(h, layer)
        peers = range(comm.world_size)
        send_splits = [len(h) if sending[me] and q != me else 0 for q in peers]
        recv_splits = [self.blocks[q] if sending[q] and q != me else 0 for q in peers]
        rows = h.detach()
        send = rows.repeat(comm.world_size - 1, 1) if sending[me] else rows[:0]
        arrived = comm.all_to_all_start(send, send_splits, recv_splits, "bcast_fwd").wait().split(recv_splits)
        halo = self.cached.get(layer)
        if halo is None:
            halo = rows.new_empty(self.graph.num_halo, rows.shape[1])
        halo = halo.clone()
        for q in peers:
            if recv_splits[q]:
                halo[self.offsets[q]: self.offsets[q + 1]] = arrived[q][self.positions[q]]
        self.cached[layer] = halo
        return halo

    def state_dict(self) -> dict:
        return {"cached": dict(self.cached)}

    def load_state_dict(self, state: dict) -> None:
        self.cached = {layer: rows.to(self.comm.device) for layer, rows in state["cached"].items()}


class Sancus(Broadcast):
    def __init__(self, config: SancusConfig, graph: LocalGraph, comm: Communicator,
                 model: MessagePassingModel) -> None:
        super().__init__(config, graph, comm, model)
        self.threshold, self.max_staleness = config.threshold, config.max_staleness
        self.last: dict[int, torch.Tensor] = {}
        """Per layer, the rows this rank last broadcast."""
        self.age: dict[int, int] = {}
        """Per layer, the epochs since this rank last broadcast."""
        self.decisions = defaultdict(float)

    def broadcasts(self, h: torch.Tensor, layer: int) -> list[bool]:
        """Each rank's decision (module docstring), announced to the others (``skip_flags``)."""
        if self.threshold == 0:
            return super().broadcasts(h, layer)
        last = self.last.get(layer)
        skip = (last is not None and self.age[layer] < self.max_staleness
                and float(torch.linalg.vector_norm(h - last)) < self.threshold * float(torch.linalg.vector_norm(last)))
        if skip:
            self.age[layer] += 1
        else:
            self.last[layer], self.age[layer] = h.detach().clone(), 1
        world = self.comm.world_size
        flag = torch.tensor([0 if skip else 1] * world, dtype=torch.uint8, device=self.comm.device)
        mine = [0 if q == self.comm.rank else 1 for q in range(world)]
        flags = self.comm.all_to_all_start(flag[: world - 1], mine, mine, "skip_flags").wait()
        others = iter(flags.tolist())
        self.decisions[f"skipped/layer{layer}"] += skip
        self.decisions[f"broadcasts/layer{layer}"] += 1
        return [not skip if q == self.comm.rank else bool(next(others)) for q in range(world)]

    def epoch_tallies(self) -> Tallies:
        """This rank's broadcasts and skipped broadcasts in the epoch just trained."""
        tallies = Tallies(summed=dict(self.decisions))
        self.decisions.clear()
        return tallies

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """``skipped_share``: the broadcasts skipped of all (ranks x layers) in the epoch, and
        ``skipped_share/layer<l>`` of each layer's."""
        layers = [name.removeprefix("broadcasts/") for name in totals if name.startswith("broadcasts/")]
        if not layers:
            return {}
        shares = {f"skipped_share/{layer}": totals[f"skipped/{layer}"] / totals[f"broadcasts/{layer}"] for layer in layers}
        total = sum(totals[f"broadcasts/{layer}"] for layer in layers)
        return {"skipped_share": sum(totals[f"skipped/{layer}"] for layer in layers) / total, **shares}

    def state_dict(self) -> dict:
        return {**super().state_dict(), "last": dict(self.last), "age": dict(self.age)}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.last = {layer: rows.to(self.comm.device) for layer, rows in state["last"].items()}
        self.age = dict(state["age"])


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, policy: Broadcast, layer: int) -> torch.Tensor:  # type: ignore[override]
        ctx.policy, ctx.layer = policy, layer
        return policy.receive(h, layer)

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        exchange = ctx.policy.fresh
        return exchange.gradient_of_sent_rows(exchange.start_backward(grad_halo, ctx.layer).wait()), None, None

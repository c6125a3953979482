"""PipeGCN (Wan et al., ICLR 2022): graph parallelism with one-epoch-stale, pipelined halos.

Algorithm 1: in epoch ``t`` layer ``l`` aggregates with the boundary features its peers sent
in epoch ``t-1`` (zeros in epoch 1, as in the paper) and starts sending epoch ``t``'s, which it
waits for only when layer ``l`` runs again in epoch ``t+1``. The backward pass mirrors it: the
gradient that peers' losses put on the rank's boundary rows is the one they sent back in epoch
``t-1``, and epoch ``t``'s halo gradients leave without waiting. Each exchange thus overlaps a
whole epoch of compute. The exchanges run on a process group of their own, so they never queue
behind the gradient all-reduce. Bytes equal the vanilla strategy's (same rows, same widths).

Smoothing (Sec. 3.4, ``strategy.smooth``): ``f`` replaces the received boundary features by
their moving average ``f_hat(t) = gamma f_hat(t-1) + (1 - gamma) f(t)``, ``g`` does the same
for the boundary gradients a rank receives for its own rows, ``gf`` both. The paper does not
say where ``f_hat`` starts; ``strategy.smooth_start=zero`` (default) starts it at zero, as the
authors' code does (``helper/feature_buffer.py`` allocates the averages as zeros), so the
first value used is ``(1 - gamma) f(1)``; ``first`` starts it at the first value received.
Either way epoch 1 uses the zero halo, which is not averaged in.

``strategy.bits`` below 32 quantizes the stale messages (both directions) with AdaQP's codec
(:mod:`gnntrain.comm.quantize`) at that fixed width, through the family's bit plans:
PipeGCN's overlap with AdaQP's smaller messages.

Evaluation uses a fresh, synchronous exchange: the reported accuracy is the model's.

``strategy.track_staleness_error`` (Fig. 5): per layer, ``||used - fresh||_F`` over all ranks
for the halo features and for the boundary gradients, where ``fresh`` comes from an extra
synchronous exchange of the current epoch's values. That traffic is recorded under ``diag_``
kinds and left out of ``comm_bytes``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import torch

from gnntrain.comm.communicator import Communicator, InFlight
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import HaloSource, MessagePassingModel
from gnntrain.parallel.halo import HaloExchange
from gnntrain.strategies.base import Tallies
from gnntrain.strategies.graph_parallel.bit_plans import FixedBits, fixed_bits, rounding_generator
from gnntrain.strategies.graph_parallel.config import PipeGCNConfig
from gnntrain.strategies.graph_parallel.strategy import HaloPolicy, halo_wire

@dataclass
class Arrived:
    """Rows that already arrived, standing in for the exchange that brought them."""

    rows: torch.Tensor

    def wait(self) -> torch.Tensor:
        return self.rows


@dataclass
class _StaleStream:
    """One layer's exchange in one direction: the exchange in flight since the previous epoch
    and, when smoothing, the moving average of what arrived."""

    smooth: bool
    gamma: float
    from_zero: bool
    pending: InFlight | Arrived | None = None
    average: torch.Tensor | None = None

    def settle(self) -> torch.Tensor | None:
        """Wait for the exchange in flight and keep what arrived, for a checkpoint."""
        if self.pending is not None:
            self.pending = Arrived(self.pending.wait())
        return None if self.pending is None else self.pending.rows

    def fresh(self, posted: InFlight) -> torch.Tensor:
        """The rows of the exchange just ``posted``, waited for, unsmoothed; they also stand for
        the next epoch's stale rows. The exchange the previous epoch left in flight is superseded
        (waited for, its rows dropped)."""
        if self.pending is not None:
            self.pending.wait()
        self.pending = Arrived(posted.wait())
        return self.pending.rows

    def take(self, empty: Callable[[], torch.Tensor]) -> torch.Tensor:
        """What the previous epoch sent (``empty()`` before the first exchange), averaged if
        smoothing."""
        if self.pending is None:
            return empty()
        received = self.pending.wait()
        self.pending = None
        if self.smooth:
            if self.average is None and self.from_zero:
                self.average = torch.zeros_like(received)
            if self.average is not None:
                received = self.gamma * self.average + (1.0 - self.gamma) * received
            self.average = received
        return received


class Stale(HaloPolicy):
    synchronous = False
    """Whether this epoch's exchanges are waited for where they are posted (a bounded-staleness
    epoch, :mod:`.bounded_stale`); their rows are then also what the next epoch uses."""

    def __init__(self, config: PipeGCNConfig, graph: LocalGraph, comm: Communicator, model: MessagePassingModel) -> None:
        self.comm = comm
        self.graph = graph
        self.fresh = HaloExchange(graph, comm)
        self.side = comm.side_channel()
        self.pipe = HaloExchange(graph, self.side, self.pipe_plan(config, graph), rounding_generator(config.seed, comm),
                                 halo_wire(config))
        gamma, from_zero = config.gamma, config.smooth_start == "zero"
        self.features = defaultdict(lambda: _StaleStream(config.smooth in ("f", "gf"), gamma, from_zero))
        self.gradients = defaultdict(lambda: _StaleStream(config.smooth in ("g", "gf"), gamma, from_zero))
        self.track = config.track_staleness_error
        self.squared_errors: dict[str, float] = {}

    def pipe_plan(self, config: PipeGCNConfig, graph: LocalGraph) -> FixedBits | None:
        """The widths of the stale messages: ``strategy.bits`` for all (None: unencoded)."""
        return fixed_bits(config.bits, graph)

    def stale_rows(self, stream: _StaleStream, key: tuple[int, str],
                   empty: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, bool]:
        """The rows layer and direction ``key`` uses this epoch, and whether it posts this epoch's
        exchange: what the previous epoch sent, and always."""
        return stream.take(empty), True

    def training_view(self, epoch: int) -> tuple[LocalGraph, HaloSource]:
        return self.graph, self._stale_halo

    def evaluation_halo(self) -> HaloExchange:
        return self.fresh

    def _stale_halo(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        return _StaleExchange.apply(h, self, layer)

    def track_error(self, name: str, used: torch.Tensor, start_fresh: Callable[[], InFlight]) -> None:
        """With ``track_staleness_error``: ``||used - fresh||_F^2`` on this rank, the fresh rows from
        an extra synchronous exchange recorded under ``diag_`` kinds."""
        if self.track:
            with self.comm.meter.tagged("diag_"):
                fresh = start_fresh().wait()
            self.squared_errors[name] = float(((used - fresh) ** 2).sum())

    def epoch_tallies(self) -> Tallies:
        """This rank's squared staleness errors of the epoch just trained (where tracked)."""
        tallies = Tallies(summed={f"staleness_error/{n}": e for n, e in self.squared_errors.items()})
        self.squared_errors.clear()
        return tallies

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """Staleness errors of an epoch: the root of the squared errors summed over the ranks."""
        return {name: total ** 0.5 for name, total in totals.items() if name.startswith("staleness_error/")}

    def state_dict(self) -> dict:
        """Per layer and direction, the rows the next epoch will use (the exchanges in flight
        are waited for) and the moving averages; the rounding generator."""
        streams = {"features": self.features, "gradients": self.gradients}
        return {"streams": {name: {layer: {"arrived": s.settle(), "average": s.average} for layer, s in by_layer.items()}
                            for name, by_layer in streams.items()},
                "generator": self.pipe.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        device = self.comm.device
        for name, by_layer in state["streams"].items():
            streams = getattr(self, name)
            for layer, saved in by_layer.items():
                stream = streams[layer]
                stream.pending = None if saved["arrived"] is None else Arrived(saved["arrived"].to(device))
                stream.average = None if saved["average"] is None else saved["average"].to(device)
        self.pipe.generator.set_state(state["generator"])

    def finish(self) -> None:
        """Wait for the last epoch's exchanges and release the side channel."""
        for stream in [*self.features.values(), *self.gradients.values()]:
            if stream.pending is not None:
                stream.pending.wait()
        self.features.clear()
        self.gradients.clear()
        self.side.close()


class _StaleExchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, pipe: Stale, layer: int) -> torch.Tensor:  # type: ignore[override]
        ctx.pipe, ctx.layer = pipe, layer
        stream = pipe.features[layer]
        if pipe.synchronous:
            return stream.fresh(pipe.pipe.start_forward(h, layer)).clone()
        used, posts = pipe.stale_rows(stream, (layer, "fwd"), lambda: h.new_zeros(pipe.pipe.num_halo, h.shape[1]))
        pipe.track_error(f"features/layer{layer}", used, lambda: pipe.fresh.start_forward(h, layer))
        if posts:
            stream.pending = pipe.pipe.start_forward(h, layer)
        return used.clone()

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        pipe = ctx.pipe
        stream = pipe.gradients[ctx.layer]
        if pipe.synchronous:
            return pipe.pipe.gradient_of_sent_rows(stream.fresh(pipe.pipe.start_backward(grad_halo, ctx.layer))), None, None
        used, posts = pipe.stale_rows(stream, (ctx.layer, "bwd"),
                                      lambda: grad_halo.new_zeros(pipe.pipe.send_index.numel(), grad_halo.shape[1]))
        pipe.track_error(f"gradients/layer{ctx.layer}", used, lambda: pipe.fresh.start_backward(grad_halo, ctx.layer))
        if posts:
            stream.pending = pipe.pipe.start_backward(grad_halo, ctx.layer)
        return pipe.pipe.gradient_of_sent_rows(used), None, None

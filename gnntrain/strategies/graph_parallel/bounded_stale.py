"""Sylvie (Zhang et al., arXiv 2303.01277, "Boosting Distributed Full-graph GNN Training with
Asynchronous One-bit Communication"): PipeGCN's one-epoch-stale, pipelined halo exchanges
(:mod:`.stale`) whose messages, features forward and gradients backward, travel at one bit per
value, with a bound on the staleness.

* *Low-bit module*: each halo row is quantized with the per-row stochastic min-max quantizer
  (:mod:`gnntrain.comm.quantize` at ``b = 1``): a value becomes its row's minimum or maximum,
  the maximum with probability its fraction of the way between them (unbiased); the row's
  minimum and scale travel beside its bits, 4 bytes in all. So a row of ``d`` values costs
  ``ceil(d / 8) + 4`` bytes where float32 costs ``4 d``: a thirty-second plus the scales.
  The authors' code quantizes the same way (per-row min-max, stochastic rounding, the minimum
  and scale as two 16-bit floats); ours keeps them in bfloat16, rounded outward so the receiver
  dequantizes with the sender's exact values. ``strategy.bits`` sends 2, 4, 8 or 32 instead.
* *Bounded staleness adaptor*: every ``strategy.sync_every``-th epoch (``epoch mod
  sync_every = 0``) waits for a fresh exchange of each layer's halo where it is posted, as the
  synchronous baseline does, and the rows that arrive are also what the next epoch uses as its
  stale rows; the other epochs are PipeGCN's (the first uses zeros). The text says the adaptor
  bounds the staleness; its code (``--fixed-synchro S``) makes every ``S``-th epoch synchronous,
  which is what this implements. Each epoch sends one exchange per layer and direction either
  way, so the bytes do not depend on the bound. ``sync_every = 1`` with ``bits = 32`` is the
  synchronous baseline exactly.

Not implemented: the 3D-adaptive variant of the later text (bit-widths by node degree, widths
and pipelining switched on a loss-rate signal); PipeGCN's smoothing (``strategy.smooth``), which
the authors' code inherits and leaves off by default, applies to the stale epochs only.
"""

from __future__ import annotations

from gnntrain.comm.communicator import Communicator
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import HaloSource, MessagePassingModel
from gnntrain.strategies.graph_parallel.config import SylvieConfig
from gnntrain.strategies.graph_parallel.stale import Stale


class BoundedStale(Stale):
    def __init__(self, config: SylvieConfig, graph: LocalGraph, comm: Communicator, model: MessagePassingModel) -> None:
        super().__init__(config, graph, comm, model)
        self.sync_every = config.sync_every

    def training_view(self, epoch: int) -> tuple[LocalGraph, HaloSource]:
        self.synchronous = epoch % self.sync_every == 0
        return super().training_view(epoch)

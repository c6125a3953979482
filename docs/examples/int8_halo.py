"""Int8 halos: a halo-compression method for the graph-parallel family, in one file outside the
package (docs/extending.md walks through it; tests/test_extending.py runs it).

Forward, every halo row a rank sends travels as int8 codes with one float32 scale per row
(``codes = round(x / s)``, ``s = max|x| / 127``): about a quarter of float32's bytes. The
gradients go back at full precision. Evaluation exchanges full-precision rows. Run it with

    GNNTRAIN_PLUGINS=docs/examples/int8_halo.py gnntrain strategy=int8_halo
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnntrain.config.schema import check
from gnntrain.data.local_graph import LocalGraph
from gnntrain.parallel.halo import HaloExchange
from gnntrain.strategies.graph_parallel import FAMILY
from gnntrain.strategies.graph_parallel.config import GraphParallelConfig
from gnntrain.strategies.graph_parallel.synchronous import Synchronous
from gnntrain.strategies.registry import Method, register


@dataclass
class Int8HaloConfig(GraphParallelConfig):
    """Int8 halos: the graph-parallel keys, and the share of each row's range the codes span."""

    clip: float = 1.0
    """Scale the codes to this share of the row's largest magnitude (values beyond it saturate)."""


def validate(config: Int8HaloConfig) -> None:
    """What the key's type cannot say (a bad value stops the run in one line)."""
    check("strategy.clip", config.clip, 0 < config.clip <= 1, "in (0, 1]")


class Int8Halo(Synchronous):
    """The halo policy: vanilla's (the full graph, full-precision halos for evaluation), with the
    training halo rows sent as int8 codes."""

    def __init__(self, config: Int8HaloConfig, graph: LocalGraph, comm, model) -> None:
        super().__init__(config, graph, comm, model)
        self.clip = config.clip

    def training_view(self, epoch: int):
        return self.graph, self.halo_rows

    def halo_rows(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        return _Int8Exchange.apply(h, self.exchange, layer, self.clip)


class _Int8Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, exchange: HaloExchange, layer: int, clip: float) -> torch.Tensor:
        ctx.exchange, ctx.layer = exchange, layer
        rows = h.detach()[exchange.send_index]
        scale = (clip * rows.abs().amax(dim=1, keepdim=True)).clamp(min=1e-12) / 127
        codes = torch.round(rows / scale).clamp(-127, 127).to(torch.int8)
        send, recv = exchange.send_splits, exchange.recv_splits
        codes = exchange.comm.all_to_all_start(codes, send, recv, "int8_halo").wait()
        scale = exchange.comm.all_to_all_start(scale.float(), send, recv, "int8_halo").wait()
        return codes.to(h.dtype) * scale.to(h.dtype)

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor):
        exchange = ctx.exchange
        grad_sent = exchange.start_backward(grad_halo, ctx.layer).wait()
        return exchange.gradient_of_sent_rows(grad_sent), None, None, None


register(Method("int8_halo", FAMILY, Int8Halo, Int8HaloConfig, kinds={"int8_halo": "data"}, validate=validate))

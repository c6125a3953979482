"""A stack of message-passing layers that runs on one rank's local graph.

``layers`` counts message-passing layers from input to output, as the papers count them: a
2-layer GCN is ``in -> hidden -> classes``. Each layer obtains the halo rows of its input from
``halo`` (whatever the strategy supplies: fresh, stale, sampled or quantized rows), applies
dropout to its inner rows and to the received halo rows separately (the receiver draws the
halo rows' masks, so a stale halo never carries an old mask and forward and backward masks
agree; PipeGCN, Appendix F), then aggregates; every layer but the last is followed by the
optional normalisation (``model.norm``, see :mod:`gnntrain.models.norm`) and the activation.
The model never sees global node ids or how the halo rows were obtained.
"""

from __future__ import annotations

from typing import Callable, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from gnntrain.graph import LocalGraph
from gnntrain.models.norm import AllSum, local_sum, make_norm


class HaloSource(Protocol):
    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor: ...


LayerFactory = Callable[[int, int, bool], nn.Module]
"""``(in_dim, out_dim, is_last) -> layer``."""


class MessagePassingModel(nn.Module):
    """What the models share: ``convs`` (message-passing layers with ``in_dim``) and ``dropout``."""

    convs: nn.ModuleList
    dropout: float

    @property
    def input_widths(self) -> list[int]:
        """Width of each layer's input: the width of the rows its halo exchange moves."""
        return [conv.in_dim for conv in self.convs]

    def _dropout(self, h: torch.Tensor) -> torch.Tensor:
        return F.dropout(h, self.dropout, self.training)


class GNN(MessagePassingModel):
    def __init__(self, make_layer: LayerFactory, in_dim: int, hidden: int, out_dim: int, layers: int,
                 dropout: float, norm: str = "none", activation: Callable = F.relu,
                 all_sum: AllSum = local_sum) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.convs = nn.ModuleList(make_layer(a, b, i == layers - 1)
                                   for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])))
        self.norms = nn.ModuleList(make_norm(norm, hidden, all_sum) for _ in range(layers - 1))
        self.dropout = dropout
        self.activation = activation

    def forward(self, x: torch.Tensor, graph: LocalGraph, halo: HaloSource) -> torch.Tensor:
        h = x
        for i, conv in enumerate(self.convs):
            h_halo = halo(h, i)
            h = conv(self._dropout(h), self._dropout(h_halo), graph)
            if i < len(self.norms):
                h = self.activation(self.norms[i](h))
        return h

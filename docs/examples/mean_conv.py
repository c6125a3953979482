"""A mean-aggregation convolution: a new model in one file outside the package
(docs/extending.md walks through it; tests/test_extending.py runs it).

Each layer maps the mean of a node's in-neighbours' rows, ``h'_i = W mean_j h_j + b`` (GraphSAGE
without its root term). Run it with

    GNNTRAIN_PLUGINS=docs/examples/mean_conv.py gnntrain model=mean_conv
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from gnntrain.config.schema import ModelConfig
from gnntrain.graph import LocalGraph
from gnntrain.models.gnn import LinearMessageLayer, stack
from gnntrain.models.projection import Projected
from gnntrain.models.registry import ModelSpec, register_model


class MeanConv(LinearMessageLayer):
    """``W mean_j h_j + b``: messages are a linear map of the sources, aggregated by the mean
    operator, so the layer may map before or after aggregating and runs from partial sums."""

    operator_kind = "mean"

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.lin = nn.Linear(in_dim, out_dim)

    @property
    def input_maps(self) -> list[nn.Linear]:
        return [self.lin]

    @property
    def message_map(self) -> nn.Linear:
        return self.lin

    @property
    def output_bias(self) -> torch.Tensor:
        return self.lin.bias

    def linear_part(self, z: torch.Tensor, h_inner: torch.Tensor | Projected, graph: LocalGraph,
                    transform: bool) -> torch.Tensor:
        return self.aggregate_messages(z, graph, transform)


@dataclass
class MeanConvConfig(ModelConfig):
    """Mean convolutions: 2 x 32 by default."""

    hidden: int = 32


register_model(ModelSpec("mean_conv", lambda cfg, i, o, s: stack(cfg, i, o, s, lambda a, b, last: MeanConv(a, b)),
                         MeanConvConfig))

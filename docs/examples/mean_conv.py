"""A mean-aggregation convolution: a new model in one file outside the package
(docs/extending.md walks through it; tests/test_extending.py runs it).

Each layer maps the mean of a node's in-neighbours' rows, ``h'_i = W mean_j h_j + b`` (GraphSAGE
without its root term). Run it with

    GNNTRAIN_PLUGINS=docs/examples/mean_conv.py gnntrain model=mean_conv
"""

from __future__ import annotations

from dataclasses import dataclass

from gnntrain.data.aggregation import MEAN
from gnntrain.config.schema import ModelConfig
from gnntrain.models.gcn import GCNLayer
from gnntrain.models.gnn import stack
from gnntrain.models.registry import ModelSpec, register_model


class MeanConv(GCNLayer):
    """``W mean_j h_j + b``: GCN's layer with the mean over the in-neighbours as its aggregation
    matrix instead of GCN's normalised one; the messages stay a linear map of the sources, so the
    layer maps before or after aggregating, whichever costs less, and runs from partial sums."""

    aggregation = MEAN


@dataclass
class MeanConvConfig(ModelConfig):
    """Mean convolutions: 2 x 32 by default."""

    hidden: int = 32


register_model(ModelSpec("mean_conv", lambda c, i, o, s: stack(c, i, o, s, lambda a, b, last: MeanConv(a, b)),
                         MeanConvConfig))

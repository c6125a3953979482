"""The mini-batch family: neighbour-sampled training over node features partitioned across
ranks (:mod:`~gnntrain.strategies.minibatch.common`), and HopGNN's ways of moving either the
features or the models:

* ``minibatch`` — the model-centric baseline (features travel to the model), and ``lo``, its
  locality-optimised variant (:mod:`~gnntrain.strategies.minibatch.data_centric`);
* ``hopgnn`` — models travel to the features, over micrographs, with pre-gathering and
  merging (:mod:`~gnntrain.strategies.minibatch.hopgnn`).
"""

from __future__ import annotations

from gnntrain.strategies.minibatch import common, hopgnn
from gnntrain.strategies.minibatch.data_centric import LocalityOptimised, MiniBatch
from gnntrain.strategies.minibatch.hopgnn import HopGNN, HopGNNConfig

STRATEGIES = {"minibatch": MiniBatch, "lo": LocalityOptimised, "hopgnn": HopGNN}
SCHEMAS = {"minibatch": common.MiniBatchConfig, "lo": common.MiniBatchConfig, "hopgnn": HopGNNConfig}


def validate(strategy: dict) -> None:
    common.validate(strategy)
    if strategy["name"] == "hopgnn":
        hopgnn.validate(strategy)

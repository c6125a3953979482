"""The mini-batch family: neighbour-sampled training over node features partitioned across
ranks (:mod:`~gnntrain.strategies.minibatch.common`), and HopGNN's ways of moving either the
features or the models:

* ``minibatch`` — the model-centric baseline (features travel to the model), and ``lo``, its
  locality-optimised variant (:mod:`~gnntrain.strategies.minibatch.data_centric`);
* ``p3`` — the first layer model-parallel over feature columns, the rest data-parallel
  (:mod:`~gnntrain.strategies.minibatch.p3`);
* ``hopgnn`` — models travel to the features, over micrographs, with pre-gathering and
  merging (:mod:`~gnntrain.strategies.minibatch.hopgnn`), and ``naive``, models travelling
  with whole subgraphs and their intermediate data (:mod:`~gnntrain.strategies.minibatch.naive`).
"""

from __future__ import annotations

from gnntrain.strategies.minibatch import common, hopgnn
from gnntrain.strategies.minibatch.data_centric import LocalityOptimised, MiniBatch
from gnntrain.strategies.minibatch.hopgnn import HopGNN, HopGNNConfig
from gnntrain.strategies.minibatch.naive import Naive
from gnntrain.strategies.minibatch.p3 import P3

STRATEGIES = {"minibatch": MiniBatch, "lo": LocalityOptimised, "p3": P3, "hopgnn": HopGNN, "naive": Naive}
BASELINE = "minibatch"
"""The family's baseline (network calibration probes it): DGL-style mini-batch training."""
SCHEMAS = {"minibatch": common.MiniBatchConfig, "lo": common.MiniBatchConfig, "p3": common.MiniBatchConfig,
           "hopgnn": HopGNNConfig, "naive": common.MiniBatchConfig}


def validate(strategy: dict) -> None:
    common.validate(strategy)
    if strategy["name"] == "hopgnn":
        hopgnn.validate(strategy)

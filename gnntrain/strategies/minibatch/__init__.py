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

The methods are declared, with their configs, in :mod:`~gnntrain.strategies.minibatch.config`,
which imports no torch.
"""

from __future__ import annotations

from gnntrain.strategies.minibatch.config import FAMILY

__all__ = ["FAMILY"]

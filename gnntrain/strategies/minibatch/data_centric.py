"""The model-centric baselines: the model stays, the features travel to it.

* ``strategy=minibatch`` (DGL's distributed training, HopGNN Fig. 3): rank ``d`` trains
  mini-batch ``d`` of every iteration: it samples the blocks of its roots and fetches the input
  features (``feat_fetch``) and root labels (``label_fetch``) it does not own.
* ``strategy=lo``, the locality-optimised baseline of HopGNN Sec. 5.1 ("Limitations of the
  locality-optimized approach") and Sec. 7.9: no migration, every model trains only on roots
  whose features its rank owns. Each rank shuffles its own training nodes (seeded by the
  epoch and the rank) and deals them over the epoch's iterations, so every iteration's global
  batch holds each partition's nodes in proportion: the global order is random only within a
  partition, which biases the mini-batches (on purpose: it is the baseline the paper's Sec. 7.9
  shows losing accuracy). Our reading: the paper gives no batching rule for it.
"""

from __future__ import annotations

import torch

from gnntrain.strategies.minibatch.common import MiniBatchTraining


class MiniBatch(MiniBatchTraining):
    def accumulate(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        roots = batch[self.rank]
        blocks = self.sample(roots, epoch, iteration)
        x = self.fetch_features(blocks.input_nodes)
        y = self.fetch_labels(roots)
        return self.train_on(blocks, x, y, sum(b.numel() for b in batch))


class LocalityOptimised(MiniBatch):
    def iterations(self, epoch: int) -> list[list[torch.Tensor]]:
        count = self.num_iterations()
        dealt = []
        for rank in range(self.world):
            own = self.train_ids[self.owner[self.train_ids] == rank]
            generator = torch.Generator().manual_seed((self.seed * 1_000_003 + epoch) * 1_009 + rank)
            dealt.append(torch.tensor_split(own[torch.randperm(own.numel(), generator=generator)], count))
        return [[dealt[rank][i] for rank in range(self.world)] for i in range(count)]

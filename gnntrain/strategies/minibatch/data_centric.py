"""The model-centric baselines: the model stays, the features travel to it.

* ``strategy=minibatch`` (DGL's distributed training, HopGNN Fig. 3): rank ``d`` trains
  mini-batch ``d`` of every iteration: it samples the blocks of its roots and fetches the input
  features (``feat_fetch``) and root labels (``label_fetch``) it does not own.
* ``strategy=lo``, the locality-optimised baseline of HopGNN Sec. 5.1 ("Limitations of the
  locality-optimized approach") and Sec. 7.9 (PaGraph's and DistDGL's practice): no migration
  and no remote roots, every rank draws its share of each global batch (its slice of
  ``strategy.batch_size``, as ``minibatch`` deals it) from its *own* training nodes, in its own
  shuffled order; a rank whose nodes run out before the epoch's iterations do reshuffles them
  and goes on. So every iteration holds the same number of roots from each partition whatever
  its number of training nodes: nodes of partitions with few training nodes are trained on
  more often than once per epoch, those of partitions with many less often (some not at all),
  and the batches are never mixed across partitions: the bias the paper's Table 3 measures.
  (Dealing every partition's nodes into every batch in proportion would be unbiased; it is
  not what the systems do.)
"""

from __future__ import annotations

import torch

from gnntrain.strategies.minibatch.common import MiniBatchTraining


class MiniBatch(MiniBatchTraining):
    def accumulate(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        blocks = self.sample(batch[self.rank], epoch, iteration)
        x = self.fetch_features(blocks.input_nodes)
        y = self.fetch_labels(blocks.roots)
        return self.train_on(blocks, x, y, sum(b.numel() for b in batch))


class LocalityOptimised(MiniBatch):
    def iterations(self, epoch: int) -> list[list[torch.Tensor]]:
        return local_batches(self.train_ids, self.owner, self.world, self.batch_size, self.num_iterations(),
                             self.seed * 1_000_003 + epoch)


def local_batches(train_ids: torch.Tensor, owner: torch.Tensor, world: int, batch_size: int, count: int,
                  seed: int) -> list[list[torch.Tensor]]:
    """``count`` iterations of ``world`` mini-batches, mini-batch ``r`` of each holding rank
    ``r``'s share of ``batch_size`` from rank ``r``'s own training nodes: shuffled passes over
    them, reshuffled each pass (empty where it owns none)."""
    shares = [piece.numel() for piece in torch.tensor_split(torch.arange(batch_size), world)]
    streams = []
    for rank in range(world):
        own = train_ids[owner[train_ids] == rank]
        length = shares[rank] * count
        turns = -(-length // own.numel()) if own.numel() else 0
        passes = [own[torch.randperm(own.numel(), generator=torch.Generator().manual_seed(
            (seed * 1_009 + rank) * 101 + turn))] for turn in range(turns)]
        streams.append(torch.cat(passes)[:length] if passes else own)
    return [[streams[rank][i * shares[rank]: (i + 1) * shares[rank]] for rank in range(world)] for i in range(count)]

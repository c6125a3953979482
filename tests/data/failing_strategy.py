"""Plugin strategies with bugs (tests/test_worker_errors.py finds this file and the marked lines
in what the user is shown): ``failing`` is vanilla, but rank 1 raises at the start of epoch 2;
``int16_halo`` sends int16 tensors, which gloo's collectives refuse."""

from __future__ import annotations

import torch
import torch.distributed as dist

from gnntrain.strategies.graph_parallel import FAMILY
from gnntrain.strategies.graph_parallel.config import GraphParallelConfig
from gnntrain.strategies.graph_parallel.synchronous import Synchronous
from gnntrain.strategies.registry import Method, register


class FailingHalo(Synchronous):
    def training_view(self, epoch: int):
        if dist.get_rank() == 1 and epoch == 2:
            raise ValueError("rank 1 cannot go on")  # RAISES HERE
        return super().training_view(epoch)


class Int16Halo(Synchronous):
    def training_view(self, epoch: int):
        exchange = self.exchange
        codes = torch.zeros(sum(exchange.send_splits), 4, dtype=torch.int16)
        exchange.comm.all_to_all_start(codes, exchange.send_splits, exchange.recv_splits, "halo_fwd")  # SENDS INT16
        return super().training_view(epoch)


register(Method("failing", FAMILY, FailingHalo, GraphParallelConfig))
register(Method("int16_halo", FAMILY, Int16Halo, GraphParallelConfig))

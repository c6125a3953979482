"""``vanilla``: the graph-parallel baseline of every paper. Each layer waits for a fresh,
full-precision exchange of all halo rows (forward features, backward gradients); with
``strategy.halo_dtype`` the training exchanges send them in 16 bits and evaluation stays at
full precision."""

from __future__ import annotations

from gnntrain.comm.communicator import Communicator
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import HaloSource, MessagePassingModel
from gnntrain.parallel.halo import HaloExchange
from gnntrain.strategies.graph_parallel.config import GraphParallelConfig
from gnntrain.strategies.graph_parallel.strategy import HaloPolicy, halo_wire


class Synchronous(HaloPolicy):
    def __init__(self, config: GraphParallelConfig, graph: LocalGraph, comm: Communicator,
                 model: MessagePassingModel) -> None:
        self.graph = graph
        self.exchange = HaloExchange(graph, comm)
        self.training = HaloExchange(graph, comm, wire=halo_wire(config))

    def training_view(self, epoch: int) -> tuple[LocalGraph, HaloSource]:
        return self.graph, self.training

    def evaluation_halo(self) -> HaloSource:
        return self.exchange

"""Data parallelism's epoch as the predictor writes it (:attr:`Method.timing_model
<gnntrain.strategies.registry.Method.timing_model>`): every rank a replica of the whole graph and
model (``strategy.graph_parallel=1``), a full-graph step on each (the loss on its share of the
training nodes; the forward and backward cover the whole graph), then one all-reduce of the
``P`` parameters' gradients. Replicas that split the graph (``graph_parallel`` > 1) are not
modelled."""

from __future__ import annotations

from gnntrain.errors import ConfigError
from gnntrain.cost.compute import Costs
from gnntrain.cost.shape import PartitionShape
from gnntrain.timing.builder import TraceBuilder


def replicas(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    if config.graph_parallel != 1:
        raise ConfigError(f"strategy.graph_parallel={config.graph_parallel}: the predictor models data parallelism "
                          "with whole-graph replicas only; valid: 1")
    step = costs.step(shape.nodes, 0, shape.edges)
    line.compute([step.forward for _ in line.ranks])
    line.compute([step.backward for _ in line.ranks])
    line.ring("allreduce", costs.parameters * costs.value_bytes)

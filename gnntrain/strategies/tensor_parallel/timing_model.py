"""NeutronTP's epoch as the predictor writes it (:attr:`Method.timing_model
<gnntrain.strategies.registry.Method.timing_model>`): every rank computes ``1/W`` of the whole
graph's step (its block of rows through the dense maps, the whole graph's aggregation on its
slice of the columns), per layer between the two transposes of its aggregation
(:mod:`gnntrain.parallel.feature_split`): forward into the columns and back into the rows
(``transpose_fwd``), then the layers' backwards in reverse, each between the transposes of its
gradient (``transpose_bwd``; none for a first layer that aggregates the raw input), then one
all-reduce of the ``P`` parameters' gradients. A layer's compute is the step's divided evenly
among the layers and between the two sides of its aggregation."""

from __future__ import annotations

from gnntrain.models.gnn import LinearMessageLayer, transform_first
from gnntrain.parallel.feature_split import even_blocks
from gnntrain.cost.compute import Costs
from gnntrain.cost.shape import PartitionShape
from gnntrain.timing.builder import TraceBuilder


def transposed_widths(costs: Costs, nodes: int, edges: int) -> list[tuple[int, bool]]:
    """Per layer, the width its aggregation transposes and whether its gradient is transposed
    back (the layer's messages need one): the order the strategy picks for the whole graph."""
    model, widths = costs.model, []
    for i, conv in enumerate(model.convs):
        mapped = isinstance(conv, LinearMessageLayer) and transform_first(
            nodes, nodes, edges + nodes * conv.aggregation.self_loops, conv.in_dim, conv.message_map.out_features)
        raw_input = i == 0 and model.summed_input_layer is conv
        widths.append((conv.message_map.out_features if mapped else conv.in_dim, mapped or not raw_input))
    return widths


def transposed(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    world, layers = len(line.ranks), costs.layers
    rows = even_blocks(shape.nodes, world)
    step = costs.step(shape.nodes, 0, shape.edges).scaled(1 / world)

    def transpose(kind: str, width: int) -> None:
        columns = even_blocks(width, world)
        size = costs.value_bytes
        for sent in ([[rows[r] * columns[q] * size * (q != r) for q in range(world)] for r in range(world)],
                     [[rows[q] * columns[r] * size * (q != r) for q in range(world)] for r in range(world)]):
            line.wait(line.exchange(kind, sent))
            line.compute([step.forward / layers / 2 if kind.endswith("fwd") else step.backward / layers / 2] * world)

    plan = transposed_widths(costs, shape.nodes, shape.edges)
    for width, _ in plan:
        transpose("transpose_fwd", width)
    for width, backward in reversed(plan):
        if backward:
            transpose("transpose_bwd", width)
        else:
            line.compute([step.backward / layers] * world)
    line.ring("allreduce", costs.parameters * costs.value_bytes)

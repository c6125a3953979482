"""GNNPipe's epoch as the predictor writes it (:attr:`Method.timing_model
<gnntrain.strategies.registry.Method.timing_model>`), with ``strategy.graph_parallel=1``: rank ``s``
is stage ``s`` of ``S`` (= the workers), holding its layers for the whole graph, which streams
through in ``K`` chunks (the job's partition into ``K`` parts: chunk ``k``'s ``n_k`` rows read
its ``o_k`` other rows from the tables).

As :meth:`~gnntrain.strategies.gnnpipe.pipeline.GNNPipe.train_epoch` runs it: every chunk's
forward, then every chunk's backward in reverse order. A stage but the first waits for a
chunk's input rows from the stage before (``pipe_fwd``: ``n_k B`` values, ``B`` the width
crossing the cut, :func:`~gnntrain.parallel.stages.stage_boundaries`) before its forward and
sends its output on without waiting; in the backward a stage but the last waits for the
gradients of its output rows (``pipe_bwd``) and sends those of its input rows back; the epoch
ends when its sends have left. A stage's compute on a chunk is the model's step on the chunk's
rows, other rows and edges times the share of the message-passing layers the stage holds. The
chunks are taken in their own order (the shuffled order changes which chunk waits, not how
much); the history's copy at the end of an epoch and its warm-up pass are left out."""

from __future__ import annotations

from gnntrain.errors import ConfigError
from gnntrain.parallel.stages import stage_boundaries, stage_of_blocks
from gnntrain.cost.compute import Costs
from gnntrain.cost.shape import PartitionShape
from gnntrain.timing.builder import TraceBuilder


def pipeline(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    if config.graph_parallel != 1:
        raise ConfigError(f"strategy.graph_parallel={config.graph_parallel}: the predictor models GNNPipe's pure "
                          "pipeline only; valid: 1")
    import torch

    stages = len(line.ranks)
    if "cuts" not in state:
        model = costs.model
        owner = stage_of_blocks(model.blocks, costs.layers, stages)
        boundaries = stage_boundaries(model, owner, shape.features, torch.float32, torch.device("cpu"))
        state["cuts"] = [b.width + sum(w for _, w in b.extras) for b in boundaries]
        state["share"] = [sum(1 for b, s in zip(model.blocks, owner) if s == stage and b.layer is not None)
                          / costs.layers for stage in range(stages)]
    cuts, share = state["cuts"], state["share"]
    chunks = [costs.step(shape.inner[k], shape.halo[k], shape.in_edges[k]) for k in range(shape.parts)]
    size = costs.value_bytes
    for s, rank in enumerate(line.ranks):
        pending = []
        for k, step in enumerate(chunks):
            if s > 0:
                rank.wait(rank.recv("pipe_fwd", s - 1, shape.inner[k] * cuts[s - 1] * size))
            rank.compute(step.forward * share[s])
            if s < stages - 1:
                pending.append(rank.send("pipe_fwd", s + 1, shape.inner[k] * cuts[s] * size))
        for k in reversed(range(len(chunks))):
            if s < stages - 1:
                rank.wait(rank.recv("pipe_bwd", s + 1, shape.inner[k] * cuts[s] * size))
            rank.compute(chunks[k].backward * share[s])
            if s > 0:
                pending.append(rank.send("pipe_bwd", s - 1, shape.inner[k] * cuts[s - 1] * size))
        for op in pending:
            rank.wait(op)

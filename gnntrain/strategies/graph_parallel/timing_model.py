"""The graph-parallel methods' epochs as the predictor writes them (:attr:`Method.timing_model
<gnntrain.strategies.registry.Method.timing_model>`, :mod:`gnntrain.timing.builder`): what each
rank computes and sends, in order, from the partition's shape and the method's config.

Every method of the family runs the epoch of :class:`~gnntrain.parallel.full_batch.FullBatchStep`:
per layer ``l`` a halo exchange of the layer's input rows (``halo_fwd``: rank ``r`` sends ``q``
its ``rows[r][q]`` rows of width ``d_l``) and the layer's forward; the layers' backwards in
reverse, each but the first layer's followed by the exchange of its halo rows' gradients back to
their owners (``halo_bwd``: ``rows[q][r]`` rows to ``q``); one all-reduce of the ``P``
parameters' gradients. A layer's forward and backward are the step's (:class:`~gnntrain.cost.compute.Costs`)
divided evenly among the layers. ``model.precompute_first`` drops layer 0's exchange.

* ``vanilla``: every exchange waited where it is posted; rows of ``train.dtype`` (or
  ``strategy.halo_dtype``'s 2 bytes).
* ``pipegcn``: each exchange waited at the same point of the next epoch (stale by one epoch).
* ``pipeqs``: ``pipegcn``'s in its steady state, each exchange taken followed by its change's
  all-reduce (``change``, 24 bytes): with ``assign=change`` at the top of its ladder, 32 bits (a
  2-bit message's quantisation noise alone moves it by more than the threshold, so every measured
  exchange steps the width up: measured, every cell of ``make predict-check`` reaches 32 bits by
  its fifth epoch); its cache hits are not modelled (they follow how fast the messages change,
  which no statistic of the graph gives, as Sancus's skips).
* ``broadcast``, ``sancus``: every rank's inner rows to every peer per layer (:func:`broadcast`).
* ``sylvie``: ``pipegcn``'s at ``strategy.bits`` (1 by default), every ``sync_every``-th epoch
  waiting for its exchanges where they are posted.
* ``bns``, ``bes``, ``dropedge``: the same as vanilla on the epoch's sample, in expectation: a
  halo row kept with probability ``p`` (BNS-GCN); a cut edge kept with ``p`` and a row sent where
  one of its edges is kept (BES); every edge kept with ``k = 1 - (1 - p) C / E`` (DropEdge); the
  step on the sampled rows and edges, with the epoch's sampling (the draws, the sampled graph and
  its matrices: the policy's own functions counted on the rank's part); before it, each halo holder's 1-bit mask of its kept rows to
  their owner (``sample_index``, ``ceil(rows / 8)`` bytes).
* ``granndis``: vanilla's on each rank's preloaded graph (:mod:`gnntrain.data.preloading`, carved
  from the partition's graph, a proxy's scaled): its step on its inner rows with the replicated
  ones (with ``strategy.fanout``, on its co-batch's), its exchanges with the ranks of its server only.
* ``adaqp``: rows as AdaQP's records (``ceil(d b / 8) + 4`` bytes at ``b`` bits); the sender
  quantises, the receiver dequantises and traces each row (priced by the kernels they run). With
  ``assign=adaptive`` the epochs before the first assignment (every row at 8 bits): the widths the
  assigner picks later depend on the data's variance, which no statistic of the graph gives, and
  its own traffic (``assign``) comes once every ``period`` epochs. ``uniform``: the mean record
  over 2, 4 and 8 bits. The central/marginal overlap (``strategy.overlap``) is not modelled: the
  exchange is waited before the layer's compute.

Not modelled: gathering the sent rows and adding the returned gradients (an indexed pass over the
sent rows per exchange, small beside the layer).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from gnntrain.cost.compute import Costs, StepSeconds
from gnntrain.cost.kernels import count
from gnntrain.cost.shape import PartitionShape
from gnntrain.timing.builder import TraceBuilder

RowBytes = Callable[[int], float]
"""Bytes of one halo row of a layer's input width."""


def _plain_rows(config, costs: Costs) -> RowBytes:
    size = 2 if getattr(config, "halo_dtype", None) is not None else costs.value_bytes
    return lambda width: width * size


def _exchanges(costs: Costs) -> range:
    """The layers whose forward exchanges halo rows."""
    return range(1 if costs.run.model.precompute_first else 0, costs.layers)


def halo_epoch(line: TraceBuilder, costs: Costs, rows: list[list[float]], row_bytes: RowBytes,
               steps: list[StepSeconds], state: dict | None = None, per_row: Callable[[int], float] | None = None,
               fresh: bool = False, after_exchange: Callable[[], None] | None = None) -> None:
    """One epoch of full-graph training with halo exchanges (module docstring): ``rows[r][q]``
    rows from ``r`` to ``q``; ``steps`` each rank's step; ``state`` given: the exchanges are stale
    by one epoch (kept there from one epoch to the next), unless ``fresh``: then each waits for
    the one still in flight and for itself where it is posted; ``per_row(width)``: seconds of
    coding per row sent and again per row received; ``after_exchange()`` written after each exchange
    taken from the last epoch (stale ones, from the second epoch on)."""
    world, layers = len(rows), costs.layers
    backward_rows = [[rows[q][r] for q in range(world)] for r in range(world)]
    exchanged = set(_exchanges(costs))

    def exchange(kind: str, layer: int, sent: list[list[float]]) -> None:
        width = costs.widths[layer]
        if per_row is not None:
            line.compute([sum(sent[r]) * per_row(width) for r in range(world)])
        ops = line.exchange(kind, [[n * row_bytes(width) for n in row] for row in sent])
        if state is not None and (kind, layer) in state:
            line.wait(state.pop((kind, layer)))
            if after_exchange is not None:
                after_exchange()
        if state is None or fresh:
            line.wait(ops)
        else:
            state[kind, layer] = ops
        if per_row is not None:
            line.compute([sum(sent[q][r] for q in range(world)) * per_row(width) for r in range(world)])

    for layer in range(layers):
        if layer in exchanged:
            exchange("halo_fwd", layer, rows)
        line.compute([s.forward / layers for s in steps])
    for layer in reversed(range(layers)):
        line.compute([s.backward / layers for s in steps])
        if layer >= 1 and layer in exchanged:
            exchange("halo_bwd", layer, backward_rows)
    line.ring("allreduce", costs.parameters * costs.value_bytes)


def _whole(shape: PartitionShape, costs: Costs) -> list[StepSeconds]:
    return [costs.step(shape.inner[r], shape.halo[r], shape.in_edges[r]) for r in range(shape.parts)]


def synchronous(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """``vanilla``'s epoch."""
    halo_epoch(line, costs, [list(r) for r in shape.rows], _plain_rows(config, costs), _whole(shape, costs))


def stale(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict,
          fresh: bool = False, after_exchange: Callable[[], None] | None = None) -> None:
    """``pipegcn``'s epoch: the exchanges of the last epoch waited, this epoch's posted (``fresh``:
    waited where posted); ``after_exchange`` written after each."""
    row_bytes = _plain_rows(config, costs) if config.bits == 32 else (
        lambda width: math.ceil(width * config.bits / 8) + 4)
    halo_epoch(line, costs, [list(r) for r in shape.rows], row_bytes, _whole(shape, costs), state=state, fresh=fresh,
               after_exchange=after_exchange)


def bounded_stale(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """``sylvie``'s epoch: ``pipegcn``'s, fresh every ``sync_every``-th epoch."""
    stale(config, shape, costs, line, epoch, state, fresh=epoch % config.sync_every == 0)


CHANGE_BYTES = 24
"""PipeQS's change measure: three float64 values all-reduced per exchange it takes."""


def cached_stale(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """``pipeqs``'s steady epoch (module docstring): ``pipegcn``'s at the top of its widths' ladder
    (``assign=change``) or at ``strategy.bits`` (``fixed``), fresh with ``strategy.pipeline=false``,
    each exchange it takes followed by its change's all-reduce where it measures one."""
    from gnntrain.strategies.graph_parallel.bit_plans import ChangeDrivenBits

    bits = ChangeDrivenBits.LADDER[-1] if config.assign == "change" else config.bits
    measures = config.pipeline and (config.cache or config.assign == "change")
    stale(replace(config, bits=bits), shape, costs, line, epoch, state, fresh=not config.pipeline,
          after_exchange=(lambda: line.ring("change", CHANGE_BYTES)) if measures else None)


def broadcast(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """``broadcast``'s epoch, and ``sancus``'s as if it never skipped (an upper bound: how often
    it skips depends on how fast the embeddings change, which no statistic of the graph gives).
    Forward, each layer's broadcast of every rank's inner rows to every peer (``sancus`` with a
    threshold announces it first, one byte per peer); backward, the synchronous baseline's
    return of the halo rows' gradients."""
    world, layers = shape.parts, costs.layers
    steps, exchanged = _whole(shape, costs), set(_exchanges(costs))
    for layer in range(layers):
        width = costs.widths[layer]
        sent = [[shape.inner[r] * width * costs.value_bytes * (q != r) for q in range(world)] for r in range(world)]
        if layer in exchanged:
            if getattr(config, "threshold", 0.0) > 0:
                line.wait(line.exchange("skip_flags", [[float(q != r) for q in range(world)] for r in range(world)]))
            line.wait(line.exchange("bcast_fwd", sent))
        line.compute([s.forward / layers for s in steps])
    backward_rows = [[shape.rows[q][r] for q in range(world)] for r in range(world)]
    for layer in reversed(range(layers)):
        line.compute([s.backward / layers for s in steps])
        if layer >= 1 and layer in exchanged:
            width = costs.widths[layer]
            line.wait(line.exchange("halo_bwd", [[n * width * costs.value_bytes for n in row] for row in backward_rows]))
    line.ring("allreduce", costs.parameters * costs.value_bytes)


def preloaded(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """``granndis``'s epoch (module docstring)."""
    if "preloaded" not in state:
        from gnntrain.data.preloading import carve_preloaded

        run, parts = costs.run, shape.parts
        hops = config.hops if config.hops is not None else run.model.layers
        ranks = [carve_preloaded(shape.data, shape.part, r, parts, run.network.gpus_per_node or 1, hops, config.rate,
                                 config.seed, config.fanout) for r in range(parts)]
        edge_ratio = shape.edges / shape.data.num_edges
        rows = [[ranks[r]["send_splits"][q] * shape.scale for q in range(parts)] for r in range(parts)]
        steps = [costs.step(g["num_inner"] * shape.scale, g["num_halo"] * shape.scale, g["edge_src"].numel() * edge_ratio)
                 for g in ranks]
        state["preloaded"] = rows, steps
    rows, steps = state["preloaded"]
    halo_epoch(line, costs, rows, _plain_rows(config, costs), steps)


def _keep(name: str, p: float, shape: PartitionShape) -> float:
    """The probability a cut edge is kept: ``p`` (BES), DropEdge's ``k`` (every edge)."""
    if name == "dropedge":
        cut = sum(shape.cut_edges(r) for r in range(shape.parts))
        return 1.0 - (1.0 - p) * cut / max(shape.edges, 1)
    return p


def sampled(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """``bns``, ``bes`` and ``dropedge``'s epoch, in expectation (module docstring)."""
    world, p = shape.parts, config.p
    if p >= 1.0:
        return synchronous(config, shape, costs, line, epoch, state)
    if p > 0.0:
        line.wait(line.exchange("sample_index", [[math.ceil(shape.rows[q][r] / 8) for q in range(world)]
                                                 for r in range(world)]))
    keep = _keep(config.name, p, shape)
    if config.name == "bns":
        rows = [[p * n for n in row] for row in shape.rows]
    else:
        rows = [[shape.kept_rows(q, r, keep) for r in range(world)] for q in range(world)]
    steps = []
    for r in range(world):
        cut = shape.cut_edges(r)
        inner_edges = shape.in_edges[r] - cut
        kept = {"bns": inner_edges + p * cut, "bes": inner_edges + p * cut}.get(config.name, keep * shape.in_edges[r])
        step = costs.step(shape.inner[r], sum(rows[q][r] for q in range(world)), kept)
        steps.append(StepSeconds(step.forward + _sampling(config, shape, costs, state, r, keep), step.backward))
    halo_epoch(line, costs, rows, _plain_rows(config, costs), steps)


def _sampling(config, shape: PartitionShape, costs: Costs, state: dict, rank: int, keep: float) -> float:
    """Seconds of drawing rank ``rank``'s sample of an epoch and building the sampled graph and
    its matrices: the policy's own code (:func:`~.sampled.draw_sample`, :func:`~.sampled.sampled_graph`)
    counted on the rank's part (a proxy's, scaled), priced by the device."""
    if ("sampling", rank) not in state:
        import torch

        from gnntrain.data.local_graph import build_local_graph
        from gnntrain.strategies.graph_parallel.sampled import draw_sample, sampled_graph

        graph = build_local_graph(shape.data, shape.part, rank, shape.parts, getattr(torch, str(costs.run.train.dtype)))
        is_cut = graph.edge_src >= graph.num_inner
        cut_edges = is_cut.nonzero().view(-1)
        generator = torch.Generator().manual_seed(rank)
        aggregations = {conv.aggregation for conv in costs.model.convs if hasattr(conv, "aggregation")}

        def epoch() -> None:
            edge_keep, halo_keep = draw_sample(config.name, graph, is_cut, cut_edges,
                                               lambda n: torch.rand(n, generator=generator) < keep)
            sample = sampled_graph(graph, edge_keep, None, halo_keep, graph.send_index, graph.send_splits)
            for aggregation in aggregations:
                sample.operator(aggregation)

        state["sampling", rank] = costs.profile.seconds(count(epoch), costs.cores) * shape.scale
    return state["sampling", rank]


def quantized(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """``adaqp``'s epoch (module docstring)."""
    from gnntrain.comm.quantize import dequantize, quantize, record_bytes

    if config.assign == "fixed" and config.bits == 32:
        return synchronous(config, shape, costs, line, epoch, state)
    widths = (8,) if config.assign == "adaptive" else (2, 4, 8) if config.assign == "uniform" else (config.bits,)
    row_bytes = lambda width: sum(record_bytes(width, b) for b in widths) / len(widths)  # noqa: E731
    coding: dict[int, float] = {}

    def per_row(width: int) -> float:
        if width not in coding:
            coding[width] = sum(costs.per_row(lambda x, b=b: dequantize(quantize(x, b), b, width), width)
                                for b in widths) / len(widths) / 2
        return coding[width]

    halo_epoch(line, costs, [list(r) for r in shape.rows], row_bytes, _whole(shape, costs), per_row=per_row)

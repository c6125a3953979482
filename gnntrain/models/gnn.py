"""A stack of message-passing layers that runs on one rank's local graph.

``layers`` counts message-passing layers from input to output, as the papers count them: a
2-layer GCN is ``in -> hidden -> classes``. Each layer obtains the halo rows of its input from
``halo`` (whatever the strategy supplies: fresh, stale, sampled or quantized rows), applies
dropout to its inner rows and to the received halo rows, then aggregates; every layer but the
last is followed by the optional normalisation (``model.norm``, see :mod:`gnntrain.models.norm`)
and the activation. The model never sees how the halo rows were obtained.

Dropout is keyed (:func:`gnntrain.rng.random16.dropout`): the mask of a row is a function of the
step's key (:meth:`MessagePassingModel.begin_step`: seed, epoch, iteration), the dropout *site*
(each place of the model that drops, e.g. the input of layer ``i``) and the row's global node
id. So the owner of a row and every rank that reads it as a halo row apply the same mask, and a
distributed step equals the single-process step with dropout on. A halo row's mask is drawn
where it is read: a stale halo gets the current step's mask (forward and backward masks agree;
PipeGCN, Appendix F).

Every model is a sequence of :class:`Block` s, ``(h, extra) -> (h, extra)``, run in order by
:meth:`MessagePassingModel.forward`: a block runs one message-passing layer (and what follows
it up to the next layer's input) or a row-wise map (input and output linear maps); ``extra``
holds per-node state that later blocks read besides ``h`` (GCNII's initial residual ``h0``).
A pipeline stage is a slice of the blocks; a mini-batch step runs the same blocks on a
sampled graph. The rows of ``h`` are always the first rows of the graph's local ids (the inner
rows, or every source of a sampled block's first layer), so ``graph.global_ids[:len(h)]`` are
their node ids.

Evaluation order (:func:`transform_first`): a layer whose message map is linear (GCN, SAGE)
applies it before aggregating or after, whichever costs fewer multiply-adds for the rows at
hand: one rule for every strategy's graphs (a partition with its halo, a pipeline chunk, a
sampled block). Each layer counts the rows it passes through its dense map
(:mod:`gnntrain.models.rows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

from gnntrain.rng import keyed
from gnntrain.timing.clock import naming, phase, relabel
from gnntrain.data.aggregation import MEAN, Aggregation
from gnntrain.config.schema import ModelConfig
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.norm import AllSum, local_sum, make_norm
from gnntrain.models import rows
from gnntrain.models.projection import Projected, project, split, stacked_weight
from gnntrain.rng.random16 import dropout


class HaloSource(Protocol):
    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """The halo rows of ``h`` (the inner rows of layer ``layer``'s input)."""
        ...


Dropout = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``(rows, their global node ids) -> rows with one dropout site's keyed mask applied``."""


def transform_first(sources: int, targets: int, entries: int, in_dim: int, out_dim: int) -> bool:
    """Whether ``A (H W)`` costs fewer multiply-adds than ``(A H) W`` for an aggregation matrix
    ``A`` of ``targets x sources`` with ``entries`` non-zeros and a map ``W`` of ``in_dim x
    out_dim``: ``sources in out + entries out < targets in out + entries in`` (the backward
    pass costs twice each side, so the same side wins). Ties aggregate first (fewer rows through
    the map)."""
    return sources * in_dim * out_dim + entries * out_dim < targets * in_dim * out_dim + entries * in_dim


class MessagePassingLayer(nn.Module):
    """A layer in three steps, so that its output rows can be computed in pieces:

    * ``message(h, transform)``: a row-wise map of source rows (applied to inner and halo rows
      apart; ``transform``: the order :meth:`transforms_first` chose, for layers that have one);
    * ``aggregate(z, h_inner, graph, transform, *extra)``: the rows of ``graph``'s targets, from
      the messages ``z`` of all its sources (inner then halo) and the layer input's inner rows
      (root terms take ``graph.target_rows`` of them, and of any ``extra`` per-node input);
    * ``update(a)``: a map of the assembled rows of all inner nodes (it may mix rows, as batch
      norm does).
    """

    in_dim: int
    reads_targets = False
    """Whether :meth:`aggregate` reads ``h_inner`` beyond ``z`` (root terms of the targets)."""
    edge_key: int = 0
    """The current training step's key of the layer's per-edge dropout (GAT's attention
    dropout), set by :meth:`MessagePassingModel.begin_step`."""

    @property
    def input_maps(self) -> list[nn.Linear]:
        """The linear maps that read this layer's input (see :mod:`gnntrain.models.projection`)."""
        raise NotImplementedError

    def transforms_first(self, graph: LocalGraph) -> bool:
        """Whether the message map runs on the sources before aggregating over ``graph`` (the
        rows at hand: a local graph, a pipeline stage's member graph, a sampled block). Layers
        whose messages need each source projected (attention, modulation) or that have no
        message map ignore it."""
        return True

    def aggregates_rows_by_operator(self, transform: bool) -> bool:
        """Whether, in this order, the messages are the (dropped) input rows themselves and enter
        :meth:`aggregate` only as ``graph.operator(aggregation) @ z``: then a strategy may pass the
        messages of some sources only and let the graph's operator supply the rest (a pipeline
        chunk reading other chunks' rows where they lie, :mod:`gnntrain.parallel.history`)."""
        return False

    def message(self, h: torch.Tensor, transform: bool) -> torch.Tensor:
        return h

    def read_inputs(self, h_inner: torch.Tensor | Projected, transform: bool) -> torch.Tensor | Projected:
        """The inner rows of the layer input as :meth:`message` and :meth:`aggregate` read them:
        the rows themselves, or (a layer that maps them by several input maps before
        aggregating) their projections by all of them in one product."""
        return h_inner

    def squared_weight_sums(self, graph: LocalGraph) -> torch.Tensor:
        """Per local row ``k``, ``sum_v alpha_kv^2`` over the targets ``v`` it is aggregated
        into: what scales the variance a noisy row adds to the layer's output (AdaQP Eq. 11).
        Here the mean's ``1 / in-degree``: layers whose weights are attention or softmax
        scores, which change with the data every step, take the mean as a stand-in."""
        return squared_weight_sums(graph, MEAN)

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor, graph: LocalGraph, transform: bool,
                  *extra: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def update(self, a: torch.Tensor) -> torch.Tensor:
        return a

    def forward(self, h_inner: torch.Tensor, h_halo: torch.Tensor, graph: LocalGraph, *extra: torch.Tensor) -> torch.Tensor:
        transform = self.transforms_first(graph)
        h_inner = self.read_inputs(h_inner, transform)
        z = source_rows(self.message(h_inner, transform), self.message(h_halo, transform))
        return self.update(self.aggregate(z, h_inner, graph, transform, *extra))


def source_rows(inner: torch.Tensor, halo: torch.Tensor) -> torch.Tensor:
    """The rows of every local source, inner then halo: ``inner`` itself where there is no
    halo row and none could be (a single part, a sampled block), so no copy of the inner rows is
    made. An empty halo that came through an exchange stays in the autograd graph: its backward
    is the rank's part of a collective (it still receives its sent rows' gradients), which every
    rank must run even where it received no row (a boundary-sampled epoch keeping none)."""
    return torch.cat([inner, halo]) if halo.shape[0] or halo.requires_grad else inner


def squared_weight_sums(graph: LocalGraph, aggregation: Aggregation, scale: float = 1.0) -> torch.Tensor:
    """Per local row, the sum of its squared entries in ``scale`` x ``graph.operator(aggregation)``."""
    _, src, value = graph.operator_entries(aggregation)
    sums = torch.zeros(graph.num_local, dtype=value.dtype, device=value.device)
    return sums.index_add_(0, src, (scale * value) ** 2)


class LinearMessageLayer(MessagePassingLayer):
    """A layer whose messages are a linear map of the source rows (:attr:`message_map`, its bias
    left out) aggregated by the matrix it declares (``graph.operator(aggregation)``): ``A (H W) =
    (A H) W``, so it maps the sources before aggregating or the targets after, whichever
    :func:`transform_first` finds cheaper for the graph's rows, counting the rows it maps."""

    aggregation: Aggregation

    @property
    def message_map(self) -> nn.Linear:
        raise NotImplementedError

    def transforms_first(self, graph: LocalGraph) -> bool:
        return transform_first(graph.num_local, graph.num_targets, self.aggregation.num_entries(graph), self.in_dim,
                               self.message_map.out_features)

    def aggregates_rows_by_operator(self, transform: bool) -> bool:
        return not transform

    def squared_weight_sums(self, graph: LocalGraph) -> torch.Tensor:
        return squared_weight_sums(graph, self.aggregation)

    def message(self, h: torch.Tensor | Projected, transform: bool) -> torch.Tensor:
        if not transform:
            return h
        if not isinstance(h, Projected):
            rows.add(h.shape[0])
        return project(self.message_map, h, bias=False)

    def read_inputs(self, h_inner: torch.Tensor | Projected, transform: bool) -> torch.Tensor | Projected:
        """With several input maps (SAGE's ``lin_l`` and ``lin_r``) in the transform-first
        order, the rows' :class:`Projected` by the stacked maps: one product reads the rows
        once, and the backward's input gradient is one product too, where separate maps take
        one product each and a sum."""
        maps = self.input_maps
        if not transform or len(maps) == 1 or isinstance(h_inner, Projected):
            return h_inner
        rows.add(h_inner.shape[0])
        return split(maps, h_inner @ stacked_weight(maps).t())

    def aggregate_messages(self, z: torch.Tensor, graph: LocalGraph, transform: bool,
                           added: torch.Tensor | None = None) -> torch.Tensor:
        """``A z``, mapped by ``W`` where the messages are the rows themselves, plus ``added``
        where given (in the map's kernel, ``addmm``, where the map runs after aggregating)."""
        a = graph.operator(self.aggregation) @ z
        if transform:
            return a if added is None else a + added
        rows.add(a.shape[0])
        weight = self.message_map.weight.t()
        return a @ weight if added is None else torch.addmm(added, a, weight)

    @property
    def output_bias(self) -> torch.Tensor:
        """The bias added to the aggregated rows."""
        raise NotImplementedError

    def linear_part(self, z: torch.Tensor, h_inner: torch.Tensor | Projected, graph: LocalGraph,
                    transform: bool, bias: torch.Tensor | None = None) -> torch.Tensor:
        """The output rows less :attr:`output_bias`: a sum of one term per input row, so the
        terms of disjoint parts of the rows (or of the columns, through their projections) add
        up to it. With ``bias``, that bias is added too, inside the kernels that form the sum
        (no pass of its own over the output)."""
        raise NotImplementedError

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor | Projected, graph: LocalGraph,
                  transform: bool) -> torch.Tensor:
        return self.linear_part(z, h_inner, graph, transform, self.output_bias)

    def aggregated_inputs(self, h: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        """The input rows aggregated for the targets, before any map: ``A h`` (and the targets'
        own rows where the layer reads them), linear in ``h``."""
        return graph.operator(self.aggregation) @ h

    def from_aggregated(self, a: torch.Tensor) -> torch.Tensor:
        """:meth:`linear_part` from :meth:`aggregated_inputs`."""
        rows.add(a.shape[0])
        return a @ self.message_map.weight.t()


def order(conv: MessagePassingLayer, h: torch.Tensor | Projected, graph: LocalGraph) -> bool:
    """The order ``conv`` runs in over ``graph``'s rows; projected input rows are always
    transformed first (their projections are all there is of them)."""
    return isinstance(h, Projected) or conv.transforms_first(graph)


@runtime_checkable
class LayerwiseHaloSource(Protocol):
    def propagate(self, conv: MessagePassingLayer, h: torch.Tensor, layer: int, graph: LocalGraph,
                  dropout: Dropout, *extra: torch.Tensor) -> torch.Tensor:
        """Run the whole layer, scheduling its halo exchange against its compute as it sees fit
        (each output row the same function of the same inputs as :func:`propagate`'s)."""
        ...


def propagate(conv: MessagePassingLayer, h: torch.Tensor, layer: int, graph: LocalGraph, halo: HaloSource,
              dropout: Dropout, *extra: torch.Tensor) -> torch.Tensor:
    """Layer ``layer`` (``conv``) on ``graph``: its input's halo rows from ``halo``, ``dropout``
    applied to the inner rows and, on arrival, to the halo rows, then message, aggregate and
    update in the cheaper :func:`order`. A :class:`LayerwiseHaloSource` runs the layer itself;
    a :class:`LinearPart` input is the layer's own output less its bias, computed elsewhere."""
    if isinstance(h, LinearPart):
        return conv.update(h.rows + conv.output_bias)
    if isinstance(halo, LayerwiseHaloSource):
        return halo.propagate(conv, h, layer, graph, dropout, *extra)
    h_halo = halo(h, layer)
    ids, held = graph.global_ids, len(h)
    transform = order(conv, h, graph)
    h_inner = conv.read_inputs(dropout(h, ids[:held]), transform)
    z = source_rows(conv.message(h_inner, transform), conv.message(dropout(h_halo, ids[held:]), transform))
    return conv.update(conv.aggregate(z, h_inner, graph, transform, *extra))


@dataclass
class LinearPart:
    """The first layer's output rows less their bias (:meth:`LinearMessageLayer.linear_part`),
    assembled from partial sums where the input rows lie (P3's and Naive's partial
    aggregations): :meth:`MessagePassingModel.forward_blocks` takes it in place of the input."""

    rows: torch.Tensor


def no_halo(h: torch.Tensor, layer: int) -> torch.Tensor:
    """The halo source of a graph whose sources are all in the layer input (a sampled block)."""
    return h[:0]


Extra = dict[str, torch.Tensor]
BlockFn = Callable[[torch.Tensor, Extra, LocalGraph, HaloSource], tuple[torch.Tensor, Extra]]


class Block:
    """One step of a model: ``(h, extra, graph, halo) -> (h, extra)``.

    ``layer`` is the global index of the message-passing layer the block runs (its halo
    exchanges are keyed by it), None for a row-wise map; ``modules`` are the model's modules
    it uses (its parameters); ``carries`` names the ``extra`` entries it reads, which must
    travel with ``h`` to whoever runs it. Blocks hold no parameters of their own: the model's
    parameter names stay those of its modules."""

    def __init__(self, layer: int | None, modules: list[nn.Module], run: BlockFn,
                 carries: tuple[str, ...] = ()) -> None:
        self.layer, self.modules, self.run, self.carries = layer, modules, run, carries

    def __call__(self, h: torch.Tensor, extra: Extra, graph: LocalGraph,
                 halo: HaloSource) -> tuple[torch.Tensor, Extra]:
        """The block's step, its compute traced as ``forward layer <i>`` (``forward map``) and, where
        a traced rank names its spans, its backward as ``backward layer <i>`` from the moment
        autograd reaches the block's output."""
        what = "map" if self.layer is None else f"layer {self.layer}"
        with phase(f"forward {what}"):
            h, extra = self.run(h, extra, graph, halo)
        if h.requires_grad and naming():
            h.register_hook(lambda grad: relabel(f"backward {what}"))
        return h, extra

    def parameters(self) -> Iterator[nn.Parameter]:
        for module in self.modules:
            yield from module.parameters()


def row_block(modules: list[nn.Module], fn: Callable[[torch.Tensor, LocalGraph], torch.Tensor]) -> Block:
    """A block applying the row-wise map ``fn(h, graph)`` to ``h`` (input or output maps)."""
    return Block(None, modules, lambda h, extra, graph, halo: (fn(h, graph), extra))


LayerFactory = Callable[[int, int, bool], MessagePassingLayer]
"""``(in_dim, out_dim, is_last) -> layer``."""


DROPOUT_DOMAIN = 0x64726F70
"""Keeps dropout keys apart from the other keyed draws (neighbour sampling)."""

EDGE_SITES = 0x65646765
"""Keeps the per-edge dropout sites (one per message-passing layer) apart from the row sites."""


def step_key(seed: int, epoch: int, iteration: int = 0) -> int:
    """The dropout key of one training step: iteration ``iteration`` of epoch ``epoch`` of the
    run seeded ``seed`` (full-batch training has one iteration per epoch)."""
    return keyed.key(DROPOUT_DOMAIN, seed, epoch, iteration)


class MessagePassingModel(nn.Module):
    """What the models share: ``convs`` (message-passing layers with ``in_dim``), ``dropout``
    and :attr:`blocks`, the sequence that :meth:`forward` runs.

    Dropout sites: the input of message-passing layer ``i`` is site ``i``; a model's other
    sites (input and output maps) are numbered after its layers."""

    convs: nn.ModuleList
    dropout: float
    mask_key: int = 0
    """The current training step's dropout key (:meth:`begin_step`)."""

    def begin_step(self, key: int) -> None:
        """Draw the dropout masks of the training step ``key`` (:func:`step_key`) from now on:
        the rows' and, for layers that drop per edge, each layer's edges'."""
        self.mask_key = key
        for i, conv in enumerate(self.convs):
            conv.edge_key = keyed.key(key, EDGE_SITES, i)

    @property
    def blocks(self) -> list[Block]:
        """The model's steps in order, built afresh over its current modules (so a copy of the
        model runs its own)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, graph: LocalGraph, halo: HaloSource) -> torch.Tensor:
        """The output rows of ``graph``'s inner nodes."""
        h, extra = x, {}
        for block in self.blocks:
            h, extra = block(h, extra, graph, halo)
        return h

    def forward_blocks(self, x: torch.Tensor | Projected | LinearPart, blocks: list[LocalGraph]) -> torch.Tensor:
        """The output rows of the last block's targets, each message-passing layer on its own
        sampled block (:mod:`gnntrain.data.sampling`; ``x``: the rows of the first block's
        sources, their projections by :attr:`input_maps`, or the :attr:`summed_input_layer`'s
        :class:`LinearPart` on the first block's targets). A row-wise map runs on the block
        of the layer before it (the first block before any); no row comes from a halo
        exchange."""
        h, extra, graph = x, {}, blocks[0]
        for block in self.blocks:
            if block.layer is not None:
                graph = blocks[block.layer]
            h, extra = block(h, extra, graph, no_halo)
        return h

    @property
    def input_maps(self) -> list[nn.Linear]:
        """The linear maps that read the raw input features: all the model needs of them
        (:mod:`gnntrain.models.projection`)."""
        raise NotImplementedError

    @property
    def summed_input_layer(self) -> LinearMessageLayer | None:
        """The layer reading the raw input when its output is a bias plus one term per input row
        (:class:`LinearMessageLayer`: GCN, SAGE), so partial outputs computed where parts of the
        input lie add up to it; None where the input is read otherwise (attention, a row-wise
        input map)."""
        return None

    @property
    def input_dropout(self) -> float:
        """The dropout rate the model applies to its raw input rows before the input maps."""
        return self.dropout

    @property
    def input_site(self) -> int:
        """The dropout site of the raw input rows."""
        return 0

    @property
    def input_widths(self) -> list[int]:
        """Width of each layer's input: the width of the rows its halo exchange moves."""
        return [conv.in_dim for conv in self.convs]

    def drop_input(self, x: torch.Tensor, ids: torch.Tensor, first_column: int = 0) -> torch.Tensor:
        """What the model does to raw input rows ``x`` (node ids ``ids``; a column slice starting
        at ``first_column``) before its input maps: its input dropout."""
        return dropout(x, self.input_dropout, self.training, keyed.key(self.mask_key, self.input_site), ids, first_column)

    def dropout_at(self, site: int) -> Dropout:
        """Dropout site ``site``; projected input rows had theirs before they were projected."""
        site_key = keyed.key(self.mask_key, site)

        def drop(h: torch.Tensor | Projected, ids: torch.Tensor) -> torch.Tensor | Projected:
            return h if isinstance(h, Projected) else dropout(h, self.dropout, self.training, site_key, ids)

        return drop


class GNN(MessagePassingModel):
    def __init__(self, make_layer: LayerFactory, in_dim: int, hidden: int, out_dim: int, layers: int,
                 dropout: float, norm: str = "none", activation: Callable = F.relu,
                 all_sum: AllSum = local_sum) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.convs = nn.ModuleList(make_layer(a, b, i == layers - 1)
                                   for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])))
        self.norms = nn.ModuleList(make_norm(norm, hidden, all_sum) for _ in range(layers - 1))
        self.dropout = dropout
        self.activation = activation

    @property
    def input_maps(self) -> list[nn.Linear]:
        return self.convs[0].input_maps

    @property
    def summed_input_layer(self) -> LinearMessageLayer | None:
        return self.convs[0] if isinstance(self.convs[0], LinearMessageLayer) else None

    @property
    def blocks(self) -> list[Block]:
        return [self._layer_block(i) for i in range(len(self.convs))]

    def _layer_block(self, i: int) -> Block:
        """Layer ``i``, then (hidden layers) its norm and the activation."""
        conv, norm = self.convs[i], self.norms[i] if i < len(self.norms) else None

        def run(h: torch.Tensor, extra: Extra, graph: LocalGraph, halo: HaloSource) -> tuple[torch.Tensor, Extra]:
            h = propagate(conv, h, i, graph, halo, self.dropout_at(i))
            return (h if norm is None else self.activation(norm(h))), extra

        return Block(i, [conv] if norm is None else [conv, norm], run)


def stack(config: ModelConfig, in_dim: int, out_dim: int, all_sum: AllSum, make_layer: LayerFactory,
          activation: Callable = F.relu) -> GNN:
    """A :class:`GNN` of the model config's layers, hidden width, dropout and norm."""
    return GNN(make_layer, in_dim, config.hidden, out_dim, config.layers, config.dropout, config.norm, activation,
               all_sum)

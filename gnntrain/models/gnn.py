"""A stack of message-passing layers that runs on one rank's local graph.

``layers`` counts message-passing layers from input to output, as the papers count them: a
2-layer GCN is ``in -> hidden -> classes``. Each layer obtains the halo rows of its input from
``halo`` (whatever the strategy supplies: fresh, stale, sampled or quantized rows), applies
dropout (:func:`gnntrain.random16.dropout`) to its inner rows and to the received halo rows separately (the receiver draws the
halo rows' masks, so a stale halo never carries an old mask and forward and backward masks
agree; PipeGCN, Appendix F), then aggregates; every layer but the last is followed by the
optional normalisation (``model.norm``, see :mod:`gnntrain.models.norm`) and the activation.
The model never sees global node ids or how the halo rows were obtained.

Every model is a sequence of :class:`Block` s, ``(h, extra) -> (h, extra)``, run in order by
:meth:`MessagePassingModel.forward`: a block runs one message-passing layer (and what follows
it up to the next layer's input) or a row-wise map (input and output linear maps); ``extra``
holds per-node state that later blocks read besides ``h`` (GCNII's initial residual ``h0``).
A pipeline stage is a slice of the blocks; a mini-batch step runs the same blocks on a
sampled graph.
"""

from __future__ import annotations

from typing import Callable, Iterator, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

from gnntrain.graph import LocalGraph
from gnntrain.models.norm import AllSum, local_sum, make_norm
from gnntrain.models.projection import Projected
from gnntrain.random16 import dropout


class HaloSource(Protocol):
    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """The halo rows of ``h`` (the inner rows of layer ``layer``'s input)."""
        ...


class MessagePassingLayer(nn.Module):
    """A layer in three steps, so that its output rows can be computed in pieces:

    * ``message(h)``: a row-wise map of source rows (applied to inner and halo rows apart);
    * ``aggregate(z, h_inner, graph, *extra)``: the rows of ``graph``'s targets, from the
      messages ``z`` of all its sources (inner then halo) and the layer input's inner rows
      (root terms take ``graph.target_rows`` of them, and of any ``extra`` per-node input);
    * ``update(a)``: a map of the assembled rows of all inner nodes (it may mix rows, as batch
      norm does).
    """

    in_dim: int

    @property
    def input_maps(self) -> list[nn.Linear]:
        """The linear maps that read this layer's input (see :mod:`gnntrain.models.projection`)."""
        raise NotImplementedError

    def message(self, h: torch.Tensor) -> torch.Tensor:
        return h

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor, graph: LocalGraph, *extra: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def update(self, a: torch.Tensor) -> torch.Tensor:
        return a

    def forward(self, h_inner: torch.Tensor, h_halo: torch.Tensor, graph: LocalGraph, *extra: torch.Tensor) -> torch.Tensor:
        z = torch.cat([self.message(h_inner), self.message(h_halo)])
        return self.update(self.aggregate(z, h_inner, graph, *extra))


@runtime_checkable
class LayerwiseHaloSource(HaloSource, Protocol):
    def propagate(self, conv: MessagePassingLayer, h: torch.Tensor, layer: int, graph: LocalGraph,
                  dropout: Callable[[torch.Tensor], torch.Tensor], *extra: torch.Tensor) -> torch.Tensor:
        """Run the whole layer, scheduling its halo exchange against its compute as it sees fit
        (each output row the same function of the same inputs as :func:`propagate`'s)."""
        ...


def propagate(conv: MessagePassingLayer, h: torch.Tensor, layer: int, graph: LocalGraph, halo: HaloSource,
              dropout: Callable[[torch.Tensor], torch.Tensor], *extra: torch.Tensor) -> torch.Tensor:
    """Layer ``layer`` (``conv``) on ``graph``: its input's halo rows from ``halo``, ``dropout``
    applied to the inner rows and, on arrival, to the halo rows, then message, aggregate and
    update. A :class:`LayerwiseHaloSource` runs the layer itself."""
    if isinstance(halo, LayerwiseHaloSource):
        return halo.propagate(conv, h, layer, graph, dropout, *extra)
    h_halo = halo(h, layer)
    h_inner = dropout(h)
    z = torch.cat([conv.message(h_inner), conv.message(dropout(h_halo))])
    return conv.update(conv.aggregate(z, h_inner, graph, *extra))


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
        return self.run(h, extra, graph, halo)

    def parameters(self) -> Iterator[nn.Parameter]:
        for module in self.modules:
            yield from module.parameters()


def row_block(modules: list[nn.Module], fn: Callable[[torch.Tensor], torch.Tensor]) -> Block:
    """A block applying the row-wise map ``fn`` to ``h`` (input or output maps)."""
    return Block(None, modules, lambda h, extra, graph, halo: (fn(h), extra))


LayerFactory = Callable[[int, int, bool], MessagePassingLayer]
"""``(in_dim, out_dim, is_last) -> layer``."""


class MessagePassingModel(nn.Module):
    """What the models share: ``convs`` (message-passing layers with ``in_dim``), ``dropout``
    and :attr:`blocks`, the sequence that :meth:`forward` runs."""

    convs: nn.ModuleList
    dropout: float

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

    def forward_blocks(self, x: torch.Tensor | Projected, blocks: list[LocalGraph]) -> torch.Tensor:
        """The output rows of the last block's targets, each message-passing layer on its own
        sampled block (:mod:`gnntrain.data.sampling`; ``x``: the rows of the first block's
        sources, or their projections by :attr:`input_maps`). A row-wise map runs on the block
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
    def input_dropout(self) -> float:
        """The dropout rate the model applies to its raw input rows before the input maps."""
        return self.dropout

    @property
    def input_widths(self) -> list[int]:
        """Width of each layer's input: the width of the rows its halo exchange moves."""
        return [conv.in_dim for conv in self.convs]

    def _dropout(self, h: torch.Tensor | Projected) -> torch.Tensor | Projected:
        """Dropout; projected input rows had theirs before they were projected."""
        return h if isinstance(h, Projected) else dropout(h, self.dropout, self.training)


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
    def blocks(self) -> list[Block]:
        return [self._layer_block(i) for i in range(len(self.convs))]

    def _layer_block(self, i: int) -> Block:
        """Layer ``i``, then (hidden layers) its norm and the activation."""
        conv, norm = self.convs[i], self.norms[i] if i < len(self.norms) else None

        def run(h: torch.Tensor, extra: Extra, graph: LocalGraph, halo: HaloSource) -> tuple[torch.Tensor, Extra]:
            h = propagate(conv, h, i, graph, halo, self._dropout)
            return (h if norm is None else self.activation(norm(h))), extra

        return Block(i, [conv] if norm is None else [conv, norm], run)

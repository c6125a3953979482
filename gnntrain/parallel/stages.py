"""Pipeline stages: a model's blocks cut into consecutive slices, and what crosses a cut.

Stage ``s`` of ``S`` owns the message-passing layers ``[s L / S, (s+1) L / S)`` (32 layers on
8 stages: 4 each). A row-wise block (input or output linear map of GCNII, DeepGCN) joins the
stage of the layer before it, or stage 0 if no layer precedes it: the input map lives on the
first stage, the output map on the last (a choice; GNNPipe does not place them).

Between stage ``s`` and ``s + 1`` travel the block output ``h`` and the ``extra`` entries that a
block of a later stage reads (GCNII's initial residual ``h0``): :class:`Boundary` names them
and their widths, found once by running the model on a one-node graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnntrain.comm.communicator import Communicator, InFlight
from gnntrain.data.graph_data import GraphData
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models.gnn import Block, MessagePassingModel


PIPE_KINDS = ("pipe_fwd", "pipe_bwd")
"""The kinds of the transfers between stages (with any prefix, e.g. ``history_``)."""


def stage_of_blocks(blocks: list[Block], num_layers: int, stages: int) -> list[int]:
    """The stage of each block (module docstring)."""
    owner, stage = [], 0
    for block in blocks:
        if block.layer is not None:
            stage = max(s for s in range(stages) if s * num_layers // stages <= block.layer)
        owner.append(stage)
    return owner


@dataclass(frozen=True)
class Boundary:
    """What crosses one stage cut, per node: ``h`` of width ``width`` and the ``extras`` (name ->
    width) a later stage reads, in the order they travel."""

    width: int
    extras: tuple[tuple[str, int], ...]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.extras]

    def pack(self, h: torch.Tensor, extra: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        return [h, *(extra[name] for name in self.names)]

    def buffers(self, rows: int, like: torch.Tensor) -> list[torch.Tensor]:
        """Empty receive buffers for ``rows`` nodes (dtype and device of ``like``)."""
        return [like.new_empty(rows, self.width), *(like.new_empty(rows, w) for _, w in self.extras)]

    def unpack(self, tensors: list[torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return tensors[0], dict(zip(self.names, tensors[1:]))


@torch.no_grad()
def stage_boundaries(model: MessagePassingModel, owner: list[int], num_features: int,
                     dtype: torch.dtype, device: torch.device) -> list[Boundary]:
    """The :class:`Boundary` after each stage but the last, from a forward pass of the model (in
    evaluation mode, restored after) over a one-node graph."""
    single = GraphData("probe", torch.zeros(1, num_features), torch.zeros(1, dtype=torch.long),
                       torch.zeros(2, 0, dtype=torch.long), *(torch.zeros(1, dtype=torch.bool) for _ in range(3)), 1)
    graph = build_local_graph(single, torch.zeros(1, dtype=torch.long), 0, 1, dtype).to(device)
    training = model.training
    model.eval()
    blocks = model.blocks
    h, extra = graph.x, {}
    boundaries = []
    for i, block in enumerate(blocks):
        h, extra = block(h, extra, graph, lambda rows, layer: rows[:0])
        if i + 1 < len(blocks) and owner[i + 1] != owner[i]:
            later = {name for b, s in zip(blocks, owner) if s > owner[i] for name in b.carries}
            boundaries.append(Boundary(h.shape[1], tuple((n, extra[n].shape[1]) for n in sorted(later))))
    model.train(training)
    return boundaries


class StageLink:
    """A rank's point-to-point traffic with the same member of the neighbouring stages, over
    the ``pp`` communicator: activations forward (``pipe_fwd``), their gradients backward
    (``pipe_bwd``). Sends are asynchronous and completed by :meth:`flush`; receives block. The
    meter records the seconds a rank is blocked on either (:data:`PIPE_KINDS`): the stage
    waiting for its neighbour, the pipeline bubble, including any transfer still under way."""

    def __init__(self, comm: Communicator, stage: int, boundaries: list[Boundary]) -> None:
        self.comm, self.stage = comm, stage
        self.incoming = boundaries[stage - 1] if stage > 0 else None
        self.outgoing = boundaries[stage] if stage < len(boundaries) else None
        self.pending: list[InFlight] = []

    def send(self, forward: bool, tensors: list[torch.Tensor]) -> None:
        """Send ``tensors`` to the next stage (``forward``) or their gradients to the previous."""
        peer, kind = (self.stage + 1, "pipe_fwd") if forward else (self.stage - 1, "pipe_bwd")
        self.pending.append(self.comm.send_start(peer, [t.detach() for t in tensors], kind))

    def receive(self, forward: bool, buffers: list[torch.Tensor]) -> list[torch.Tensor]:
        """Receive into ``buffers`` from the previous stage (``forward``) or the next one."""
        peer, kind = (self.stage - 1, "pipe_fwd") if forward else (self.stage + 1, "pipe_bwd")
        return self.comm.recv_start(peer, buffers, kind).wait()

    def flush(self) -> None:
        """Complete every send still in flight."""
        for transfer in self.pending:
            transfer.wait()
        self.pending.clear()

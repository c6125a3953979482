"""GNNPipe (Chen et al., 2023): layer-level pipeline parallelism over graph chunks, with
historical embeddings, and its hybrid with graph parallelism (``strategy=gnnpipe``).

Process layout: a ``pp x gp`` mesh, ``strategy.stages`` S pipeline stages of
``strategy.graph_parallel`` G ranks (``gp`` innermost, so a stage's group is on one node where
workers fill nodes in rank order, as Sec. 3.2.3 advises). Stage ``s`` owns a consecutive slice
of the model's blocks (:mod:`gnntrain.parallel.stages`) and, per owned layer, the input rows of
every node of its member graph, current and historical (:mod:`gnntrain.parallel.history`).

Data layout: K = ``strategy.chunks`` chunks (default 4 x workers, the paper's K = 4M for M
GPUs, Sec. 3.2.2) by the job's METIS partition; each chunk cut G ways within a stage's group
(:mod:`gnntrain.data.chunks`).

One epoch (Algorithm 1, GPipe-like; one rank's view):

1. chunk order: a seeded shuffle per epoch (trick 1, ``shuffle``) or ``0..K-1``;
2. forward, chunk by chunk: receive the chunk's activations (and the ``extra`` entries later
   blocks read, e.g. GCNII's ``h0``) from the previous stage, run the stage's blocks on the
   chunk, where each layer reads current rows of chunks already processed this epoch and
   historical rows of the rest, each row's message computed once per epoch
   (:mod:`gnntrain.parallel.history`), send the result to the next stage; the last stage adds
   the chunk's loss share;
3. backward, chunks in reverse order: receive the output gradient from the next stage, one
   ``autograd.backward`` for the chunk (with what later chunks sent its rows), send the input
   gradient to the previous stage;
4. gradient all-reduce within the stage's group (hybrid only; a pure pipeline's stages share no
   parameter), one optimizer step: full-batch semantics.

History: before epoch 1 a fresh forward pass with the initial weights (evaluation mode: no
dropout) fills it (our choice; the paper does not say; its traffic is recorded as
``history_*`` in epoch 1). With ``fixed_history`` (trick 3) epoch ``t`` reads the values of
epoch ``alpha floor((t-1)/alpha)``: the history is refreshed at the end of every epoch that is
a multiple of ``alpha``; without it, at the end of every epoch. ``detach_history`` is trick 2.
With K = 1 nothing is historical and an epoch equals single-process full-graph training, with
dropout too: masks are keyed by the node (:mod:`gnntrain.models.gnn`), so a row has one mask
per layer and epoch whichever chunks read it, and with K > 1 the result depends only on the
chunks and their order, not on how the layers are staged or a stage is split.

Checkpoints (``train.checkpoint_every``): a rank saves the model, its stage's optimizer state
and its layers' historical rows (and, without trick 2, the historical gradients to hand on);
the chunk order is a function of the seed and the epoch, and the messages are rebuilt each
epoch, so a resumed run equals the uninterrupted one.

Evaluation is a fresh full-graph forward through the stages (no stale row). Bytes: ``pipe_fwd``
and ``pipe_bwd`` between stages; ``halo_fwd``/``halo_bwd`` and ``allreduce`` within groups.
Strategy metrics (Fig. 8's breakdown): ``bubble_share``, the mean over ranks of the epoch's
share spent blocked on a neighbouring stage (with any transfer still under way); and per stage
``s`` (the mean over its group), ``stage<s>/compute``, ``stage<s>/communication`` (exposed
waits on the group's halo exchanges and all-reduce) and ``stage<s>/bubble``, in seconds.

The schedule is written over the communicator's point-to-point transfers rather than
``torch.distributed.pipelining``: its micro-batches are independent (a micro-batch's backward
starts from its own output gradient alone), while a chunk here reads the current rows of
earlier chunks on the same stage, so chunk ``j``'s backward needs the gradients that every
later chunk's backward sent it, and a stage of a hybrid runs collectives (halo exchanges)
within its group in the middle of a micro-batch.
"""

from __future__ import annotations

import torch

from gnntrain.timing.clock import Stopwatch
from gnntrain.comm.communicator import Communicator
from gnntrain.comm.meter import CommMeter
from gnntrain.timing.kinds import TRAINING_CATEGORIES, category
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.data.chunks import split_chunks
from gnntrain.errors import ConfigError
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models import build_model
from gnntrain.parallel.full_batch import (
    EVAL_COUNTS, SPLITS, all_reduce_gradients, build_optimizer, loss_share, rows_of, score_counts,
)
from gnntrain.parallel.halo import HaloExchange
from gnntrain.models.gnn import step_key
from gnntrain.parallel.history import ChunkHalo, Chunks, FreshHalo, LayerTable
from gnntrain.parallel.mesh import Layout, WorkerContext
from gnntrain.parallel.stages import PIPE_KINDS, StageLink, stage_boundaries, stage_of_blocks
from gnntrain.strategies.base import Strategy, Tallies
from gnntrain.strategies.gnnpipe.config import GNNPipeConfig
from gnntrain.timing.clock import phase


def pipeline_shape(run: RootConfig, world_size: int) -> tuple[int, int, int]:
    """(stages, graph_parallel, chunks) of the run on ``world_size`` workers; ConfigError where
    they do not fit the workers or the model."""
    config, layers = run.strategy, run.model.layers
    group = config.graph_parallel
    stages = config.stages or max(world_size // group, 1)
    if stages * group != world_size:
        fits = [f"{s}x{world_size // s}" for s in range(1, world_size + 1) if world_size % s == 0]
        raise ConfigError(f"strategy.stages={stages} x strategy.graph_parallel={group} = {stages * group} ranks, but "
                          f"the job has {world_size} workers; valid: stages x graph_parallel = {world_size} "
                          f"({', '.join(fits)})")
    if stages > layers:
        raise ConfigError(f"strategy.stages={stages} exceeds model.layers={layers}: every stage owns at least one "
                          f"message-passing layer; valid: 1..{layers}")
    chunks = config.chunks or 4 * world_size
    if run.model.norm == "batch" and chunks > 1:
        raise ConfigError(f"model.norm=batch with strategy.chunks={chunks} would normalise each chunk by its own "
                          "statistics; valid: model.norm=none or layer (or strategy.chunks=1)")
    return stages, group, chunks


class GNNPipe(Strategy):
    @staticmethod
    def layout(run: RootConfig, world_size: int) -> Layout:
        stages, group, chunks = pipeline_shape(run, world_size)
        return Layout({"pp": stages, "gp": group}, parts=chunks, parts_key="strategy.chunks")

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        config: GNNPipeConfig = run.strategy
        self.meter = CommMeter()
        self.gp = Communicator.of_mesh_axis(ctx, "gp", self.meter)
        pp = Communicator.of_mesh_axis(ctx, "pp", self.meter)
        self.world = Communicator.of_world(ctx, self.meter)
        self.stages, group, self.num_chunks = pipeline_shape(run, ctx.world_size)
        self.stage = pp.rank
        self.first, self.last = self.stage == 0, self.stage == self.stages - 1
        dtype = getattr(torch, run.train.dtype)
        data = job.data
        self.multilabel, self.num_train = data.multilabel, int(data.train_mask.sum())

        member = split_chunks(data, job.part, self.num_chunks, group, config.seed)
        self.graph = build_local_graph(data, member, self.gp.rank, group, dtype).to(ctx.device)
        self.y = self.graph.y.to(dtype) if self.multilabel else self.graph.y
        chunk_of_local = job.part.to(ctx.device)[self.graph.global_ids]
        self.chunks = Chunks(self.graph, chunk_of_local, self.num_chunks)
        self.exchanges = [HaloExchange(v.graph, self.gp) if group > 1 else None for v in self.chunks.views]
        self.train_rows = [rows_of(v.graph.train_mask) for v in self.chunks.views]
        """Per chunk, its rows that are training nodes."""
        self.member_exchange = HaloExchange(self.graph, self.gp) if group > 1 else None

        torch.manual_seed(run.seed)
        self.model = build_model(run.model, data.num_features, data.num_classes,
                                 lambda t: self.gp.all_sum(t, "bn_stats")).to(ctx.device, dtype)
        blocks = self.model.blocks
        owner = stage_of_blocks(blocks, run.model.layers, self.stages)
        self.stage_blocks = [block for block, s in zip(blocks, owner) if s == self.stage]
        self.link = StageLink(pp, self.stage, stage_boundaries(self.model, owner, data.num_features, dtype,
                                                               ctx.device))
        self.params = list({id(p): p for block in self.stage_blocks for p in block.parameters()}.values())
        self.optimizer = build_optimizer(self.model, run, self.params)

        widths, reads_input = self.model.input_widths, blocks[0]
        self.tables = {block.layer: LayerTable(self.graph, widths[block.layer], block is reads_input,
                                               not config.detach_history)
                       for block in self.stage_blocks if block.layer is not None}
        self.shuffle, self.seed, self.model_seed = config.shuffle, config.seed, run.seed
        self.refresh_every = config.alpha if config.fixed_history else 1
        self.epoch_timed = Stopwatch(ctx.device)
        """Times the epoch just trained, for the bubble's share of it."""

    # -- one stage's share of a pass ------------------------------------------------------

    def _stage_forward(self, h: torch.Tensor, extra: dict, graph, halo) -> tuple[torch.Tensor, dict]:
        for block in self.stage_blocks:
            h, extra = block(h, extra, graph, halo)
        return h, extra

    def _receive_input(self, rows: torch.Tensor, requires_grad: bool) -> tuple[torch.Tensor, dict]:
        """The stage input of ``rows`` (member-graph inner rows): features on the first stage,
        the previous stage's activations elsewhere."""
        if self.first:
            return self.graph.x[rows], {}
        boundary = self.link.incoming
        tensors = self.link.receive(True, boundary.buffers(rows.numel(), self.graph.x))
        return boundary.unpack([t.requires_grad_(requires_grad) for t in tensors])

    @torch.no_grad()
    def _fresh_pass(self, record: bool) -> torch.Tensor | None:
        """A full forward over the member graph with no stale row, through every stage (every
        rank calls it); the last stage's outputs. ``record``: fill the history."""
        rows = torch.arange(self.graph.num_inner, device=self.graph.device)
        h, extra = self._receive_input(rows, False)
        h, extra = self._stage_forward(h, extra, self.graph,
                                       FreshHalo(self.member_exchange, self.tables if record else None))
        if self.last:
            return h
        self.link.send(True, self.link.outgoing.pack(h, extra))
        self.link.flush()
        return None

    # -- strategy interface --------------------------------------------------------------

    def train_epoch(self, epoch: int) -> torch.Tensor:
        self.epoch_timed.reset()
        with self.epoch_timed:
            return self._train_epoch(epoch)

    def _train_epoch(self, epoch: int) -> torch.Tensor:
        if epoch == 1:
            self.model.eval()
            with self.meter.tagged("history_"):
                self._fresh_pass(record=True)
        self.model.train()
        self.model.begin_step(step_key(self.model_seed, epoch))
        self.optimizer.zero_grad(set_to_none=False)
        for table in self.tables.values():
            table.begin_epoch()
        order = list(range(self.num_chunks))
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            order = torch.randperm(self.num_chunks, generator=generator).tolist()

        loss = self.graph.x.new_zeros(())
        passes = []
        for k in order:
            view = self.chunks.views[k]
            inputs = self._receive_input(view.rows, True)
            halo = ChunkHalo(self.chunks, k, self.tables, self.exchanges[k])
            with phase(f"chunk {k}"):
                h, extra = self._stage_forward(*inputs, view.graph, halo)
            if self.last:
                rows = view.rows
                outputs = [loss_share(h, self.y[rows], self.train_rows[k], self.num_train, self.multilabel)]
                loss += outputs[0].detach()
            else:
                outputs = self.link.outgoing.pack(h, extra)
                self.link.send(True, outputs)
            passes.append((k, view, inputs, outputs, halo))

        for k, view, inputs, outputs, halo in reversed(passes):
            if self.last:
                grads = [torch.ones_like(outputs[0])]
            else:
                grads = self.link.receive(False, self.link.outgoing.buffers(view.rows.numel(), self.graph.x))
            roots, root_grads = halo.backward_roots()
            tensors = [(t, g) for t, g in zip(outputs + roots, grads + root_grads) if t.requires_grad]
            with phase(f"chunk {k}"), phase("backward"):
                torch.autograd.backward([t for t, _ in tensors], [g for _, g in tensors])
            if not self.first:
                h_in, extra_in = inputs
                leaves = self.link.incoming.pack(h_in, extra_in)
                self.link.send(False, [t.grad if t.grad is not None else torch.zeros_like(t) for t in leaves])
        self.link.flush()
        if self.gp.world_size > 1:
            all_reduce_gradients(self.params, self.gp)
        with phase("optimizer step"):
            self.optimizer.step()
        for table in self.tables.values():
            table.end_epoch(epoch % self.refresh_every == 0)
        return loss

    def evaluate(self) -> torch.Tensor:
        self.model.eval()
        with self.meter.tagged("eval_"):
            out = self._fresh_pass(record=False)
        if not self.last:
            return torch.zeros(len(SPLITS) * EVAL_COUNTS, dtype=torch.float64, device=self.graph.device)
        g = self.graph
        return score_counts(out, self.y, [g.train_mask, g.val_mask, g.test_mask], self.multilabel)

    def epoch_tallies(self) -> Tallies:
        """This rank's compute, communication and bubble seconds under its stage, and its bubble share."""
        waits = {k: t for k, t in self.meter.wait_s.items() if category(k) in TRAINING_CATEGORIES}
        bubble = sum(t for k, t in waits.items() if k.endswith(PIPE_KINDS))
        communication = sum(waits.values()) - bubble
        epoch_time = self.epoch_timed.seconds
        stage = f"stage{self.stage}"
        return Tallies(summed={f"{stage}/ranks": 1.0, f"{stage}/compute": epoch_time - bubble - communication,
                               f"{stage}/communication": communication, f"{stage}/bubble": bubble,
                               "bubble_share": bubble / epoch_time})

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """``bubble_share`` (mean over ranks) and per stage the mean over its ranks of compute,
        communication and bubble (module docstring)."""
        metrics = {"bubble_share": totals["bubble_share"] / self.world.world_size}
        for stage in range(self.stages):
            ranks = totals[f"stage{stage}/ranks"]
            metrics.update({f"stage{stage}/{part}": totals[f"stage{stage}/{part}"] / ranks
                            for part in ("compute", "communication", "bubble")})
        return metrics

    def finish(self) -> None:
        self.link.flush()

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "tables": {layer: table.state_dict() for layer, table in self.tables.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        for layer, table in self.tables.items():
            table.load_state_dict(state["tables"][layer])

"""What the mini-batch strategies share: the data layout, the mini-batches, one step's
arithmetic and evaluation (HopGNN Sec. 2, "Distributed GNN training").

Data layout. Node features and labels are partitioned over the W ranks by the job's partition
(``partition.method``: metis, or random as P3's hash partitioning); each rank stores its own
nodes' rows (:class:`~gnntrain.parallel.feature_fetch.FeatureStore`). The topology (CSR of
the whole graph) is on every rank, so sampling never communicates. Our choice, as DistDGL's
and the paper's: topology is small next to features (GAT on Products moves 35 GB of features
but 0.4 GB of topology per epoch, Sec. 3.1).

Where tensors live. The topology (CSR and global in-degrees), the rank's own feature and label
rows and the rows it stages from peers are on ``ctx.device``, and the sampler runs there, in
torch operations (as DGL's and PyG's GPU samplers do): on a GPU an iteration's only host-to-device
copy is its roots, a few kilobytes in one asynchronous copy through a pinned buffer
(:mod:`gnntrain.parallel.pinned`). The mini-batches are dealt on the host from the seeded permutation,
so host-side reasoning about roots (HopGNN's time steps) reads the host's copy of the
partition; from the roots on, every id (the roots are the first of the sample's nodes), mask
and row a step touches is on the device, and so are samples that arrive from peers
(:meth:`MiniBatchTraining.blocks_from` rebuilds them there). Samples are keyed
(:mod:`gnntrain.data.sampling`), so a GPU run samples what the same run on a CPU samples.

Mini-batches. Each epoch a permutation of the training nodes (seeded by ``strategy.seed`` and
the epoch, the same on every rank) is cut into iterations of ``strategy.batch_size`` roots
(the last may be smaller); iteration ``i``'s roots are dealt into W mini-batches (mini-batch
``d``: the ``d``-th of W near-equal consecutive slices). Every rank derives every mini-batch
from the seed: redistributing roots moves no bytes.

One iteration. Blocks are sampled per layer with fan-out ``strategy.fanout`` (an int for every
layer, or one per layer, input to output) by the keyed sampler of :mod:`gnntrain.data.sampling`
(key: seed, epoch, iteration, layer). The loss is the cross-entropy summed over the
iteration's roots divided by its global batch size; the gradients of all ranks are summed in
one all-reduce and every rank takes one optimizer step: the step of one process training on
the global mini-batch, however the roots were spread over ranks and time steps. Dropout masks
are keyed by the run's seed, the epoch and the iteration (:mod:`gnntrain.models.gnn`): a node
read by several mini-batches or micrographs of one iteration gets one mask, as it would in
that process.

Reported per epoch: the loss (mean over iterations), ``miss_rate`` (remote rows fetched per
input row the model read: a row pre-gathered once and read twice is one miss in two reads)
and each strategy's own figures; evaluation is full-neighbour
layer-wise inference over the whole graph: the rank's partition as a local graph with
synchronous halo exchange (``eval_halo_fwd``), exactly the full-graph model.
"""

from __future__ import annotations

import math

import torch

from gnntrain.timing.clock import Stopwatch
from gnntrain.comm.communicator import Communicator
from gnntrain.comm.meter import CommMeter
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.data.sampling import SampledBlocks, Topology, sample_groups, sampling_key, unpack
from gnntrain.errors import ConfigError
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models import build_model
from gnntrain.models.gnn import LinearPart, step_key
from gnntrain.models.projection import Projected, split
from gnntrain.parallel.feature_fetch import FeatureStore
from gnntrain.parallel.full_batch import all_reduce_gradients, build_optimizer, loss_share, score_counts
from gnntrain.parallel.halo import HaloExchange
from gnntrain.parallel.mesh import Layout, WorkerContext
from gnntrain.parallel.pinned import PinnedStaging
from gnntrain.strategies.base import Strategy, Tallies
from gnntrain.strategies.minibatch.config import MiniBatchConfig
from gnntrain.timing.clock import phase


def fanouts(run: RootConfig) -> list[int]:
    """The run's per-layer fan-outs; ConfigError where they do not fit the model."""
    fanout, layers = run.strategy.fanout, run.model.layers
    values = [fanout] * layers if isinstance(fanout, int) else list(fanout)
    if len(values) != layers:
        raise ConfigError(f"strategy.fanout={fanout} has {len(values)} entries for model.layers={layers}; valid: one "
                          f"int, or a list of {layers} ints (input layer first)")
    if not all(isinstance(v, int) and v >= 1 for v in values):
        raise ConfigError(f"strategy.fanout={fanout} is invalid; it must be an int >= 1 or a list of them")
    return values


def minibatch_layout(run: RootConfig, world_size: int) -> Layout:
    """One rank per feature partition; the fan-outs checked against the model."""
    fanouts(run)
    if run.model.norm == "batch":
        raise ConfigError(f"model.norm=batch with strategy={run.strategy.name} would normalise each sampled "
                          "block by its own rows; valid: model.norm=none or layer")
    return Layout({"dp": world_size}, parts=world_size)


class MiniBatchTraining(Strategy):
    """Model, optimizer, feature store and mini-batches of one rank; a strategy supplies
    :meth:`accumulate` (one iteration's forward and backward, gradients left in ``.grad``) and
    may deal the roots otherwise (:meth:`iterations`)."""

    layout = staticmethod(minibatch_layout)

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        config: MiniBatchConfig = run.strategy
        self.meter = CommMeter()
        self.comm = Communicator.of_world(ctx, self.meter)
        self.rank, self.world = self.comm.rank, self.comm.world_size
        self.dtype = getattr(torch, run.train.dtype)
        self.fanouts, self.batch_size, self.seed = fanouts(run), config.batch_size, config.seed
        data = job.data
        self.multilabel = data.multilabel
        self.topology = Topology.of(data).to(ctx.device)
        self.staging = PinnedStaging(ctx.device)
        """Carries each iteration's roots to the device."""
        self.owner = job.part
        """The partition on the host, for reasoning about host-side roots."""
        self.train_ids = data.train_mask.nonzero().view(-1)
        self.graph = build_local_graph(data, job.part, self.rank, self.world, self.dtype).to(ctx.device)
        self.exchange = HaloExchange(self.graph, self.comm)
        self.y = self.graph.y.to(self.dtype) if self.multilabel else self.graph.y
        self.store = FeatureStore(job.part, {"x": self.graph.x, "y": self.y}, self.comm)
        self.model_seed = run.seed
        torch.manual_seed(run.seed)
        self.model = build_model(run.model, data.num_features, data.num_classes).to(ctx.device, self.dtype)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        for p in self.params:
            p.grad = torch.zeros_like(p)
        self.optimizer = build_optimizer(self.model, run, self.params)
        self.synced = self.params
        """The parameters whose gradients are all-reduced (all but those split over ranks)."""
        self.looked_up, self.missed = 0, torch.zeros((), dtype=torch.float64, device=ctx.device)
        self.iterations_timed = Stopwatch(ctx.device)
        """This rank's time of each iteration of the last epoch (its laps)."""

    # -- mini-batches and one step's pieces ----------------------------------------------

    def iterations(self, epoch: int) -> list[list[torch.Tensor]]:
        """Per iteration, the W mini-batches of roots (global ids)."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        order = self.train_ids[torch.randperm(self.train_ids.numel(), generator=generator)]
        return [list(torch.tensor_split(order[start: start + self.batch_size], self.world))
                for start in range(0, order.numel(), self.batch_size)]

    def num_iterations(self) -> int:
        return math.ceil(self.train_ids.numel() / self.batch_size)

    def sample(self, roots: torch.Tensor, epoch: int, iteration: int) -> SampledBlocks:
        return self.sample_groups([roots], epoch, iteration)[0]

    def sample_groups(self, groups: list[torch.Tensor], epoch: int, iteration: int) -> list[SampledBlocks]:
        """The blocks of each group of roots (on the host), drawn on the device in one sampler
        pass per layer (:func:`~gnntrain.data.sampling.sample_groups`)."""
        keys = [sampling_key(self.seed, epoch, iteration, layer) for layer in range(len(self.fanouts))]
        with phase("sample"):
            return sample_groups(self.topology, self.staging.to_device(groups), self.fanouts, keys, self.dtype)

    def stage_features(self, ids: torch.Tensor) -> None:
        """Fetch the feature rows of the remote ones of ``ids`` into the store (collective); they count as misses."""
        self.missed += self.store.is_remote(ids).sum()
        self.store.stage(ids, "x", "feat_fetch")

    def fetch_features(self, ids: torch.Tensor) -> torch.Tensor:
        """The feature rows of ``ids`` (collective)."""
        self.stage_features(ids)
        return self.store.read(ids, "x")

    def fetch_labels(self, roots: torch.Tensor) -> torch.Tensor:
        return self.store.fetch(roots, "y", "label_fetch")

    def train_on(self, blocks: SampledBlocks, x: torch.Tensor | Projected, y: torch.Tensor,
                 batch_size: int) -> torch.Tensor:
        """Forward and backward of the roots of ``blocks`` (``x``: their input rows or the rows'
        projections, ``y``: their labels), loss over the global batch size; gradients added to
        ``.grad``."""
        self.looked_up += blocks.input_nodes.numel()
        if blocks.num_roots == 0:
            return self.graph.x.new_zeros(())
        out = self.model.forward_blocks(x, blocks.blocks)
        loss = loss_share(out, y, None, batch_size, self.multilabel)
        with phase("backward"):
            loss.backward()
        return loss.detach()

    def dropped_input(self, rows: torch.Tensor, ids: torch.Tensor, first_column: int = 0) -> torch.Tensor:
        """Raw input rows (of nodes ``ids``; a column slice from ``first_column``) with the
        model's input dropout, before they are projected."""
        return self.model.drop_input(rows, ids, first_column)

    def train_on_partials(self, blocks: SampledBlocks, assembled: torch.Tensor, y: torch.Tensor,
                          batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`train_on` from what partial computations where the input lies add up to: the
        :attr:`~gnntrain.models.gnn.MessagePassingModel.summed_input_layer`'s linear part on the
        first block's targets where the model has one, the stacked projections of the input rows
        by its input maps otherwise (:mod:`gnntrain.models.projection`); the loss and the
        gradient of ``assembled``."""
        assembled.requires_grad_()
        x = (LinearPart(assembled) if self.model.summed_input_layer is not None
             else split(self.model.input_maps, assembled))
        loss = self.train_on(blocks, x, y, batch_size)
        grad = assembled.grad if assembled.grad is not None else torch.zeros_like(assembled)
        return loss, grad

    def pass_on(self, payload: torch.Tensor, shift: int, kind: str) -> torch.Tensor:
        """Send ``payload`` ``shift`` ranks on and receive what comes from ``shift`` ranks back
        (its row count first, as ``fetch_ids``)."""
        to, source = (self.rank + shift) % self.world, (self.rank - shift) % self.world
        count = torch.tensor([payload.shape[0]], device=self.comm.device)
        arriving = self.comm.p2p_start([(to, count)], [(source, torch.empty_like(count))], "fetch_ids").wait()[0]
        buffer = payload.new_empty((int(arriving[0]),) + tuple(payload.shape[1:]))
        return self.comm.p2p_start([(to, payload)], [(source, buffer)], kind).wait()[0]

    def blocks_from(self, packed: torch.Tensor) -> SampledBlocks:
        """The sampled blocks whose topology arrived as ``packed`` (:func:`~gnntrain.data.sampling.pack`)."""
        return unpack(packed, self.topology.in_degree, self.fanouts, self.dtype)

    def accumulate(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        """One iteration's forward and backward on this rank (``batch``: the W mini-batches'
        roots, on the host); its share of the iteration loss."""
        raise NotImplementedError

    # -- strategy interface --------------------------------------------------------------

    def train_epoch(self, epoch: int) -> torch.Tensor:
        self.model.train()
        self.looked_up = 0
        self.missed.zero_()
        iterations = self.iterations(epoch)
        loss = self.graph.x.new_zeros(())
        self.iterations_timed.reset()
        for i, batch in enumerate(iterations):
            with self.iterations_timed:
                self.optimizer.zero_grad(set_to_none=False)
                self.model.begin_step(step_key(self.model_seed, epoch, i))
                loss += self.accumulate(epoch, i, batch)
                all_reduce_gradients(self.synced, self.comm)
                with phase("optimizer step"):
                    self.optimizer.step()
        return loss / len(iterations)

    @torch.no_grad()
    def evaluate(self) -> torch.Tensor:
        self.model.eval()
        with self.meter.tagged("eval_"):
            out = self.model(self.graph.x, self.graph, self.exchange)
        g = self.graph
        return score_counts(out, self.y, [g.train_mask, g.val_mask, g.test_mask], self.multilabel)

    def epoch_tallies(self) -> Tallies:
        return Tallies(summed={"looked_up": float(self.looked_up), "missed": float(self.missed)})

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        return {"miss_rate": totals["missed"] / totals["looked_up"] if totals["looked_up"] else 0.0}

    def state_dict(self) -> dict:
        """Model and optimizer: the mini-batches, samples and dropout masks are keyed by the
        seed, epoch and iteration, so nothing else carries over between epochs."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

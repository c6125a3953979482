"""The mini-batch methods' epochs as the predictor writes them (:attr:`Method.timing_model
<gnntrain.strategies.registry.Method.timing_model>`): the epoch's iterations as the ranks run them
(:mod:`.common`), each batch sampled by the run's own sampler from the run's keys, so the bytes are
the run's exactly; compute is the sampler's kernels and the model's step on each sampled block
(:class:`~gnntrain.cost.compute.Costs`; a block of ``T`` targets, ``S`` sources and ``E`` edges
costs the step on that shape divided among the layers, its matrices built, as every sample's are).

Per iteration, before its all-reduce of the synced gradients (``allreduce``):

* ``minibatch``, ``lo``: sample; fetch the remote features of the sample's nodes and the labels
  of its roots (:meth:`~gnntrain.parallel.feature_fetch.FeatureStore.stage`: the count per owner
  and the ids as ``fetch_ids``, the rows back from their owners as ``feat_fetch`` /
  ``label_fetch``); the step. ``lo`` deals each rank its own training nodes.
* ``p3``: sample; push the first block's topology to every rank (``fetch_ids``, ``topology``);
  the first layer's partial on this rank's columns of every mini-batch (each priced as the whole
  first block's step: the aggregation of the partials is whole on every rank, the projection a
  column slice, whose smaller share is not set apart); partials to their
  mini-batch's rank (``p3_partial``); labels; the step of the other layers; the partials'
  gradients back (``p3_partial``); the first layer's backward.
* ``naive`` (its sums path: GCN, SAGE): ``W - 1`` hops, each passing the held subgraph's
  topology and partial aggregation on (``fetch_ids``, ``topology``, ``naive_partial``) and the
  model (``model_migrate``, sent without waiting); labels; the step.
* ``hopgnn``: the iteration's time steps (:func:`~gnntrain.strategies.minibatch.hopgnn.plan`);
  labels where a root trains away from home; the features of every step's sample gathered once
  (``pregather``) or per step; per step after the first, the model migrates; the step.

Where the run decides on what it measures, the prediction takes the decision's neutral case:
HopGNN merging (``strategy.merge``) is predicted without merges (the examination chooses a count by
the ranks' iteration times). Not predicted: Naive's projections path (attention and other layers
whose input is not a sum), P3 on such a model. A graph given through a proxy keeps the proxy's
samples, the epoch's iterations as many as the real graph's training nodes make. An epoch of more
than :data:`SAMPLED_ITERATIONS` iterations is predicted from that many, scaled (so the test that
matches the meter's bytes runs epochs of fewer).
"""

from __future__ import annotations

import math

import torch

from gnntrain.data.sampling import SampledBlocks, Topology, pack, sample_groups, sampling_key
from gnntrain.errors import ConfigError
from gnntrain.cost.compute import Costs, StepSeconds
from gnntrain.cost.kernels import count
from gnntrain.cost.shape import PartitionShape
from gnntrain.timing.builder import RankTrace, TraceBuilder
from gnntrain.strategies.minibatch.common import fanouts
from gnntrain.strategies.minibatch.data_centric import local_batches
from gnntrain.strategies.minibatch.hopgnn import plan

SAMPLED_ITERATIONS = 16
"""Iterations written per epoch at most (:meth:`_Epoch.write`)."""
PROXY_ITERATIONS = 2
"""Iterations written per epoch of a proxy's: its samples stand for a bigger graph's alike, and
sampling a dense proxy is most of a prediction's time."""
ID_BYTES = 8


class _Epoch:
    """What every mini-batch method's epoch shares: its iterations, its samples and their costs."""

    def __init__(self, config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
        if shape.data is None:
            raise ConfigError(f"strategy {config.name}: the predictor samples the graph itself; valid: a dataset it "
                              "can load or a proxy")
        self.config, self.shape, self.costs, self.line, self.epoch = config, shape, costs, line, epoch
        self.world = len(line.ranks)
        self.part = shape.part
        if "topology" not in state:
            state["topology"] = Topology.of(shape.data)
        self.topology = state["topology"]
        self.fanouts = fanouts(costs.run)
        self.proxied = shape.scale != 1.0
        self.samples: dict = state.setdefault("samples", {})
        """A proxy's samples, drawn in its first epoch and kept for the others (alike)."""
        train = shape.data.train_mask.nonzero().view(-1)
        batches = math.ceil(train.numel() / config.batch_size)
        seed = config.seed * 1_000_003 + (1 if self.proxied else epoch)
        if config.name == "lo":
            self.batches = local_batches(train, self.part, self.world, config.batch_size, batches, seed)
        else:
            order = train[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(seed))]
            self.batches = [list(torch.tensor_split(order[s: s + config.batch_size], self.world))
                            for s in range(0, order.numel(), config.batch_size)]
        self.iterations = (math.ceil(sum(shape.train) / config.batch_size) if shape.scale != 1.0
                           else len(self.batches))
        self.label_bytes = (shape.classes * costs.value_bytes) if shape.data.multilabel else ID_BYTES
        self.row_bytes = shape.features * costs.value_bytes

    def keys(self, iteration: int) -> list[int]:
        epoch = 1 if self.proxied else self.epoch
        return [sampling_key(self.config.seed, epoch, iteration, layer) for layer in range(len(self.fanouts))]

    def sampled(self, groups: list[torch.Tensor], iteration: int) -> tuple[list[SampledBlocks], float]:
        """The samples of ``groups`` and the sampler's seconds (a proxy's: its first epoch's)."""
        key = (iteration, tuple((len(g), int(g[0]) if len(g) else -1) for g in groups))
        if self.proxied and key in self.samples:
            return self.samples[key]
        out: list[list[SampledBlocks]] = []
        keys = self.keys(iteration)
        work = count(lambda: out.append(sample_groups(self.topology, groups, self.fanouts, keys)))
        sampled = out[0], self.costs.profile.seconds(work, self.costs.cores)
        if self.proxied:
            self.samples[key] = sampled
        return sampled

    def own_samples(self, batch: list[torch.Tensor], iteration: int) -> list[SampledBlocks]:
        """Each rank's sample of its own mini-batch of ``batch``, its sampler's time charged to it."""
        samples = []
        for roots, rank in zip(batch, self.line.ranks):
            (sample,), seconds = self.sampled([roots], iteration)
            rank.compute(seconds)
            samples.append(sample)
        return samples

    def block_costs(self, blocks: SampledBlocks) -> list[tuple[StepSeconds, float]]:
        """Each block's share of the step (the step on its shape over the layers) and the
        seconds of building its matrices."""
        layers = len(blocks.blocks)
        shapes = [(b.num_inner, b.num_halo, b.edge_src.numel()) for b in blocks.blocks]
        return [(self.costs.step(*shape).scaled(1.0 / layers), self.costs.build(*shape)) for shape in shapes]

    def block_steps(self, blocks: SampledBlocks) -> list[StepSeconds]:
        """Each block's share of the step, its matrices built in its forward."""
        return [StepSeconds(step.forward + build, step.backward) for step, build in self.block_costs(blocks)]

    def stage(self, ids: list[torch.Tensor], row_bytes: float, kind: str) -> None:
        """Every rank's remote ``ids`` (distinct) fetched from their owners, as the feature store
        stages them: counts and ids as ``fetch_ids``, the rows back as ``kind``."""
        world, line = self.world, self.line
        asked = [[0] * world for _ in range(world)]
        for r, wanted in enumerate(ids):
            owners = torch.bincount(self.part[wanted], minlength=world).tolist()
            asked[r] = [0 if q == r else owners[q] for q in range(world)]
        line.wait(line.exchange("fetch_ids", [[ID_BYTES] * world for _ in range(world)]))
        line.wait(line.exchange("fetch_ids", [[ID_BYTES * n for n in row] for row in asked]))
        line.wait(line.exchange(kind, [[row_bytes * asked[r][q] for r in range(world)] for q in range(world)]))

    def write(self, iteration) -> None:
        """The epoch's iterations: ``iteration(i, batch)`` writes one. An epoch of more than
        :data:`SAMPLED_ITERATIONS` (a proxy's: :data:`PROXY_ITERATIONS`) writes that many and
        stands for the rest (``line.repeats``): its iterations cost alike, and a timeline of
        thousands would take long to replay."""
        written = min(self.iterations, SAMPLED_ITERATIONS if self.shape.scale == 1.0 else PROXY_ITERATIONS)
        for i in range(written):
            iteration(i % len(self.batches), self.batches[i % len(self.batches)])
        self.line.repeats = self.iterations / written

    def all_reduce(self, parameters: int) -> None:
        self.line.ring("allreduce", parameters * self.costs.value_bytes)


def _train(rank: RankTrace, steps: list[StepSeconds]) -> None:
    rank.compute(sum(s.forward for s in steps))
    rank.compute(sum(s.backward for s in steps))


def data_centric(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """``minibatch``'s and ``lo``'s epoch."""
    run = _Epoch(config, shape, costs, line, epoch, state)

    def iteration(i: int, batch: list[torch.Tensor]) -> None:
        samples = run.own_samples(batch, i)
        run.stage([s.input_nodes for s in samples], run.row_bytes, "feat_fetch")
        run.stage([s.roots for s in samples], run.label_bytes, "label_fetch")
        for rank, sample in zip(line.ranks, samples):
            _train(rank, run.block_steps(sample))
        run.all_reduce(costs.parameters)

    run.write(iteration)


def _summed_layer(costs: Costs, name: str):
    """The model's first layer where it sums its input rows (GCN, SAGE); refused otherwise."""
    layer = costs.model.summed_input_layer
    if layer is None:
        raise ConfigError(f"strategy {name} on model {costs.run.model.name}: the predictor models its path for "
                          "models whose first layer sums its input rows (gcn, sage)")
    return layer


def p3(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """P3's epoch (module docstring)."""
    run = _Epoch(config, shape, costs, line, epoch, state)
    _summed_layer(costs, "p3")
    world = run.world
    width = costs.widths[1] if costs.layers > 1 else shape.classes
    split = sum(m.weight.numel() for m in costs.model.input_maps)

    def iteration(i: int, batch: list[torch.Tensor]) -> None:
        samples = run.own_samples(batch, i)
        steps = [run.block_steps(s) for s in samples]
        first = [run.block_costs(s)[0] for s in samples]
        targets = [s.hop_sizes[-2] for s in samples]
        others = lambda r, n: [0 if q == r else n for q in range(world)]  # noqa: E731
        line.wait(line.exchange("fetch_ids", [others(r, ID_BYTES) for r in range(world)]))
        line.wait(line.exchange("topology", [others(r, ID_BYTES * pack(s, layers=1).numel())
                                             for r, s in enumerate(samples)]))
        line.compute([sum(step.forward + build for step, build in first) for _ in range(world)])
        line.wait(line.exchange("p3_partial", [[0 if q == r else targets[q] * width * costs.value_bytes
                                                for q in range(world)] for r in range(world)]))
        run.stage([s.roots for s in samples], run.label_bytes, "label_fetch")
        for rank, s in zip(line.ranks, steps):
            _train(rank, s[1:])
        line.wait(line.exchange("p3_partial", [others(r, targets[r] * width * costs.value_bytes)
                                               for r in range(world)]))
        line.compute([sum(step.backward for step, _ in first) for _ in range(world)])
        run.all_reduce(costs.parameters - split)

    run.write(iteration)


def _migrate(rank: RankTrace, shift: int, world: int, nbytes: float, pending: list[int]) -> None:
    """The held model sent ``shift`` ranks on without waiting, the one ``shift`` back received."""
    to, source = (rank.rank + shift) % world, (rank.rank - shift) % world
    pending.append(rank.send("model_migrate", to, nbytes))
    rank.wait(rank.recv("model_migrate", source, nbytes))


def naive(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """Naive's epoch, its sums path (module docstring)."""
    run = _Epoch(config, shape, costs, line, epoch, state)
    layer = _summed_layer(costs, "naive")
    world, model_bytes = run.world, 2 * costs.parameters * costs.value_bytes

    def iteration(i: int, batch: list[torch.Tensor]) -> None:
        samples = run.own_samples(batch, i)
        steps = [run.block_steps(s) for s in samples]
        if "width" not in state:
            rows = torch.zeros(samples[0].input_nodes.numel(), shape.features)
            state["width"] = layer.aggregated_inputs(rows, samples[0].blocks[0]).shape[1]
        width = state["width"]
        pending: list[list[int]] = [[] for _ in range(world)]
        for r, rank in enumerate(line.ranks):
            rank.compute(steps[r][0].forward)
        for t in range(1, world):
            held = [samples[(r - t + 1) % world] for r in range(world)]
            for r, rank in enumerate(line.ranks):
                ahead, behind = (r + 1) % world, (r - 1) % world
                arriving = samples[(r - t) % world]
                rank.wait(rank.swap("fetch_ids", ahead, ID_BYTES, behind, ID_BYTES))
                rank.wait(rank.swap("topology", ahead, ID_BYTES * pack(held[r]).numel(), behind,
                                    ID_BYTES * pack(arriving).numel()))
                rank.wait(rank.swap("fetch_ids", ahead, ID_BYTES, behind, ID_BYTES))
                rank.wait(rank.swap("naive_partial", ahead, held[r].hop_sizes[-2] * width * costs.value_bytes,
                                    behind, arriving.hop_sizes[-2] * width * costs.value_bytes))
                _migrate(rank, 1, world, model_bytes, pending[r])
                rank.compute(steps[(r - t) % world][0].forward)
        run.stage([samples[(r + 1) % world].roots for r in range(world)], run.label_bytes, "label_fetch")
        for r, rank in enumerate(line.ranks):
            trained = steps[(r + 1) % world]
            rank.compute(sum(s.forward for s in trained[1:]))
            rank.compute(sum(s.backward for s in trained))
            for op in pending[r]:
                rank.wait(op)
        run.all_reduce(costs.parameters)

    run.write(iteration)


def hopgnn(config, shape: PartitionShape, costs: Costs, line: TraceBuilder, epoch: int, state: dict) -> None:
    """HopGNN's epoch (module docstring)."""
    run = _Epoch(config, shape, costs, line, epoch, state)
    world, model_bytes = run.world, 2 * costs.parameters * costs.value_bytes
    merges = 0 if config.time_steps is None else max(world - config.time_steps, 0)

    def iteration(i: int, batch: list[torch.Tensor]) -> None:
        steps = plan(batch, run.part, merges)
        mine = [[(step.offset, step.roots[(r - step.offset) % world]) for step in steps] for r in range(world)]
        sampled = []
        for r, rank in enumerate(line.ranks):
            samples, seconds = run.sampled([roots for _, roots in mine[r]], i)
            rank.compute(seconds)
            sampled.append(samples)
        if any(bool((run.part[roots] != r).any()) for r in range(world) for _, roots in mine[r]):
            run.stage([torch.cat([roots for _, roots in mine[r]]) for r in range(world)], run.label_bytes,
                      "label_fetch")
        if config.pregather:
            run.stage([torch.unique(torch.cat([s.input_nodes for s in sampled[r]])) for r in range(world)],
                      run.row_bytes, "feat_fetch")
        pending: list[list[int]] = [[] for _ in range(world)]
        for index in range(len(steps)):
            if not config.pregather:
                run.stage([sampled[r][index].input_nodes for r in range(world)], run.row_bytes, "feat_fetch")
            for r, rank in enumerate(line.ranks):
                if index:
                    _migrate(rank, mine[r][index][0] - mine[r][index - 1][0], world, model_bytes, pending[r])
                _train(rank, run.block_steps(sampled[r][index]))
        for r, rank in enumerate(line.ranks):
            for op in pending[r]:
                rank.wait(op)
        run.all_reduce(costs.parameters)

    run.write(iteration)

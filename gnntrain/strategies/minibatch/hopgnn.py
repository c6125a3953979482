"""HopGNN (Sec. 5): move the models to the features (``strategy=hopgnn``).

One iteration on W ranks (Sec. 5.1, Fig. 9), model ``d`` starting on rank ``d``:

1. redistribution: every root of mini-batch ``d`` goes to its *home*, the rank that owns its
   features; the roots of mini-batch ``d`` homed on rank ``s`` are model ``d``'s micrographs
   on ``s`` (every rank derives the mini-batches from the seed, so this moves no bytes);
2. every rank samples the micrographs homed on it, one sampler pass per layer over all its
   time steps' roots (keyed sampling: a micrograph's blocks are the same whoever samples them
   and however they are grouped);
3. W time steps: at step ``t`` model ``d`` is on rank ``(d + t) mod W`` and trains on its
   micrographs there, fetching whatever inputs are still remote; between steps every model
   migrates one rank on, with its accumulated gradients (``model_migrate``,
   :mod:`gnntrain.parallel.migration`);
4. after the last step one all-reduce of the models' gradients and one update on every rank.

The roots model ``d`` trains on over the steps are mini-batch ``d``, and each loss term is
divided by the global batch size, so the summed gradient is the global mini-batch's: the
iteration equals ``strategy=minibatch``'s. (The public artifact all-reduces at every step and
averages per sub-batch, which is not.)

``strategy.pregather`` (Sec. 5.2): a rank fetches the union of the remote inputs of all its
time steps once per iteration instead of once per step, and keeps only those remote rows;
each step reads its own inputs' rows in place and the others from that buffer.

``strategy.merge`` (Sec. 5.3): a merge removes the time step with the fewest roots (the
paper's proxy for input rows, known before sampling) and deals each model's roots of that
step as evenly as possible over the same model's other steps (which run on other ranks:
those roots' features are then remote). How many merges an iteration makes is chosen by the
examination period, from the second epoch on (epoch 1, unmerged, warms up). The paper times
one epoch per merge count and keeps merging while the epoch gets faster (Fig. 17); a single
epoch's time is too noisy for that on a shared CPU, so our examination times *iterations*:
the examination epochs cycle their iterations through the merge counts ``0 .. W-1`` (iteration
``j`` of the period merges ``j mod W`` times), until every count has
:data:`EXAMINATION_SAMPLES` iteration times (the slowest rank's); then, as the paper's rule,
the count rises from 0 while the next count's median iteration time is lower, and every later
epoch keeps it. Interleaving the counts exposes them to the same drift; with ``>= 3 W``
iterations per epoch the examination ends with epoch 2. Examination epochs report
``examination = 1`` and are left out of the run's steady means (reported apart in
``summary.json``). ``strategy.time_steps`` fixes the number of steps instead (W - time_steps
merges, no examination). Merging never changes what a model trains on, only where and when.

Labels. A root's label is its home's, so an unmerged step reads it locally; the iteration
fetches labels (``label_fetch``, one collective per iteration) only when its plan puts a
root on a rank that does not own it, which every rank knows from the plan.

Reported per epoch: ``time_steps`` per iteration, ``merges`` (mean per iteration),
``examination`` and the family's ``miss_rate``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import torch
import torch.distributed as dist

from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.errors import ConfigError
from gnntrain.parallel.mesh import Layout, WorkerContext
from gnntrain.parallel.migration import migrate, wait_all
from gnntrain.strategies.base import Tallies
from gnntrain.strategies.minibatch.common import MiniBatchTraining, minibatch_layout
from gnntrain.strategies.minibatch.config import HopGNNConfig


@dataclass
class TimeStep:
    offset: int
    """Model ``d`` runs on rank ``(d + offset) mod W`` during this step."""
    roots: list[torch.Tensor]
    """The roots each model trains on in this step."""

    @property
    def size(self) -> int:
        return sum(r.numel() for r in self.roots)


def time_steps(batch: list[torch.Tensor], owner: torch.Tensor) -> list[TimeStep]:
    """The W steps of an iteration before merging: at step ``t`` model ``d`` trains on the roots
    of mini-batch ``d`` homed on rank ``(d + t) mod W``."""
    world = len(batch)
    return [TimeStep(t, [roots[owner[roots] == (d + t) % world] for d, roots in enumerate(batch)])
            for t in range(world)]


def merge_smallest(steps: list[TimeStep]) -> list[TimeStep]:
    """``steps`` with the step of fewest roots (the first such) merged into the others: each
    model's roots of that step dealt in near-equal consecutive slices over its other steps."""
    if len(steps) == 1:
        return steps
    smallest = min(range(len(steps)), key=lambda t: steps[t].size)
    rest = [s for t, s in enumerate(steps) if t != smallest]
    merged = [TimeStep(s.offset, list(s.roots)) for s in rest]
    for d, roots in enumerate(steps[smallest].roots):
        for step, piece in zip(merged, torch.tensor_split(roots, len(rest))):
            step.roots[d] = torch.cat([step.roots[d], piece])
    return merged


def plan(batch: list[torch.Tensor], owner: torch.Tensor, merges: int) -> list[TimeStep]:
    steps = time_steps(batch, owner)
    for _ in range(merges):
        steps = merge_smallest(steps)
    return steps


EXAMINATION_SAMPLES = 3
"""Iteration times per merge count the examination decides on."""


def chosen_merges(medians: list[float]) -> int:
    """The paper's rule over the merge counts' median iteration times: keep merging while the
    next count is faster."""
    merges = 0
    while merges + 1 < len(medians) and medians[merges + 1] < medians[merges]:
        merges += 1
    return merges


class HopGNN(MiniBatchTraining):
    @staticmethod
    def layout(run: RootConfig, world_size: int) -> Layout:
        steps = run.strategy.time_steps
        if steps is not None and steps > world_size:
            raise ConfigError(f"strategy.time_steps={steps} exceeds the {world_size} time steps of {world_size} "
                              f"workers; valid: 1..{world_size} (or null)")
        return minibatch_layout(run, world_size)

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        super().__init__(run, ctx, job)
        config: HopGNNConfig = run.strategy
        self.pregather = config.pregather
        fixed = config.time_steps
        self.merges = 0 if fixed is None else max(self.world - fixed, 0)
        self.examining = config.merge and fixed is None and self.world > 1
        self.samples: list[list[float]] = [[] for _ in range(self.world)]
        """Per merge count, the examination's iteration times."""
        self.examined = 0
        """Iterations the examination has run."""
        self.merges_run: list[int] = []

    def _merges_at(self, epoch: int) -> int:
        """The merges of the next iteration: the examination's round robin, or the count kept."""
        if self.examining and epoch >= 2:
            return (self.examined + len(self.merges_run)) % self.world
        return self.merges

    def accumulate(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        size = sum(b.numel() for b in batch)
        merges = self._merges_at(epoch)
        self.merges_run.append(merges)
        steps = plan(batch, self.owner, merges)
        mine = [(step.offset, step.roots[(self.rank - step.offset) % self.world]) for step in steps]
        sampled = self.sample_groups([roots for _, roots in mine], epoch, iteration)
        all_roots = torch.cat([blocks.roots for blocks in sampled])
        if self._roots_away_from_home(steps):
            labels = self.fetch_labels(all_roots)
        else:
            labels = self.store.read(all_roots, "y")
        if self.pregather:
            self.stage_features(torch.unique(torch.cat([s.input_nodes for s in sampled])))
        loss = self.graph.x.new_zeros(())
        start = 0
        departed = []
        for index, ((offset, roots), blocks) in enumerate(zip(mine, sampled)):
            if self.pregather:
                x = self.store.read(blocks.input_nodes, "x")
            else:
                x = self.fetch_features(blocks.input_nodes)
            if index:
                departed.append(migrate(self.params, self.comm, offset - mine[index - 1][0]))
            loss += self.train_on(blocks, x, labels[start: start + roots.numel()], size)
            start += roots.numel()
        wait_all(departed)
        return loss

    def _roots_away_from_home(self, steps: list[TimeStep]) -> bool:
        """Whether any rank trains, in ``steps``, on a root it does not own (known to all ranks)."""
        return any(bool((self.owner[step.roots[(rank - step.offset) % self.world]] != rank).any())
                   for step in steps for rank in range(self.world))

    def train_epoch(self, epoch: int) -> torch.Tensor:
        self.merges_run = []
        self.examination = self.examining and epoch >= 2
        loss = super().train_epoch(epoch)
        if self.examination:
            self._examine()
        return loss

    def _examine(self) -> None:
        """Add the epoch's iteration times (the slowest rank's) to their merge counts' samples;
        decide once every count has enough."""
        times = torch.tensor(self.iterations_timed.laps(), dtype=torch.float64, device=self.comm.device)
        slowest = self.comm.all_reduce(times, "merge_time", dist.ReduceOp.MAX).tolist()
        for merges, seconds in zip(self.merges_run, slowest):
            self.samples[merges].append(seconds)
        self.examined += len(self.merges_run)
        if min(len(s) for s in self.samples) >= EXAMINATION_SAMPLES:
            self.merges = chosen_merges([statistics.median(s) for s in self.samples])
            self.examining = False

    def state_dict(self) -> dict:
        """The family's state and the merge state: the count kept, or the examination's samples so far."""
        return {**super().state_dict(), "merges": self.merges, "examining": self.examining,
                "samples": self.samples, "examined": self.examined}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.merges, self.examining = state["merges"], state["examining"]
        self.samples, self.examined = state["samples"], state["examined"]

    def epoch_tallies(self) -> Tallies:
        tallies = super().epoch_tallies()
        merges = self.merges_run or [self.merges]
        tallies.summed.update(merges=sum(merges) / len(merges), examination=float(self.examination))
        return tallies

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """The family's figures, and the epoch's mean ``merges`` (and the ``time_steps`` they
        leave) and ``examination`` flag, each the mean over the ranks (every rank agrees on them)."""
        merges = totals["merges"] / self.world
        return {**super().epoch_metrics(totals), "time_steps": self.world - merges, "merges": merges,
                "examination": totals["examination"] / self.world}

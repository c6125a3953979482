"""HopGNN (Sec. 5): move the models to the features (``strategy=hopgnn``).

One iteration on W ranks (Sec. 5.1, Fig. 9), model ``d`` starting on rank ``d``:

1. redistribution: every root of mini-batch ``d`` goes to its *home*, the rank that owns its
   features; the roots of mini-batch ``d`` homed on rank ``s`` are model ``d``'s micrographs
   on ``s`` (every rank derives the mini-batches from the seed, so this moves no bytes);
2. every rank samples the micrographs homed on it (keyed sampling: a micrograph's blocks are
   the same whoever samples them and however they are grouped);
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
time steps once per iteration instead of once per step.

``strategy.merge`` (Sec. 5.3): a merge removes the time step with the fewest roots (the
paper's proxy for input rows, known before sampling) and deals each model's roots of that
step as evenly as possible over the same model's other steps (which run on other ranks:
those roots' features are then remote). Merges repeat per iteration a number of times chosen
by examination: from the second epoch on, each epoch merges once more than the previous while
its time (the slowest rank's) falls; the first epoch that is not faster reverts to the previous
count, which all later epochs keep (Fig. 17). ``strategy.time_steps`` fixes the number of steps
instead (W - time_steps merges, no examination). Merging never changes what a model trains on,
only where and when.

Reported per epoch: ``time_steps`` per iteration, ``merges``, and the family's ``miss_rate``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist

from gnntrain.config.schema import check
from gnntrain.errors import ConfigError
from gnntrain.parallel.mesh import Layout
from gnntrain.parallel.migration import migrate
from gnntrain.strategies.minibatch.common import MiniBatchConfig, MiniBatchTraining, minibatch_layout


@dataclass
class HopGNNConfig(MiniBatchConfig):
    """HopGNN: models migrate to the features (Sec. 5)."""

    pregather: bool = True
    """One feature fetch per iteration (Sec. 5.2)."""
    merge: bool = True
    """Micrograph merging with the examination period (Sec. 5.3)."""
    time_steps: Optional[int] = None
    """A fixed number of time steps per iteration (null: one per worker, then the examination if merge)."""


def validate(strategy: dict) -> None:
    steps = strategy["time_steps"]
    if steps is not None:
        check("strategy.time_steps", steps, steps >= 1, ">= 1 (or null: as many as workers)")


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


class HopGNN(MiniBatchTraining):
    @staticmethod
    def layout(cfg: dict, world_size: int) -> Layout:
        steps = cfg["strategy"]["time_steps"]
        if steps is not None and steps > world_size:
            raise ConfigError(f"strategy.time_steps={steps} exceeds the {world_size} time steps of {world_size} "
                              f"workers; valid: 1..{world_size} (or null)")
        return minibatch_layout(cfg, world_size)

    def __init__(self, cfg, ctx, job) -> None:
        super().__init__(cfg, ctx, job)
        scfg = cfg["strategy"]
        self.pregather = scfg["pregather"]
        fixed = scfg["time_steps"]
        self.merges = 0 if fixed is None else max(self.world - fixed, 0)
        self.examining = scfg["merge"] and fixed is None and self.world > 1
        self.previous_time: float | None = None
        self.steps_run = self.iterations_run = 0

    def accumulate(self, epoch: int, iteration: int, batch: list[torch.Tensor]) -> torch.Tensor:
        size = sum(b.numel() for b in batch)
        steps = plan(batch, self.owner, self.merges)
        mine = [(step.offset, step.roots[(self.rank - step.offset) % self.world]) for step in steps]
        sampled = [self.sample(roots, epoch, iteration) for _, roots in mine]
        if self.pregather:
            inputs = torch.unique(torch.cat([s.input_nodes for s in sampled]))
            rows = self.fetch_features(inputs)
            all_roots = torch.cat([roots for _, roots in mine])
            labels = self.fetch_labels(all_roots)
        loss = self.graph.x.new_zeros(())
        for index, ((offset, roots), blocks) in enumerate(zip(mine, sampled)):
            if index:
                migrate(self.params, self.comm, offset - mine[index - 1][0])
            if self.pregather:
                x = rows[torch.searchsorted(inputs, blocks.input_nodes)]
                start = sum(r.numel() for _, r in mine[:index])
                y = labels[start: start + roots.numel()]
            else:
                x, y = self.fetch_features(blocks.input_nodes), self.fetch_labels(roots)
            loss += self.train_on(blocks, x, y, size)
        self.steps_run += len(steps)
        self.iterations_run += 1
        return loss

    def train_epoch(self, epoch: int) -> torch.Tensor:
        self.steps_run = self.iterations_run = 0
        self.merges_this_epoch = self.merges
        start = time.perf_counter()
        loss = super().train_epoch(epoch)
        if self.examining and epoch >= 2:
            self._examine(time.perf_counter() - start)
        return loss

    def _examine(self, elapsed: float) -> None:
        """One step of the examination period: keep merging while epochs get faster."""
        slowest = torch.tensor([elapsed], dtype=torch.float64, device=self.comm.device)
        slowest = float(self.comm.all_reduce(slowest, "merge_time", dist.ReduceOp.MAX))
        if self.previous_time is not None and slowest >= self.previous_time:
            self.merges -= 1
            self.examining = False
        elif self.merges + 1 < self.world:
            self.previous_time = slowest
            self.merges += 1
        else:
            self.examining = False

    def epoch_metrics(self) -> dict[str, float]:
        return {**super().epoch_metrics(), "time_steps": self.steps_run / max(self.iterations_run, 1),
                "merges": float(self.merges_this_epoch)}

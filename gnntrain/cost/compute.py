"""What a method's timeline (:mod:`gnntrain.timing.builder`) asks of the model and the device:
the seconds of a training step's forward and backward on a rank of a given shape (its kernel
counts, :mod:`gnntrain.cost.kernels`, priced by the device profile,
:mod:`gnntrain.cost.profile`), the seconds of any other counted work (quantising rows), and
the model's facts that set the bytes it sends: each message-passing layer's input width, its
parameter count and the bytes of a value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from gnntrain.config.schema import RootConfig
from gnntrain.cost.memory import DTYPE_BYTES
from gnntrain.models import build_model
from gnntrain.cost.kernels import count, model_key, step_counts
from gnntrain.cost.profile import DeviceProfile


@dataclass(frozen=True)
class StepSeconds:
    forward: float
    backward: float
    """The backward and the optimizer's step."""

    def scaled(self, factor: float) -> StepSeconds:
        return StepSeconds(self.forward * factor, self.backward * factor)


class Costs:
    """The model's facts and the device's seconds for one run's setting (module docstring)."""

    def __init__(self, run: RootConfig, features: int, classes: int, profile: DeviceProfile, cores: int = 1) -> None:
        self.run, self.features, self.classes, self.profile, self.cores = run, features, classes, profile, cores
        self.model = model = build_model(run.model, features, classes)
        self.widths: tuple[int, ...] = tuple(model.input_widths)
        """Each message-passing layer's input width: what its halo exchange moves per row."""
        self.parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
        self.value_bytes = DTYPE_BYTES[str(run.train.dtype)]
        self.model_key = model_key(run.model)

    @property
    def layers(self) -> int:
        return len(self.widths)

    def _counts(self, inner: float, halo: float, edges: float):
        return step_counts(self.run.model, self.features, self.classes, str(self.run.train.dtype), inner, halo, edges,
                           self.model_key)

    def step(self, inner: float, halo: float, edges: float) -> StepSeconds:
        """A training step of the model on a rank of ``inner`` rows, ``halo`` rows and ``edges``
        in-edges of its inner rows, on a graph whose matrices are built."""
        if inner < 1:
            return StepSeconds(0.0, 0.0)
        counts = self._counts(inner, halo, edges)
        return StepSeconds(self.profile.seconds(counts.forward, self.cores),
                           self.profile.seconds(counts.backward, self.cores))

    def build(self, inner: float, halo: float, edges: float) -> float:
        """Building the aggregation matrices of such a graph, which a forward on a graph the
        rank has not trained on before does (a sample, every epoch or every mini-batch)."""
        return 0.0 if inner < 1 else self.profile.seconds(self._counts(inner, halo, edges).build, self.cores)

    def per_row(self, work: Callable[[torch.Tensor], object], width: int, rows: int = 4096) -> float:
        """Seconds per row of ``work`` applied to ``[rows, width]`` rows of the training dtype."""
        probe = torch.randn(rows, width, generator=torch.Generator().manual_seed(0)).to(getattr(torch, str(self.run.train.dtype)))
        work(probe)
        return self.profile.seconds(count(lambda: work(probe)), self.cores) / rows

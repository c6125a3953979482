"""A method's compute priced from its own measured steps.

A timing model (:attr:`Method.timing_model <gnntrain.strategies.registry.Method.timing_model>`)
writes each rank's epoch as compute spans whose seconds are the kernels they run, counted
(:mod:`gnntrain.cost.kernels`) and priced by micro-benchmarks (:mod:`gnntrain.cost.profile`).
That leaves out what a step costs besides its kernels (the strategy's, the communicator's and the
meter's Python between them) and prices the kernels at the micro-benchmarks' sizes, not the
method's. So the method is run (``gnntrain.job.step_profile``): a few epochs on synthetic proxies
of the target's proportions (its degree, :func:`proxy_degree`, features and classes) of
:data:`PROXY_NODES` nodes,
whatever the target's size (the fit interpolates for a smaller target and extends the line for a
larger one; proxies all in the regime where the fixed costs dominate gave a rate 2.6 times off
here), on the virtual clock with the ranks taking
turns (``cluster.virtual_compute=alone``), traced; each rank's measured compute in each steady
epoch (:data:`WARM_EPOCHS`) (the thread CPU time of its spans, :func:`gnntrain.timing.trace.epoch_compute`) is paired
with what the timing model writes for the same proxy: ``n`` spans of ``T`` counted seconds,
standing ``k`` times over (:attr:`~gnntrain.timing.builder.TraceBuilder.repeats`). The model,
per written span:

    span = dispatch + rate * counted,    so    measured epoch = k (n dispatch + rate T)

``dispatch`` the fixed cost of a span (the host's work around its kernels), ``rate`` the
method's kernels against the micro-benchmarks', both fitted by non-negative least squares on
relative residuals over every (proxy, rank, epoch): at least three sizes, so a fit that does not
hold shows in its residual (:attr:`StepFit.residual`). A prediction then writes every span at
``dispatch + rate * counted`` (:attr:`StepFit.price`), extending the line to the target's size
through the counted work, which grows with it. Replay times the written trace under the network
with the accounting of live runs.

Where the papers and the issue leave a choice: a span's fixed cost is one constant per method
setting (its host's work per kernel sequence varies less than the kernels); the counted work
keeps its device profile's split into kernel classes, rescaled by one rate; a rank of ``cores``
cores is profiled on one (the virtual clock's thread time) and priced with its counted work at
``cores`` (the profile's stated perfect scaling); a target of more than :data:`PROFILE_WORLD_MAX`
ranks is profiled at that many (:func:`profile_world`): the model prices a span, and the target's
spans and their counted work are written for its own ranks, so the ranks enter through what is
written, not through the fit (16 ranks taking turns on this 2-core machine took 78 s per method
for products' proportions, 4 ranks 28 s).

A fit is cached per machine in ``<partition.cache_dir>/step_profile/``, one file per key
(:func:`fit_key`: the method's and the model's config, the profiled ranks, the dtype, the proxies'
shape, torch's version and the device profile it rescales), so a fit made for another device
profile or torch is never read: it is measured again.
"""

from __future__ import annotations

import hashlib
import json
import socket
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from scipy.optimize import nnls

from gnntrain.config.schema import RootConfig
from gnntrain.config.typed import plain
from gnntrain.cost.kernels import on_ray
from gnntrain.cost.profile import DeviceProfile
from gnntrain.cost.shape import PartitionShape
from gnntrain.errors import ConfigError
from gnntrain.storage.cache import cache_folder
from gnntrain.storage.files import write_atomically
from gnntrain.storage.json_file import read_checked

FORMAT = 1
PROXY_NODES = (4000, 8000, 16000)
"""The proxies' nodes. A proxy the method refuses (a mini-batch larger than its training nodes)
is left out; a fit needs two."""
PROFILE_EPOCHS = 8
WARM_EPOCHS = 4
PROFILE_WORLD_MAX = 4
"""The most ranks a proxy runs on (:func:`profile_world`)."""
"""Epochs of a profiled run, and how many of them are left out: the first builds its matrices
(and PipeGCN's waits on nothing), and a rank's compute went on falling by a fifth over the next
three here (allocator and caches warming), so the fit reads the last four."""
FIELDS = {"version", "key", "dispatch_s", "rate", "samples"}


@dataclass(frozen=True)
class Sample:
    """One rank's steady epoch of a profiled proxy: the written spans (``spans`` of ``counted``
    seconds, each already times the repeats) and the measured compute."""

    spans: float
    counted: float
    measured: float


@dataclass(frozen=True)
class StepFit:
    """A fitted step profile (module docstring)."""

    dispatch_s: float
    rate: float
    samples: tuple[Sample, ...]

    def price(self, counted: float) -> float:
        """A written span's seconds from its counted seconds."""
        return self.dispatch_s + self.rate * counted

    def predicted(self, sample: Sample) -> float:
        return sample.spans * self.dispatch_s + sample.counted * self.rate

    @property
    def residual(self) -> float:
        """The median relative error of the fit on its own samples."""
        return statistics.median(abs(self.predicted(s) / s.measured - 1) for s in self.samples)


def fit(samples: list[Sample]) -> StepFit:
    """``dispatch`` and ``rate`` by non-negative least squares on relative residuals."""
    usable = [s for s in samples if s.measured > 0]
    if len(usable) < 2:
        raise ConfigError(f"a step profile needs measured compute in at least 2 epochs; got {len(usable)}")
    weights = np.array([1.0 / s.measured for s in usable])
    design = np.array([[s.spans, s.counted] for s in usable]) * weights[:, None]
    (dispatch, rate), _ = nnls(design, np.ones(len(usable)))
    return StepFit(float(dispatch), float(rate), tuple(usable))


def proxy_overrides(shape: PartitionShape, nodes: int, degree: float) -> list[str]:
    """The dataset overrides of a proxy of ``nodes`` nodes of ``degree`` with ``shape``'s
    features and classes."""
    return ["dataset=synthetic", f"dataset.num_nodes={nodes}", f"dataset.avg_degree={degree:.6g}",
            f"dataset.num_features={shape.features}", f"dataset.num_classes={shape.classes}"]


def proxy_degree(shape: PartitionShape) -> float:
    """The proxies' average degree: the target's, rounded to the nearest of 8 steps per doubling
    (:func:`~gnntrain.cost.kernels.on_ray`, within 4.4%), so that graphs of one kind at other
    sizes (whose generator drops a different share of duplicate edges) share a fit."""
    return on_ray(shape.edges / shape.nodes)


def profile_world(world: int) -> int:
    """The ranks the proxies of a target of ``world`` ranks run on."""
    return min(world, PROFILE_WORLD_MAX)


def fit_key(run: RootConfig, shape: PartitionShape, profile: DeviceProfile) -> dict:
    """What a fit depends on (module docstring)."""
    return {"format": FORMAT, "host": socket.gethostname(), "strategy": plain(run.strategy), "model": plain(run.model),
            "world": profile_world(run.cluster.world_size), "dtype": str(run.train.dtype), "seed": run.seed,
            "proxies": [proxy_overrides(shape, n, proxy_degree(shape)) for n in PROXY_NODES],
            "epochs": PROFILE_EPOCHS, "torch": torch.__version__, "device_profile": asdict(profile)}


def fit_path(cache_dir: str, key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return cache_folder(cache_dir, "step_profile") / f"{run_name(key)}-{digest}.json"


def run_name(key: dict) -> str:
    return "".join(c if c.isalnum() else "-" for c in f"{key['strategy'].get('name', '')}-w{key['world']}")


def load(path: Path) -> StepFit:
    """A cached or given fit, checked (:func:`gnntrain.storage.json_file.read_checked`)."""
    fields = read_checked(path, "step profile", FORMAT, FIELDS, {"dispatch_s", "rate", "samples"})
    try:
        samples = tuple(Sample(float(s["spans"]), float(s["counted"]), float(s["measured"])) for s in fields["samples"])
        return StepFit(float(fields["dispatch_s"]), float(fields["rate"]), samples)
    except (TypeError, KeyError, ValueError) as exc:
        raise ConfigError(f"step profile {path}: malformed samples ({exc}); delete it to measure it again") from None


def save(path: Path, key: dict, step_fit: StepFit) -> None:
    write_atomically(path, json.dumps({"version": FORMAT, "key": key, "dispatch_s": step_fit.dispatch_s,
                                       "rate": step_fit.rate, "samples": [asdict(s) for s in step_fit.samples]},
                                      indent=1, default=str) + "\n")

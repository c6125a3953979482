"""A method's steps profiled on proxies of the target and fitted (:mod:`gnntrain.predict.step_fit`):
the runs themselves, which only the job layer may launch.

Each proxy is the user's overrides with the dataset, the clock and the epochs replaced
(:data:`PROFILED`): the same method, model, dtype and seed, at most
:data:`~gnntrain.predict.step_fit.PROFILE_WORLD_MAX` ranks, on a synthetic graph of the
target's proportions, traced on the virtual clock with the ranks taking turns, on a modelled link
(the compute measured is each rank's thread CPU time, which no link changes). The runs' own
console lines go to a log (shown where a run fails); a line on stderr says which proxy runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from gnntrain.config.schema import RootConfig
from gnntrain.cost.compute import Costs
from gnntrain.cost.profile import DeviceProfile
from gnntrain.data.phases import left, note
from gnntrain.errors import ConfigError, WorkerFailed
from gnntrain.cost.shape import DEGREE_TOLERANCE, PartitionShape, partition_shape
from gnntrain.job import api
from gnntrain.predict.predictor import written
from gnntrain.predict.step_fit import (PROFILE_EPOCHS, PROXY_NODES, WARM_EPOCHS, Sample, StepFit, fit, fit_key,
                                       fit_path, load, proxy_degree, proxy_overrides, save)
from gnntrain.strategies import method
from gnntrain.timing.trace import TRACE_FILE, epoch_compute, read

REPLACED = ("dataset", "network", "cluster.world_size", "train.epochs", "train.eval_every", "train.warmup_epochs",
            "cluster.clock", "cluster.trace", "cluster.virtual_compute", "wandb", "hydra", "checkpoint",
            "train.checkpoint_every", "train.resume")
"""Override keys (and their sub-keys) a proxy's run sets itself."""
PROFILED = ["network=eth10g", f"train.epochs={PROFILE_EPOCHS}", f"train.eval_every={PROFILE_EPOCHS}",
            "cluster.clock=virtual", "cluster.virtual_compute=alone", "cluster.trace=true", "wandb.mode=disabled"]


def _kept(overrides: list[str]) -> list[str]:
    def key(o: str) -> str:
        return o.split("=", 1)[0].lstrip("+~")

    return [o for o in overrides if not any(key(o) == r or key(o).startswith(r + ".") for r in REPLACED)]


@contextlib.contextmanager
def _console_to(log: Path) -> Iterator[None]:
    """This process's and its workers' standard output into ``log``."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(log, "w") as fh:
        os.dup2(fh.fileno(), 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def measured_compute(overrides: list[str]) -> dict[tuple[int, int], float]:
    """Each rank's compute (virtual seconds) in each epoch of the traced run of ``overrides``."""
    with tempfile.TemporaryDirectory() as run_dir:
        log = Path(run_dir) / "console.log"
        try:
            with _console_to(log):
                api.run(api.compose(overrides, run_dir=str(Path(run_dir) / "run")))
        except WorkerFailed:
            sys.stderr.write(log.read_text()[-4000:])  # what the run printed before it failed
            raise
        spans = epoch_compute(read(Path(run_dir) / "run" / TRACE_FILE))
    return {key: seconds for key, (_, seconds) in spans.items()}


def _proxy(kept: list[str], shape: PartitionShape, nodes: int) -> tuple[list[str], RootConfig, PartitionShape]:
    """A proxy of ``nodes`` nodes in ``shape``'s proportions: its overrides, its config and its
    shape. The generator drops duplicate edges, more of them on a smaller graph, so a proxy whose
    degree falls more than :data:`~gnntrain.cost.shape.DEGREE_TOLERANCE` short is drawn again at
    a degree corrected by the shortfall (as the predictor's own proxies are)."""
    wanted = proxy_degree(shape)
    overrides = kept + proxy_overrides(shape, nodes, wanted) + PROFILED
    proxy = api.check(api.compose(overrides))
    parts = method(proxy.strategy.name).strategy.layout(proxy, proxy.cluster.world_size).parts
    drawn = partition_shape(proxy, parts)
    realised = drawn.edges / drawn.nodes
    if abs(realised / wanted - 1) > DEGREE_TOLERANCE:
        overrides = kept + proxy_overrides(shape, nodes, wanted * wanted / realised) + PROFILED
        proxy = api.check(api.compose(overrides))
        drawn = partition_shape(proxy, parts)
    return overrides, proxy, drawn


def samples_on(kept: list[str], shape: PartitionShape, nodes: int, profile: DeviceProfile) -> list[Sample]:
    """The steady epochs of a proxy of ``nodes`` nodes run with the overrides ``kept``: what was
    written against what was measured."""
    overrides, proxy, drawn = _proxy(kept, shape, nodes)
    measured = measured_compute(overrides)
    line = written(proxy, drawn, Costs(proxy, drawn.features, drawn.classes, profile), epochs=PROFILE_EPOCHS)
    return [Sample(spans * line.repeats, counted * line.repeats, measured[key])
            for key, (spans, counted) in sorted(line.epoch_compute().items()) if key[1] > WARM_EPOCHS and key in measured]


def step_fit(overrides: list[str], run: RootConfig, shape: PartitionShape, profile: DeviceProfile,
             refit: bool = False) -> StepFit:
    """The fit of the run's method on proxies of ``shape`` (cached; ``refit``: measured again)."""
    key = fit_key(run, shape, profile)
    path = fit_path(run.partition.cache_dir, key)
    if path.exists() and not refit:
        return load(path)
    samples: list[Sample] = []
    refused = []
    started = time.perf_counter()
    for done, nodes in enumerate(PROXY_NODES):
        note(f"gnntrain-predict: profiling {run.strategy.name}'s steps on proxy {done + 1}/{len(PROXY_NODES)} "
             f"({nodes} nodes{left(time.perf_counter() - started, sum(PROXY_NODES[:done]), sum(PROXY_NODES))})")
        try:
            samples += samples_on(_kept(overrides) + [f"cluster.world_size={key['world']}"], shape, nodes, profile)
        except ConfigError as exc:
            refused.append(f"{nodes} nodes: {exc}")
    if len(refused) > len(PROXY_NODES) - 2:
        raise ConfigError(f"{run.strategy.name}'s steps cannot be profiled: {'; '.join(refused)}; valid: a setting "
                          f"two of the proxies of {', '.join(map(str, PROXY_NODES))} nodes run")
    result = fit(samples)
    save(path, key, result)
    return result

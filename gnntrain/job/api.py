"""One way to run a gnntrain config, whoever runs it: the CLI, the sweep callback, the scripts
and the tests all go through these four steps, so none of them can run a config another refuses.

* :func:`compose` — the plain, resolved config ``gnntrain OVERRIDES`` builds (Hydra's compose
  API over the packaged ``gnntrain.conf``, schemas registered: :func:`composing`);
* :func:`check` — what is refused before any worker starts: every component's checks
  (:func:`gnntrain.job.validation.validate`), the job's layout on its world size (the
  strategy's mesh and parts, :func:`gnntrain.job.validation.job_layout`) and what its launcher
  rules out; the sweep callback checks every job of a sweep with it before the first starts;
* :func:`calibrate` — the network's bandwidths set by ``network.calibrate_share``
  (:mod:`gnntrain.job.calibration`);
* :func:`run` — check, calibrate and launch the workers (:func:`gnntrain.job.launch.start.launch`),
  each running ``worker`` (default: the training loop).

Each step takes the plain config or the typed one (:class:`~gnntrain.config.schema.RootConfig`);
a plain one is typed once, on entry (:func:`gnntrain.job.composition.typed_run`), and everything
after it reads the typed sections.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gnntrain.config import one_line, refuse_set_by_gnntrain
from gnntrain.errors import ConfigError, JobInterrupted
from gnntrain.job.calibration import calibrated
from gnntrain.job.composition import register_schemas, typed_run
from gnntrain.config.schema import NetworkConfig, RootConfig
from gnntrain.config.schema import check as check_value
from gnntrain.engine.loop import run_training
from gnntrain.job.launch.rank import WorkerFn
from gnntrain.job.launch.start import launch
from gnntrain.job.validation import check_launcher, job_layout, resolve_world_size, validate
from gnntrain.timing.cluster import link_overrides


@contextmanager
def composing() -> Iterator[Callable[[list[str]], DictConfig]]:
    """Hydra's compose API over the packaged ``gnntrain.conf``, schemas registered: within the
    block, a function from overrides to the config they compose (Hydra's own, unresolved)."""
    register_schemas()
    GlobalHydra.instance().clear()
    with initialize_config_module("gnntrain.conf", version_base="1.3"):
        yield lambda overrides: hydra_compose("config", overrides=list(overrides))


def compose(overrides: list[str], run_dir: str = "") -> dict:
    """The resolved config of ``overrides`` as a plain dict (enums as strings), with ``run_dir``;
    overrides Hydra cannot compose (an unknown key, a bad value) refused in one line as
    ``gnntrain`` refuses them (:func:`gnntrain.config.one_line`)."""
    refuse_set_by_gnntrain(overrides)
    try:
        with composing() as composed:
            cfg = composed(overrides)
        plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    except (HydraException, OmegaConfBaseException) as exc:
        stopped = exc.__cause__ if isinstance(exc.__cause__, JobInterrupted) else None
        if stopped is not None:
            raise stopped from None
        raise ConfigError(one_line(exc)) from None
    plain["run_dir"] = run_dir
    return plain


def check(cfg: dict | RootConfig) -> RootConfig:
    """Raise the one-line error a run of ``cfg`` would stop with before starting its workers;
    the typed config otherwise. ``partition.only`` with ``partition.parts`` set starts none: its
    parts serve later runs on that many parts, whatever this config's number of workers."""
    run = typed_run(cfg)
    validate(run)
    check_launcher(run)
    if not (run.partition.only and run.partition.parts is not None):
        world_size = resolve_world_size(run)
        job_layout(run, world_size)
        fault = run.fault.rank
        check_value("fault.rank", fault, fault is None or 0 <= fault < world_size,
                    f"a rank in 0..{world_size - 1}, or null")
        epoch = run.fault.epoch
        check_value("fault.epoch", epoch, epoch is None or epoch >= 1, "an epoch >= 1, or null")
    return run


def network_of(described: dict, overrides: list[str]) -> NetworkConfig:
    """The typed network a finished run ran on (``described``: its ``summary.json``'s
    ``network``) with ``overrides`` applied, composed as a run composes them: a preset among them
    (``network=eth25g``) describes the cluster on its own, its keys and no longer the run's, then
    the ``network.*`` overrides; without one, the run's own link is the base. A replay or a later
    run under exactly that cluster."""
    preset = any(o.split("=", 1)[0] in ("network", "+network") for o in overrides)
    return check(compose((["network.calibrate_share=null"] if preset else link_overrides(described))
                         + overrides)).network


def calibrate(cfg: dict | RootConfig) -> RootConfig:
    """``cfg`` under its calibrated network (unchanged where ``network.calibrate_share`` is unset)."""
    return calibrated(typed_run(cfg))


def run(cfg: dict | RootConfig, worker: WorkerFn = run_training) -> Any:
    """Check ``cfg``, calibrate its network and run ``worker`` on every rank; rank 0's return."""
    return launch(calibrate(check(cfg)), worker)

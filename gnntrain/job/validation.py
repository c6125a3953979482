"""What the schemas' types cannot express, checked before any worker starts.

Every component checks its own keys, given its typed section: the model
(:meth:`~gnntrain.models.registry.ModelSpec.check`), the strategy's family and method
(:meth:`~gnntrain.strategies.registry.Method.check`), the dataset's source
(:class:`~gnntrain.data.sources.Source`), and the root sections, each by its schema's
``validate``. :func:`validate` runs those hooks, then the rules that tie two components
together. What depends on where the job runs is checked here too, before anything starts: the
number of workers the device and backend allow (:func:`resolve_world_size`), the strategy's
layout on them (:func:`job_layout`) and what a launch by torchrun or submitit rules out
(:func:`check_launcher`). Each failure is a ConfigError naming the bad value and the valid ones.
"""

from __future__ import annotations

import os

import torch

from gnntrain.config.schema import RootConfig, check, check_seed
from gnntrain.data.sources import dataset_source
from gnntrain.errors import ConfigError
from gnntrain.job.launch.join import under_torchrun
from gnntrain.models import build_model, model_spec
from gnntrain.parallel.mesh import Layout
from gnntrain.strategies import METHODS, graph_parallel, method, strategy_class
from gnntrain.timing.cluster import modelled


def validate(run: RootConfig) -> None:
    """Every component's checks of its own keys, then the rules between components."""
    run.dataset.validate()
    dataset_source(run.dataset.source).check(run.dataset)
    check_seed("seed", run.seed)
    check_seed("dataset.split_seed", run.dataset.split_seed)
    if isinstance(getattr(run.strategy, "seed", None), int):
        check_seed("strategy.seed", run.strategy.seed)
    for section in (run.train, run.cluster, run.partition, run.network):
        section.validate()
    model_spec(run.model.name).check(run.model, run.train.weight_decay)
    method(run.strategy.name).check(run.strategy)
    if run.train.dtype == "bfloat16" and run.cluster.device != "cuda":
        raise ConfigError(f"train.dtype=bfloat16 on cluster.device={run.cluster.device}: torch's CPU sparse "
                          "matmul has no bfloat16 kernel; valid there: float32, float64 (or strategy.halo_dtype="
                          "bfloat16 for 16-bit halos)")
    against = run.network.calibrate_against
    if against is not None:
        check("network.calibrate_against", against, against in METHODS,
              f"a strategy ({', '.join(sorted(METHODS))}) or null")
    if run.cluster.clock == "virtual":
        check("network.mode", run.network.mode, run.network.mode == "modelled",
              "modelled with cluster.clock=virtual (the kernel's links are real: time them with cluster.clock=wall)")
    elif modelled(run.network):
        raise ConfigError(f"cluster.clock=wall with network={run.network.name} ({run.network.bandwidth_gbps:g} Gbit/s): "
                          "a described link is timed by the virtual clock, nothing sleeps; valid: cluster.clock=virtual "
                          "or auto, or a real link: network=none, network.mode=kernel")
    if run.fault.link_down:
        check("fault.link_down", True, run.network.mode == "kernel",
              "false without network.mode=kernel (only the kernel's links can go down)")
    if run.model.precompute_first:
        validate_precompute_first(run)
    if run.dataset.inductive:
        require_graph_parallel("dataset.inductive", run)


def require_graph_parallel(setting: str, run: RootConfig) -> None:
    """``setting``=true is for the graph-parallel strategies only."""
    name = run.strategy.name
    members = [n for n, m in METHODS.items() if m.family is graph_parallel.FAMILY]
    if name not in members:
        raise ConfigError(f"{setting}=true with strategy={name}; valid: a graph-parallel strategy "
                          f"({', '.join(members)})")


def validate_precompute_first(run: RootConfig) -> None:
    """``model.precompute_first`` needs a graph-parallel strategy and a first layer that
    aggregates its input with fixed weights (so its aggregation can run once)."""
    require_graph_parallel("model.precompute_first", run)
    if build_model(run.model, 1, 1).summed_input_layer is None:
        raise ConfigError(f"model.precompute_first=true with model={run.model.name}, whose first layer does not "
                          "aggregate its input with fixed weights; valid: model=gcn or sage")


def resolve_world_size(run: RootConfig) -> int:
    """The number of workers: torchrun's world, all visible GPUs (``world_size: 0`` on
    ``cluster.device=cuda``), or ``cluster.world_size``; checks that the device and backend
    can run them."""
    cluster = run.cluster
    gpus = torch.cuda.device_count() if cluster.device == "cuda" else 0
    if cluster.device == "cuda" and gpus == 0:
        raise ConfigError(f"cluster.device=cuda (cluster={cluster.name}) but no CUDA GPU is visible; "
                          "valid here: cluster.device=cpu (cluster=local)")
    if cluster.backend == "nccl" and cluster.device != "cuda":
        raise ConfigError(f"cluster.backend=nccl needs cluster.device=cuda, got cluster.device={cluster.device}; "
                          "valid on cpu: cluster.backend=gloo")
    if under_torchrun():
        return int(os.environ["WORLD_SIZE"])
    world_size = cluster.world_size or gpus
    if world_size < 1:
        raise ConfigError(f"cluster.world_size={cluster.world_size} must be >= 1 for cluster={cluster.name}")
    if cluster.backend == "nccl" and world_size > gpus:
        raise ConfigError(f"cluster.world_size={world_size} exceeds the {gpus} visible GPUs: NCCL needs one GPU "
                          "per worker (cluster.backend=gloo lets workers share a GPU)")
    return world_size


def job_layout(run: RootConfig, world_size: int) -> Layout:
    """The strategy's layout on ``world_size`` workers; ``partition.parts``, when set, must be
    the number of parts it needs."""
    name = run.strategy.name
    layout = strategy_class(name).layout(run, world_size)
    layout.check(world_size, name)
    parts = run.partition.parts
    if parts is not None and parts != layout.parts:
        raise ConfigError(f"partition.parts={parts} does not fit strategy={name} on the number of workers "
                          f"({world_size}); valid: {layout.parts} (or leave it unset)")
    return layout


def check_launcher(run: RootConfig) -> None:
    """What a job started by torchrun or submitit cannot do: place its workers in network
    namespaces (``network.mode=kernel``), which only a job gnntrain spawns can."""
    if under_torchrun() and run.network.mode == "kernel":
        raise ConfigError("network.mode=kernel places the workers gnntrain spawns in network namespaces; under "
                          "torchrun or submitit the launcher places them; valid: network.mode=modelled")

"""What the schemas' types cannot express, checked before any worker starts.

Every component checks its own keys, given its typed section: the model
(:meth:`~gnntrain.models.registry.ModelSpec.check`), the strategy's family and method
(:meth:`~gnntrain.strategies.registry.Method.check`), the dataset's source
(:class:`~gnntrain.data.registry.Source`), and the root sections, each by its schema's
``validate``. :func:`validate` runs those hooks, then the rules that tie two components
together. Each failure is a ConfigError naming the bad value and the valid ones.
"""

from __future__ import annotations

from gnntrain.config.schema import RootConfig, check
from gnntrain.data.registry import validate_dataset
from gnntrain.errors import ConfigError
from gnntrain.models import build_model, model_spec
from gnntrain.strategies import METHODS, graph_parallel, method


def validate(run: RootConfig) -> None:
    """Every component's checks of its own keys, then the rules between components."""
    validate_dataset(run.dataset)
    model_spec(run.model.name).check(run.model, run.train.weight_decay)
    for section in (run.train, run.cluster, run.partition, run.network):
        section.validate()
    method(run.strategy.name).check(run.strategy)
    if run.train.dtype == "bfloat16" and run.cluster.device != "cuda":
        raise ConfigError(f"train.dtype=bfloat16 on cluster.device={run.cluster.device}: torch's CPU sparse "
                          "matmul has no bfloat16 kernel; valid there: float32, float64 (or strategy.halo_dtype="
                          "bfloat16 for 16-bit halos)")
    against = run.network.calibrate_against
    if against is not None:
        check("network.calibrate_against", against, against in METHODS,
              f"a strategy ({', '.join(sorted(METHODS))}) or null")
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

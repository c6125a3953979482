"""Structured config: the single source of truth for every key ``gnntrain`` accepts.

Hydra composes ``conf/config.yaml`` with one option from each group (``dataset``, ``model``,
``strategy``, ``cluster``); each option's YAML starts from a schema (stored in the
``schema/<group>`` config group): the root ones of :mod:`gnntrain.config.schema`, or a strategy
family's own, so a misspelt key or a value of the wrong type fails at composition time instead
of deep inside a worker. :func:`validate` then checks what types cannot express.
"""

from __future__ import annotations

import math

from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from gnntrain.config.schema import (
    ClusterConfig, DatasetConfig, ModelConfig, NetworkConfig, RootConfig, StrategyConfig, SweeperConfig, SyntheticConfig,
    TrainConfig,
    check,
)
from gnntrain.errors import ConfigError


def register_schemas() -> None:
    """Put the schemas in Hydra's ConfigStore, under ``schema`` and ``schema/<group>``; every
    registered model and strategy also becomes the ``model`` or ``strategy`` option of its name,
    built from its config dataclass (:mod:`gnntrain.models.registry`,
    :mod:`gnntrain.strategies.registry`)."""
    # imported here, not above: the models' and strategies' schemas import gnntrain.config.schema
    from gnntrain.models import MODELS
    from gnntrain.strategies import METHODS

    cs = ConfigStore.instance()
    cs.store(name="schema", node=RootConfig)
    cs.store(group="schema/dataset", name="dataset", node=DatasetConfig)
    cs.store(group="schema/dataset", name="synthetic", node=SyntheticConfig)
    cs.store(group="schema/model", name="model", node=ModelConfig)
    for name, spec in MODELS.items():
        cs.store(group="schema/model", name=name, node=spec.config)
        cs.store(group="model", name=name, node=spec.config(name=name))
    cs.store(group="schema/strategy", name="strategy", node=StrategyConfig)
    for name, method in METHODS.items():
        cs.store(group="schema/strategy", name=name, node=method.config)
        cs.store(group="strategy", name=name, node=method.config(name=name))
    cs.store(group="schema/cluster", name="cluster", node=ClusterConfig)
    cs.store(group="schema/network", name="network", node=NetworkConfig)
    cs.store(group="hydra/sweeper", name="gnntrain", node=SweeperConfig, provider="gnntrain")
    register_sweeper()


def register_sweeper() -> None:
    """Make gnntrain's sweeper known to Hydra, which finds plugins by listing the ``hydra_plugins``
    folders, which an editable install has none of. Imported after Hydra's scan of its plugins,
    which executes the basic sweeper's module again: the subclass must extend the class it left."""
    from hydra.core.plugins import Plugins

    plugins = Plugins.instance()
    from hydra_plugins.gnntrain_sweeper import KnobSweeper

    plugins.register(KnobSweeper)


def validate(cfg: dict) -> None:
    """Checks the schemas' types cannot express; raises ConfigError naming the bad value. The
    strategy's own keys are checked by its family and itself (:meth:`~gnntrain.strategies.registry.Method.check`)."""
    from gnntrain.config.typed import run_config
    from gnntrain.data.registry import validate_dataset
    from gnntrain.models import build_model, model_spec
    from gnntrain.models.decay import parameter_decays
    from gnntrain.strategies import method

    model_spec(cfg["model"]["name"])
    method(cfg["strategy"]["name"])
    validate_dataset(cfg["dataset"])
    run = run_config(cfg)
    model, train = run.model, run.train
    check("model.layers", model.layers, model.layers >= 1, ">= 1")
    check("model.hidden", model.hidden, model.hidden >= 1, ">= 1")
    check("model.dropout", model.dropout, 0.0 <= model.dropout < 1.0, "in [0, 1)")
    for key, rule in (("epochs", 1), ("eval_every", 1), ("warmup_epochs", 0), ("patience", 0)):
        check(f"train.{key}", getattr(train, key), getattr(train, key) >= rule, f">= {rule}")
    check("train.lr", train.lr, math.isfinite(train.lr) and train.lr >= 0, "finite and >= 0")
    cluster = run.cluster
    check("cluster.timeout_s", cluster.timeout_s, cluster.timeout_s >= 1, ">= 1 (seconds)")
    check("cluster.prepare_timeout_s", cluster.prepare_timeout_s, cluster.prepare_timeout_s >= 1, ">= 1 (seconds)")
    check("cluster.master_port", cluster.master_port, 0 <= cluster.master_port <= 65535,
          "in 1..65535, or 0 for any free port")
    check("cluster.threads_per_worker", cluster.threads_per_worker, cluster.threads_per_worker >= 0,
          ">= 0 (0: cores / local workers)")
    if train.target is not None:
        check("train.target", train.target, 0 < train.target <= 1, "a validation score in (0, 1], or null")
    if train.dtype == "bfloat16" and run.cluster.device != "cuda":
        raise ConfigError(f"train.dtype=bfloat16 on cluster.device={run.cluster.device}: torch's CPU sparse "
                          "matmul has no bfloat16 kernel; valid there: float32, float64 (or strategy.halo_dtype="
                          "bfloat16 for 16-bit halos)")
    validate_checkpointing(run.train)
    if hasattr(model, "heads"):
        check("model.heads", model.heads, model.heads >= 1 and model.hidden % model.heads == 0,
              f"a divisor of model.hidden={model.hidden}")
        check("model.out_heads", model.out_heads, model.out_heads >= 1, ">= 1")
        check("model.att_dropout", model.att_dropout, 0.0 <= model.att_dropout < 1.0, "in [0, 1)")
    if model.decay_groups:
        parameter_decays([name for name, _ in build_model(model, 2, 2).named_parameters()], model.decay_groups,
                         train.weight_decay)
    if model.name == "gcnii":
        check("model.norm", model.norm, model.norm == "none", "none for gcnii (it has no norm layers)")
    partition = run.partition
    if partition.parts is not None:
        check("partition.parts", partition.parts, partition.parts >= 1, ">= 1")
    if partition.objective == "vol":
        by_metis = partition.method == "metis" and not partition.assignment
        check("partition.objective", "vol", by_metis, "cut unless METIS partitions the graph (partition.method=metis, "
              "no partition.assignment): vol is METIS's objective")
    validate_network(run.network)
    method(run.strategy.name).check(run.strategy)
    if model.precompute_first:
        validate_precompute_first(run)
    if run.dataset.inductive:
        require_graph_parallel("dataset.inductive", run)


def require_graph_parallel(setting: str, run: RootConfig) -> None:
    """``setting``=true is for the graph-parallel strategies only."""
    from gnntrain.strategies import METHODS, graph_parallel

    name = run.strategy.name
    members = [n for n, m in METHODS.items() if m.family is graph_parallel.FAMILY]
    if name not in members:
        raise ConfigError(f"{setting}=true with strategy={name}; valid: a graph-parallel strategy "
                          f"({', '.join(members)})")


def validate_precompute_first(run: RootConfig) -> None:
    """``model.precompute_first`` needs a graph-parallel strategy and a first layer that
    aggregates its input with fixed weights (so its aggregation can run once)."""
    from gnntrain.models import build_model

    require_graph_parallel("model.precompute_first", run)
    if build_model(run.model, 1, 1).summed_input_layer is None:
        raise ConfigError(f"model.precompute_first=true with model={run.model.name}, whose first layer does not "
                          "aggregate its input with fixed weights; valid: model=gcn or sage")


def validate_checkpointing(train: TrainConfig) -> None:
    check("train.checkpoint_every", train.checkpoint_every, train.checkpoint_every >= 0, ">= 0 (0: none)")
    resume = train.resume
    check("train.resume", resume, isinstance(resume, bool) or (isinstance(resume, str) and resume != ""),
          "true, false or a run dir")


def validate_network(net: NetworkConfig) -> None:
    emulated = net.bandwidth_gbps is not None
    if emulated:
        check("network.bandwidth_gbps", net.bandwidth_gbps, net.bandwidth_gbps > 0, "> 0")
    check("network.latency_us", net.latency_us, net.latency_us >= 0, ">= 0")
    if net.gpus_per_node is not None:
        check("network.gpus_per_node", net.gpus_per_node, net.gpus_per_node >= 1, ">= 1 (or null: one level)")
        bw = net.intra_bandwidth_gbps
        check("network.intra_bandwidth_gbps", bw, bw is not None and bw > 0, "> 0 when network.gpus_per_node is set")
        check("network.intra_latency_us", net.intra_latency_us, net.intra_latency_us >= 0, ">= 0")
    share = net.calibrate_share
    if share is not None:
        check("network.calibrate_share", share, emulated,
              "null without an emulated network (pick one: network=eth10g, eth25g, pcie3, ib100, two_level)")
        check("network.calibrate_share", share, 0 < share < 1, "in (0, 1)")
        check("network.probe_epochs", net.probe_epochs, net.probe_epochs >= 2, ">= 2")
    against = net.calibrate_against
    if against is not None:
        from gnntrain.strategies import METHODS

        check("network.calibrate_against", against, against in METHODS,
              f"a strategy ({', '.join(sorted(METHODS))}) or null")


def flatten(tree: dict, prefix: str = "") -> dict:
    """A nested config as ``{"a.b.c": value}``."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def one_line(exc: BaseException) -> str:
    """The user-facing line for an error: ours as they are; a composition error naming the
    valid choices or keys."""
    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        group, _, option = exc.missing_cfg_file.rpartition("/")
        choices = ", ".join(sorted(exc.options or []))
        return f"unknown {group or 'config'} '{option}'; valid: {choices}"
    cause = exc.__cause__ if isinstance(exc, HydraException) and exc.__cause__ else exc
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None)
        msg = str(cause).splitlines()[0]
        valid = _valid_keys(cause)
        return f"{key}: {msg}{valid}" if key else msg + valid
    return " ".join(str(exc).split())


def _valid_keys(cause: OmegaConfBaseException) -> str:
    parent = getattr(cause, "parent_node", None)
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and isinstance(parent, DictConfig):
        return f" (valid keys here: {', '.join(str(k) for k in parent.keys())})"
    return ""

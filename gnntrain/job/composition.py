"""The composition boundary: what Hydra needs to compose a gnntrain config, and the one
conversion of the composed config into the typed one everything after it reads.

* :func:`register_schemas` puts the schemas in Hydra's ConfigStore, under ``schema`` and
  ``schema/<group>``; every registered model and strategy also becomes the ``model`` or
  ``strategy`` option of its name, built from its config dataclass
  (:mod:`gnntrain.models.registry`, :mod:`gnntrain.strategies.registry`), and every dataset
  source's config is ``schema/dataset/<name>``, a generator's also the ``dataset`` option of its
  name (:mod:`gnntrain.data.sources`);
* :func:`typed_run` turns the plain composed config into :class:`~gnntrain.config.schema.RootConfig`
  (:func:`gnntrain.config.typed.run_config`), the model's, the strategy's and the dataset's
  sections as the dataclasses they registered. A spawned worker receives the plain config and types it here
  too, after its imports have registered the plugins' classes.
"""

from __future__ import annotations

from dataclasses import replace

from hydra.core.config_store import ConfigStore

from gnntrain.config.schema import (
    ClusterConfig, DatasetConfig, ModelConfig, NetworkConfig, RootConfig, StrategyConfig, SweeperConfig,
)
from gnntrain.config.typed import run_config
from gnntrain.data.sources import SOURCES, dataset_source
from gnntrain.models import MODELS, model_spec
from gnntrain.strategies import METHODS, method
from gnntrain.timing.cluster import modelled


def register_schemas() -> None:
    """The schemas and every registered model and strategy in Hydra's ConfigStore, with the
    config of gnntrain's sweeper (the CLI registers its class, :func:`gnntrain.commands.train.register_sweeper`)."""
    cs = ConfigStore.instance()
    cs.store(name="schema", node=RootConfig)
    cs.store(group="schema/dataset", name="dataset", node=DatasetConfig)
    for name, source in SOURCES.items():
        if source.config is not DatasetConfig:
            cs.store(group="schema/dataset", name=name, node=source.config)
        if source.is_a_dataset:
            cs.store(group="dataset", name=name, node=source.config(name=name, source=name))
    cs.store(group="schema/model", name="model", node=ModelConfig)
    for name, spec in MODELS.items():
        cs.store(group="schema/model", name=name, node=spec.config)
        cs.store(group="model", name=name, node=spec.config(name=name))
    cs.store(group="schema/strategy", name="strategy", node=StrategyConfig)
    for name, declared in METHODS.items():
        cs.store(group="schema/strategy", name=name, node=declared.config)
        cs.store(group="strategy", name=name, node=declared.config(name=name))
    cs.store(group="schema/cluster", name="cluster", node=ClusterConfig)
    cs.store(group="schema/network", name="network", node=NetworkConfig)
    cs.store(group="hydra/sweeper", name="gnntrain", node=SweeperConfig, provider="gnntrain")


def option_schema(group: str, name: str) -> type:
    """The config dataclass the ``model`` or ``strategy`` option ``name``, or the ``dataset`` source
    ``name``, registered; ConfigError naming the valid ones for an unknown name."""
    if group == "dataset":
        return dataset_source(name).config
    return model_spec(name).config if group == "model" else method(name).config


def typed_run(cfg: dict | RootConfig) -> RootConfig:
    """The composed config ``cfg`` (plain, or typed already) as the typed root config, its
    ``auto`` clock settings resolved (:func:`resolved_clock`)."""
    return resolved_clock(run_config(cfg, option_schema))


def resolved_clock(run: RootConfig) -> RootConfig:
    """``cluster.clock=auto`` as the clock it means: virtual where the network describes a link to
    model, wall on a real transport; ``cluster.virtual_compute=auto``: alone for ranks of more
    than one thread on a CPU, thread otherwise."""
    cluster = run.cluster
    if cluster.clock == "auto":
        cluster = replace(cluster, clock="virtual" if modelled(run.network) else "wall")
    if cluster.virtual_compute == "auto":
        several = cluster.clock == "virtual" and cluster.device == "cpu" and cluster.threads_per_worker > 1
        cluster = replace(cluster, virtual_compute="alone" if several else "thread")
    return run if cluster is run.cluster else replace(run, cluster=cluster)

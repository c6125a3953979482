"""Structured config schemas: the single source of truth for every key ``gnntrain`` accepts.

Hydra composes ``conf/config.yaml`` with one option from each group (``dataset``, ``model``,
``strategy``, ``cluster``); each option's YAML starts from one of the schemas below, or of a
strategy family's (stored in the ``schema/<group>`` config group), so a misspelt key or a value of the wrong type fails at
composition time instead of deep inside a worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

DEFAULT_DATA_ROOT = "${oc.env:GNNTRAIN_DATA,${oc.env:HOME,.}/.cache/gnntrain/data}"
DEFAULT_CACHE_DIR = "${oc.env:GNNTRAIN_CACHE,${oc.env:HOME,.}/.cache/gnntrain}"


class PartitionMethod(str, Enum):
    metis = "metis"
    random = "random"


class Optimizer(str, Enum):
    adam = "adam"
    sgd = "sgd"


class Precision(str, Enum):
    float32 = "float32"
    float64 = "float64"


class WandbMode(str, Enum):
    online = "online"
    offline = "offline"
    disabled = "disabled"


class Norm(str, Enum):
    none = "none"
    layer = "layer"
    batch = "batch"


class Backend(str, Enum):
    gloo = "gloo"
    nccl = "nccl"


class Device(str, Enum):
    cpu = "cpu"
    cuda = "cuda"


@dataclass
class DatasetConfig:
    """A graph from the dataset registry (``gnntrain.data.registry``)."""

    name: str = MISSING
    root: str = DEFAULT_DATA_ROOT
    to_undirected: bool = True
    split: int = 0
    split_seed: int = 0
    download: bool = True


@dataclass
class SyntheticConfig(DatasetConfig):
    """Parameters of the planted-community generator (``gnntrain.data.synthetic``)."""

    name: str = "synthetic"
    num_nodes: int = 2000
    avg_degree: float = 10.0
    num_classes: int = 5
    num_features: int = 32
    homophily: float = 0.8
    degree_exponent: float = 2.5
    feature_noise: float = 1.0
    graph_seed: int = 0
    train_frac: float = 0.6
    val_frac: float = 0.2


@dataclass
class ModelConfig:
    """A model from ``gnntrain.models``: ``layers`` counts message-passing layers, input to output."""

    name: str = MISSING
    layers: int = 2
    hidden: int = 16
    dropout: float = 0.5
    norm: Norm = Norm.none


@dataclass
class GATConfig(ModelConfig):
    """``hidden`` is the concatenated width of the ``heads`` attention heads."""

    heads: int = 8


@dataclass
class GCNIIConfig(ModelConfig):
    """``alpha``: initial-residual weight; ``theta`` (the paper's lambda): identity-mapping
    strength, ``beta_l = log(theta / l + 1)``."""

    alpha: float = 0.1
    theta: float = 0.5


@dataclass
class DeepGCNConfig(ModelConfig):
    """GENConv softmax aggregation: initial inverse temperature ``t``, learnt if ``learn_t``."""

    t: float = 1.0
    learn_t: bool = True


@dataclass
class StrategyConfig:
    """A training strategy from ``gnntrain.strategies``."""

    name: str = MISSING


@dataclass
class ClusterConfig:
    """Where the workers run. ``device``: what each worker trains on (``cuda``: GPU
    ``local_rank % visible GPUs``). NCCL needs ``cuda`` and one GPU per worker; gloo runs on
    either, and its workers may share a GPU. ``world_size: 0`` means one worker per visible GPU."""

    name: str = MISSING
    world_size: int = 2
    backend: Backend = Backend.gloo
    device: Device = Device.cpu
    threads_per_worker: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 0
    timeout_s: int = 300


@dataclass
class PartitionConfig:
    """Node partitioning; ``parts: null`` means one part per worker."""

    method: PartitionMethod = PartitionMethod.metis
    parts: Optional[int] = None
    cache_dir: str = DEFAULT_CACHE_DIR


@dataclass
class TrainConfig:
    epochs: int = 100
    lr: float = 0.01
    weight_decay: float = 0.0
    optimizer: Optimizer = Optimizer.adam
    eval_every: int = 1
    warmup_epochs: int = 2
    dtype: Precision = Precision.float32
    """Floating-point type of features, parameters and messages (float64 for numerical checks)."""


@dataclass
class WandbConfig:
    mode: WandbMode = "${oc.env:WANDB_MODE,offline}"  # type: ignore[assignment]
    project: str = "gnntrain"
    group: Optional[str] = None


@dataclass
class FaultConfig:
    """Fault injection for testing the launcher: ``rank`` exits with an error at ``epoch``."""

    rank: Optional[int] = None
    epoch: Optional[int] = None


@dataclass
class RootConfig:
    dataset: Any = MISSING
    model: Any = MISSING
    strategy: Any = MISSING
    cluster: Any = MISSING
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    fault: FaultConfig = field(default_factory=FaultConfig)
    seed: int = 0


def register_schemas() -> None:
    """Put the schemas in Hydra's ConfigStore, under ``schema`` and ``schema/<group>``; each
    strategy family contributes its own (``SCHEMAS`` next to its code)."""
    from gnntrain.strategies import FAMILIES

    cs = ConfigStore.instance()
    cs.store(name="schema", node=RootConfig)
    cs.store(group="schema/dataset", name="dataset", node=DatasetConfig)
    cs.store(group="schema/dataset", name="synthetic", node=SyntheticConfig)
    cs.store(group="schema/model", name="model", node=ModelConfig)
    cs.store(group="schema/model", name="gat", node=GATConfig)
    cs.store(group="schema/model", name="gcnii", node=GCNIIConfig)
    cs.store(group="schema/model", name="deepgcn", node=DeepGCNConfig)
    cs.store(group="schema/strategy", name="strategy", node=StrategyConfig)
    for family in FAMILIES:
        for name, schema in family.SCHEMAS.items():
            cs.store(group="schema/strategy", name=name, node=schema)
    cs.store(group="schema/cluster", name="cluster", node=ClusterConfig)


def check(key: str, value: Any, ok: bool, rule: str) -> None:
    """Raise ConfigError ``key=value is invalid; it must be rule`` unless ``ok``."""
    if not ok:
        from gnntrain.errors import ConfigError

        raise ConfigError(f"{key}={value} is invalid; it must be {rule}")


def validate(cfg: dict) -> None:
    """Checks the schemas' types cannot express; raises ConfigError naming the bad value. The
    strategy's own keys are checked by its family."""
    from gnntrain.data.registry import DATASETS
    from gnntrain.errors import ConfigError
    from gnntrain.models import MODELS
    from gnntrain.strategies import STRATEGIES, family_of

    for section, registry in (("dataset", DATASETS), ("model", MODELS), ("strategy", STRATEGIES)):
        name = cfg[section]["name"]
        if name not in registry:
            raise ConfigError(f"unknown {section}.name '{name}'; valid: {', '.join(sorted(registry))}")
    model = cfg["model"]
    check("model.layers", model["layers"], model["layers"] >= 1, ">= 1")
    check("model.hidden", model["hidden"], model["hidden"] >= 1, ">= 1")
    check("model.dropout", model["dropout"], 0.0 <= model["dropout"] < 1.0, "in [0, 1)")
    for key, rule in (("epochs", 1), ("eval_every", 1), ("warmup_epochs", 0)):
        check(f"train.{key}", cfg["train"][key], cfg["train"][key] >= rule, f">= {rule}")
    check("train.lr", cfg["train"]["lr"], cfg["train"]["lr"] >= 0, ">= 0")
    if "heads" in model:
        check("model.heads", model["heads"], model["heads"] >= 1 and model["hidden"] % model["heads"] == 0,
              f"a divisor of model.hidden={model['hidden']}")
    if model["name"] == "gcnii":
        check("model.norm", model["norm"], model["norm"] == "none", "none for gcnii (it has no norm layers)")
    parts = cfg["partition"]["parts"]
    if parts is not None:
        check("partition.parts", parts, parts >= 1, ">= 1")
    family_of(cfg["strategy"]["name"]).validate(cfg["strategy"])
